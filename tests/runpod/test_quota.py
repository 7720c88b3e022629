"""RunPod's RateLimit header, read so polling slows down before a 429."""

from __future__ import annotations

import pytest

from frutebox_infra.runpod.quota import Quota, Window, parse


def test_the_documented_example_reads_into_windows() -> None:
    quota = parse('"minute";r=0;t=12, "hour";r=2800;t=1812, "day";r=49500;t=45012')
    assert quota.windows == (
        Window("minute", 0, 12),
        Window("hour", 2800, 1812),
        Window("day", 49500, 45012),
    )


@pytest.mark.parametrize(
    ("header", "pace"),
    [
        ('"minute";r=0;t=12', 12.0),  # nothing left: wait for the reset
        ('"minute";r=1;t=12', 12.0),  # the last one is kept for a teardown
        ('"minute";r=31;t=30', 1.0),
        ('"minute";r=59;t=60, "hour";r=11;t=100', 10.0),  # the strictest window decides
    ],
)
def test_pace_spreads_what_is_left_over_the_time_left(header: str, pace: float) -> None:
    assert parse(header).pace_s() == pytest.approx(pace)


def test_no_header_or_an_unreadable_one_paces_nothing() -> None:
    assert Quota().pace_s() == 0
    assert parse('garbage, ;;, "minute";r=x').pace_s() == 0
    assert Quota().updated({}) == Quota()
