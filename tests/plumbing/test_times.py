"""RFC 3339 times, as RunPod writes them and users type them, read by one rule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from frutebox_infra.plumbing.times import parse_time, time_or_none

BERLIN_WINTER = timezone(timedelta(hours=1))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-12-03T18:00:00Z", datetime(2026, 12, 3, 18, tzinfo=UTC)),
        (" 2026-12-03T18:00:00Z\n", datetime(2026, 12, 3, 18, tzinfo=UTC)),
        ("2026-12-03T18:00:00.250Z", datetime(2026, 12, 3, 18, 0, 0, 250_000, tzinfo=UTC)),
        ("2026-12-07T08:00:00+01:00", datetime(2026, 12, 7, 8, tzinfo=BERLIN_WINTER)),
        ("2026-12-03 18:00", datetime(2026, 12, 3, 18, tzinfo=UTC)),  # no zone: UTC
    ],
)
def test_a_time_is_read_aware(text: str, expected: datetime) -> None:
    at = parse_time(text)
    assert at == expected and at.utcoffset() == expected.utcoffset()


@pytest.mark.parametrize("text", ["", "tomorrow", "2026-13-01T00:00:00Z", "18:00"])
def test_what_is_no_time_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_time(text)


@pytest.mark.parametrize("text", [None, "", "not a time"])
def test_an_empty_or_malformed_value_is_no_time(text: str | None) -> None:
    assert time_or_none(text) is None


def test_a_value_is_read_as_parse_time_reads_it() -> None:
    assert time_or_none("2026-12-03T18:00:00Z") == datetime(2026, 12, 3, 18, tzinfo=UTC)
