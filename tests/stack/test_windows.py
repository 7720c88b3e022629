"""Armed windows: parsing with clear errors, armed or not at a time in the window's zone, the
next edge, and the hours a week."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from frutebox_infra.plumbing.errors import ConfigError
from frutebox_infra.stack.environment import Environment
from frutebox_infra.stack.windows import parse_window
from tests.factories import settings

BERLIN = "Mon-Fri 08:00-20:00 Europe/Berlin"


def test_a_window_is_armed_on_its_days_and_hours_in_its_zone() -> None:
    w = parse_window(BERLIN)
    assert w.hours_per_week == 60 and w.openings_per_week == 5
    # Thursday 2026-12-03, Berlin is UTC+1 in winter: 08:00 there is 07:00 UTC.
    assert not w.armed_at(datetime(2026, 12, 3, 6, 59, tzinfo=UTC))
    assert w.armed_at(datetime(2026, 12, 3, 7, 0, tzinfo=UTC))
    assert not w.armed_at(datetime(2026, 12, 3, 19, 0, tzinfo=UTC))  # 20:00 Berlin: closed
    assert not w.armed_at(datetime(2026, 12, 5, 12, 0, tzinfo=UTC))  # Saturday
    # Friday evening: the next edge is Monday's opening.
    edge = w.next_edge(datetime(2026, 12, 4, 20, 0, tzinfo=UTC))
    assert edge.isoformat() == "2026-12-07T08:00:00+01:00"
    summer = w.next_edge(datetime(2026, 7, 1, 5, 0, tzinfo=UTC))  # UTC+2 in summer
    assert summer.astimezone(UTC).hour == 6


@pytest.mark.parametrize(
    ("text", "days", "hours"),
    [
        ("daily 00:00-24:00 UTC", 7, 168),
        ("Mon,Wed,Fri 09:15-17:45 America/New_York", 3, 3 * 8.5),
        ("Mon-Wed,Sat 10:00-12:00 Asia/Tokyo", 4, 8),
    ],
)
def test_days_and_hours_spellings(text: str, days: int, hours: float) -> None:
    w = parse_window(text)
    assert (len(w.days), w.hours_per_week) == (days, hours)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("Mon-Fri 8-20 Europe/Berlin", "is not `DAYS HH:MM-HH:MM ZONE`"),
        ("Mon-Fri 08:10-20:00 Europe/Berlin", "quarter hour"),
        ("Mon-Fri 20:00-08:00 Europe/Berlin", "does not start before it ends"),
        ("Fri-Mon 08:00-20:00 Europe/Berlin", "runs backwards"),
        ("Mon-Fri 08:00-20:00 Berlin", "not an IANA time zone"),
        ("Moon 08:00-20:00 UTC", "is not a day"),
    ],
)
def test_a_bad_window_is_named_with_its_key_and_fix(text: str, said: str) -> None:
    with pytest.raises(ConfigError) as error:
        settings(models=["qwen3-8b"], overrides={"qwen3-8b": {"armedWindow": text}})
    message = str(error.value)
    assert said in message and "overrides.qwen3-8b.armedWindow" in message
    assert "Fix: days (daily, Mon-Fri or Mon,Wed,Fri)" in message
    with pytest.raises(ConfigError, match="frutebox-infra:armedWindow"):
        settings(models=["qwen3-8b"], armedWindow=text)


def test_the_time_is_given_or_the_clock_read_once() -> None:
    given = Environment.from_env({"FRUTEBOX_NOW": "2026-12-07T08:00:00+01:00"})
    assert given.now == datetime(2026, 12, 7, 7, 0, tzinfo=UTC)
    reads: list[int] = []

    def clock() -> datetime:
        reads.append(1)
        return datetime(2026, 1, 1, tzinfo=UTC)

    assert Environment.from_env({}, clock=clock).now == datetime(2026, 1, 1, tzinfo=UTC)
    assert Environment.from_env({"FRUTEBOX_NOW": "2026-12-07T08:00:00Z"}, clock=clock).now
    assert reads == [1]  # given a time, the clock is not read
    with pytest.raises(ConfigError, match="FRUTEBOX_NOW='soon' is not a time"):
        Environment.from_env({"FRUTEBOX_NOW": "soon"})
