"""Files on a volume across pods, and a pod's download onto it on the account's clock."""

from __future__ import annotations

import pytest

from frutebox_infra.emulator import volume_files as vf
from frutebox_infra.emulator.records import PodRecord, VolumeRecord
from frutebox_infra.emulator.volume_files import Piece

T0 = 1_800_000_000.0
GB = 10**9


def volume(size_gb: int = 10) -> VolumeRecord:
    return VolumeRecord("v1", "w", size_gb, "EU-RO-1")


def pod(started: float | None = T0) -> PodRecord:
    return PodRecord("p1", "p", {}, "RUNNING", "EU-RO-1", 0.1, "", started_wall=started)


def test_a_file_never_shrinks_and_counts_once_complete() -> None:
    v = volume()
    vf.write(v, "a", 100, 40)
    vf.write(v, "a", 100, 10)  # another pod's lagging view
    assert vf.have(v, "a") == 40 and not vf.complete(v, "a", 100)
    vf.write(v, "a", 100, 500)
    assert vf.have(v, "a") == 100 and vf.complete(v, "a", 100)
    assert vf.used_bytes(v) == 100 and vf.free_bytes(v) == 10 * GB - 100
    assert vf.listed(v, "") == ["a"] and vf.missing(v, [Piece("a", 100), Piece("b", 1)]) == [
        Piece("b", 1)
    ]
    vf.remove(v, "a")
    assert vf.have(v, "a") == 0


@pytest.mark.parametrize(
    ("elapsed_s", "present"),
    [
        pytest.param(0.0, [0, 50], id="waiting-for-the-container"),
        pytest.param(2.0, [0, 50], id="at-the-start-offset"),
        pytest.param(3.0, [100, 50], id="first-file-done"),
        pytest.param(3.2, [100, 70], id="second-resumes-its-partial"),
        pytest.param(99.0, [100, 100], id="all-done"),
    ],
)
def test_a_download_moves_its_files_in_order_from_its_start(
    elapsed_s: float, present: list[int]
) -> None:
    v = volume()
    vf.write(v, "b", 100, 50)  # left partial by an earlier pod
    p = pod()
    vf.start_transfer(p, v, [Piece("a", 100), Piece("b", 100)], after_s=2.0, bytes_per_s=100.0)
    assert vf.progress(p, T0 + elapsed_s) == present
    vf.settle(p, v, T0 + elapsed_s)
    assert [vf.have(v, "a"), vf.have(v, "b")] == present
    assert vf.done_at(p) == pytest.approx(T0 + 2.0 + 1.5)


def test_nothing_moves_before_the_container_runs_or_after_the_pod_stopped() -> None:
    v, p = volume(), pod(started=None)
    vf.start_transfer(p, v, [Piece("a", 100)], after_s=0.0, bytes_per_s=10.0)
    assert vf.progress(p, T0 + 100) == [0] and vf.done_at(p) is None
    p.started_wall = T0
    vf.end(p, v, T0 + 4)
    assert vf.progress(p, T0 + 100) == [40]
    assert vf.have(v, "a") == 40


def test_refs_are_written_once_every_file_is_in_place_and_instant_is_at_once() -> None:
    v, p = volume(), pod()
    vf.start_transfer(p, v, [Piece("a", 10)], after_s=0, bytes_per_s=None, refs=[("r", "c1")])
    vf.settle(p, v, T0 - 1)
    assert v.refs == {}
    vf.settle(p, v, T0)
    assert v.refs == {"r": "c1"} and vf.have(v, "a") == 10


def test_a_transfer_onto_another_volume_writes_nothing_here() -> None:
    v, p = volume(), pod()
    vf.start_transfer(p, volume(), [Piece("a", 10)], after_s=0, bytes_per_s=None)
    other = VolumeRecord("v2", "w", 10, "EU-RO-1")
    vf.settle(p, other, T0 + 1)
    assert other.files == {} and v.files == {}
