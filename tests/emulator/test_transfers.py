"""The emulated pods' starts and speeds: the plan's bring-up assumptions, or instant."""

from __future__ import annotations

import pytest

from frutebox_infra.emulator.realism import Realism
from frutebox_infra.emulator.transfers import Transfers
from frutebox_infra.seeding.bringup import (
    CPU_POD_START_S,
    DOWNLOAD_MB_PER_S,
    GPU_POD_START_S,
    VOLUME_READ_MB_PER_S,
)


def test_the_realistic_speeds_are_the_plans_assumptions() -> None:
    speeds = Transfers.realistic()
    assert speeds.download_mb_per_s == DOWNLOAD_MB_PER_S
    assert dict(speeds.read_mb_per_s) == VOLUME_READ_MB_PER_S
    assert (speeds.gpu_start_s, speeds.cpu_start_s) == (GPU_POD_START_S, CPU_POD_START_S)
    assert Realism.realistic().transfers == speeds


def test_an_override_changes_only_what_it_names() -> None:
    slow = Transfers.realistic(download_mb_per_s=1.0)
    assert slow.download_mb_per_s == 1.0 and slow.gpu_start_s == GPU_POD_START_S


@pytest.mark.parametrize(
    ("speeds", "download_s", "read_s"),
    [
        pytest.param(Transfers.realistic(), 10.0, 1e9 / 237e6, id="realistic"),
        pytest.param(Transfers(), 0.0, 0.0, id="instant"),
    ],
)
def test_a_gigabyte_takes_its_size_over_the_speed(
    speeds: Transfers, download_s: float, read_s: float
) -> None:
    assert speeds.download_s(1_000_000_000) == pytest.approx(download_s)
    assert speeds.read_s(1_000_000_000, "STANDARD") == pytest.approx(read_s)


def test_a_faster_tier_reads_faster_and_an_unknown_one_is_instant() -> None:
    speeds = Transfers.realistic()
    assert speeds.read_s(10**9, "HIGH_PERFORMANCE") < speeds.read_s(10**9, "STANDARD")
    assert speeds.read_s(10**9, "NO_SUCH_TIER") == 0.0
    assert Realism.fast().transfers == Transfers()
