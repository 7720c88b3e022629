"""The emulated account's one clock: wall time in real seconds, the system's or a test's.

Every time the emulator reads (stamps, listing lags, restarts, loads, quota windows, fault
periods, billing) comes from one `Clock` the account is given. `Realism.time_scale` is not a
second clock: it shrinks each emulated duration into the real seconds it lasts on this one
(`Realism.real_s`), so stamps stay wall time and a state file outlives a restart.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol

MANUAL_START_S = datetime(2026, 11, 30, 12, 0, tzinfo=UTC).timestamp()
"""Where a manual clock starts unless told: a fixed instant, so stamps in tests repeat."""


class Clock(Protocol):
    """Wall time; implementations subclass it to inherit `utc`."""

    def now(self) -> float:
        """Seconds since the epoch."""
        ...

    def utc(self) -> datetime:
        """`now()` as an aware UTC datetime."""
        return datetime.fromtimestamp(self.now(), UTC)


class SystemClock(Clock):
    """Wall time that never steps back: the epoch seconds at start plus monotonic time since,
    so quota windows and fault periods hold when the system's clock is set."""

    def __init__(self) -> None:
        self._epoch_s = time.time()
        self._start = time.monotonic()

    def now(self) -> float:
        return self._epoch_s + (time.monotonic() - self._start)


class SteppedClock(SystemClock):
    """Wall time that also jumps when told: a served test lets its pods bill and serve for
    simulated hours in seconds (`advance`), while everything else runs on as it does."""

    def __init__(self) -> None:
        super().__init__()
        self._offset_s = 0.0

    def now(self) -> float:
        return super().now() + self._offset_s

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a clock only moves forwards, not by {seconds} s")
        self._offset_s += seconds


class ManualClock(Clock):
    """Time that moves only when a test advances it: every lag and window without a sleep."""

    def __init__(self, start_s: float = MANUAL_START_S) -> None:
        self._now = start_s

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a clock only moves forwards, not by {seconds} s")
        self._now += seconds
