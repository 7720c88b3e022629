"""Armed windows: when a model has a pod. `Mon-Fri 08:00-20:00 Europe/Berlin` arms it on
weekdays from 08:00 to 20:00 Berlin time; outside, it has no pod and its weights stay on the
volume. Days: `daily`, a range (`Mon-Fri`) or a list (`Mon,Wed,Fri`, `Mon-Wed,Sat`); hours on
the quarter hour (the `windows.yml` workflow runs every 15 minutes), start before end, `24:00`
for midnight at the end; a named IANA time zone.

Pure apart from reading the time-zone database (`zoneinfo`, stdlib). The time a run plans at
is given (`FRUTEBOX_NOW`, else the clock read once per run), never read here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
EXAMPLE = "Mon-Fri 08:00-20:00 Europe/Berlin"
FIX = (
    "days (daily, Mon-Fri or Mon,Wed,Fri), hours HH:MM-HH:MM on the quarter hour with start"
    f" before end, and an IANA time zone, e.g. {EXAMPLE}"
)
_SHAPE = re.compile(r"^(?P<days>\S+)\s+(?P<start>\d\d:\d\d)-(?P<end>\d\d:\d\d)\s+(?P<zone>\S+)$")
WEEK_HOURS = 168.0


@dataclass(frozen=True, kw_only=True)
class ArmedWindow:
    """A parsed window: weekdays (Monday 0), minutes from midnight [start, end), its zone."""

    text: str
    days: frozenset[int]
    start_min: int
    end_min: int
    zone: str

    @property
    def hours_per_week(self) -> float:
        return len(self.days) * (self.end_min - self.start_min) / 60

    @property
    def openings_per_week(self) -> int:
        return len(self.days)

    def _tz(self) -> ZoneInfo:
        return ZoneInfo(self.zone)

    def armed_at(self, now: datetime) -> bool:
        local = now.astimezone(self._tz())
        minute = local.hour * 60 + local.minute
        return local.weekday() in self.days and self.start_min <= minute < self.end_min

    def next_edge(self, now: datetime) -> datetime:
        """The next time (after `now`) the window opens or closes, as an aware datetime."""
        tz = self._tz()
        local = now.astimezone(tz)
        day = local.replace(hour=0, minute=0, second=0, microsecond=0)
        for offset in range(8):
            base = (day + timedelta(days=offset)).replace(tzinfo=None)
            if base.weekday() not in self.days:
                continue
            for minute in (self.start_min, self.end_min):
                edge = (base + timedelta(minutes=minute)).replace(tzinfo=tz)
                if edge > local:
                    return edge
        raise AssertionError("a window with days has an edge within a week")


def _day(word: str) -> int:
    if word not in DAY_NAMES:
        raise ValueError(f"{word!r} is not a day ({', '.join(DAY_NAMES)})")
    return DAY_NAMES.index(word)


def _days(text: str) -> frozenset[int]:
    if text == "daily":
        return frozenset(range(7))
    days: set[int] = set()
    for part in text.split(","):
        if "-" in part:
            first, last = (_day(w) for w in part.split("-", 1))
            if last < first:
                raise ValueError(f"day range {part!r} runs backwards (Mon is first)")
            days.update(range(first, last + 1))
        else:
            days.add(_day(part))
    return frozenset(days)


def _minutes(text: str) -> int:
    hours, minutes = int(text[:2]), int(text[3:])
    if minutes % 15 or minutes >= 60 or hours > 24 or (hours == 24 and minutes):
        raise ValueError(f"{text} is not a time on the quarter hour from 00:00 to 24:00")
    return hours * 60 + minutes


def parse_window(text: str) -> ArmedWindow:
    """`text` as a window; a ValueError saying what is wrong with it."""
    match = _SHAPE.match(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not `DAYS HH:MM-HH:MM ZONE`")
    start, end = _minutes(match["start"]), _minutes(match["end"])
    if start >= end:
        raise ValueError(f"{match['start']}-{match['end']} does not start before it ends")
    try:
        ZoneInfo(match["zone"])
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{match['zone']!r} is not an IANA time zone") from None
    return ArmedWindow(
        text=text.strip(),
        days=_days(match["days"]),
        start_min=start,
        end_min=end,
        zone=match["zone"],
    )


def checked_window(value: str | None, _: object) -> str | None:
    """A settings validator: an empty or valid window, else the reason and the fix."""
    if value:
        try:
            parse_window(value)
        except ValueError as exc:
            raise ValueError(str(exc)) from None
    return value
