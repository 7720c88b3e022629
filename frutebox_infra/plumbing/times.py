"""Times as RunPod, the engines and our users write them: RFC 3339, read as one rule.

RunPod answers `2026-12-03T18:00:00Z`, a user may type an offset or none; a time without a
zone is read as UTC, so every time we compare is aware.
"""

from __future__ import annotations

from datetime import UTC, datetime


def parse_time(text: str) -> datetime:
    """`text` as an aware datetime (UTC when it names no zone); ValueError when it is none."""
    at = datetime.fromisoformat(text.strip())
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def time_or_none(text: str | None) -> datetime | None:
    """`parse_time` for a value RunPod may leave empty or send malformed: None instead."""
    if not text:
        return None
    try:
        return parse_time(text)
    except ValueError:
        return None
