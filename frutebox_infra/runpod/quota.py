"""RunPod's quota headers (IETF RateLimit draft), read so polling slows down before a 429.

`RateLimit: "minute";r=12;t=40, "hour";r=2800;t=1812` says, per window, how many requests are
left (`r`) and in how many seconds the window resets (`t`). They come on every authenticated
answer, successes included; an account exempt from limits gets none, and nothing is paced.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

_MEMBER = re.compile(r'"?(?P<name>[A-Za-z0-9_-]+)"?\s*((?:;\s*[a-z]+=[0-9.]+\s*)*)')
_PARAM = re.compile(r";\s*(?P<key>[a-z]+)=(?P<value>[0-9.]+)")


@dataclass(frozen=True)
class Window:
    name: str
    remaining: float
    reset_s: float


@dataclass(frozen=True)
class Quota:
    """The last quota state the API reported; empty until an answer carried one."""

    windows: tuple[Window, ...] = field(default=())

    def updated(self, headers: Mapping[str, str]) -> Quota:
        raw = headers.get("RateLimit") or headers.get("ratelimit")
        return parse(raw) if raw else self

    def pace_s(self) -> float:
        """Seconds to leave between requests so that no window runs dry before it resets.

        Spreads each window's remaining requests evenly over the time it has left (keeping
        one in reserve for the teardown a failure needs) and takes the strictest window.
        """
        pace = 0.0
        for window in self.windows:
            spendable = max(window.remaining - 1, 0)
            wait = window.reset_s if spendable == 0 else window.reset_s / spendable
            pace = max(pace, wait)
        return pace


def parse(value: str) -> Quota:
    """Read a RateLimit header; members it cannot read are skipped, never fatal."""
    windows = []
    for member in value.split(","):
        match = _MEMBER.match(member.strip())
        if match is None:
            continue
        params = {m["key"]: m["value"] for m in _PARAM.finditer(member)}
        try:
            windows.append(Window(match["name"], float(params["r"]), float(params["t"])))
        except (KeyError, ValueError):
            continue
    return Quota(tuple(windows))
