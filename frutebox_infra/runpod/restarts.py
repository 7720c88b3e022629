"""Seeing a container restart under a RUNNING pod, from the pod's reads and its system log.

RunPod's pod status is the desired state: a container that exits is started again and the pod
stays RUNNING. A restart shows as a new `startedAt`, a `runtime.uptime` shorter than the time
since an earlier read that saw the container up, the status leaving RUNNING and coming back,
and a `start container` line in the system log for each start.
"""

from __future__ import annotations

from dataclasses import dataclass

from frutebox_infra.runpod.wire import Pod

START_LINE = "start container"
"""RunPod's system-log line each time it starts a pod's container."""


@dataclass(frozen=True)
class Reading:
    """A pod read: what it showed, and our clock just before the request and after the answer
    (the API's own moment of answering lies between the two)."""

    status: str
    started_at: str | None
    uptime_s: float | None
    sent: float
    answered: float

    @classmethod
    def of(cls, pod: Pod, sent: float, answered: float) -> Reading:
        return cls(pod.status, pod.started_at, pod.uptime_s, sent, answered)

    @property
    def resolution_s(self) -> float:
        """How much a reported uptime may fall short of the truth: RunPod reports whole
        seconds (truncated); a fraction is reported to the millisecond."""
        if self.uptime_s is None:
            return 0.0
        return 1.0 if float(self.uptime_s).is_integer() else 0.001


def restarted_between(up_before: Reading, now: Reading) -> bool:
    """Did the container that `up_before` saw running restart by `now`?

    Both readings showed RUNNING with a runtime. The container `now` reports started
    `uptime` before the API answered; if that is certainly after `up_before` was answered, a
    new container runs. Conservative on both clocks: the API answered `now` no earlier than
    `now.sent`, and `up_before` no later than `up_before.answered`.
    """
    if up_before.started_at and now.started_at and up_before.started_at != now.started_at:
        return True
    if now.uptime_s is None:
        return False
    return now.uptime_s + now.resolution_s < now.sent - up_before.answered


class RestartWatch:
    """Counts the restarts of one pod's container from its reads and its system log.

    `logged_before` is how many `start container` lines the system log held before the
    container this watch expects began: 0 for a pod this run created, the count read just
    before a PATCH for an update, None when unknown (then the log is not used to count).
    """

    def __init__(self, *, logged_before: int | None = 0) -> None:
        self.restarts = 0
        self.first_seen: float | None = None
        """Our clock when the first restart was seen."""
        self._logged_before = logged_before
        self.container_down = False
        """The last read showed RUNNING without a runtime after one had been seen: the
        container exited (or its host died) and is not running again yet."""
        self._left_running = False
        self._up: Reading | None = None
        """The latest reading that saw the container RUNNING with a runtime."""

    def see(self, pod: Pod, *, sent: float, answered: float) -> bool:
        """Take one read; True when it shows a restart the watch had not counted."""
        now = Reading.of(pod, sent, answered)
        seen = False
        if now.status != "RUNNING":
            self._left_running = self._left_running or self._up is not None
            return False
        self.container_down = now.uptime_s is None and self._up is not None
        if self._left_running:
            self._left_running, seen = False, True
        elif self._up is not None and now.uptime_s is not None:
            seen = restarted_between(self._up, now)
        if now.uptime_s is not None:
            self._up = now
        if seen:
            self._count(self.restarts + 1, answered)
        return seen

    def logged(self, starts: int, at: float) -> bool:
        """The system log shows `starts` container starts; True when that is a new restart."""
        if self._logged_before is None:
            return False
        restarts = starts - self._logged_before - 1
        if restarts <= self.restarts:
            return False
        self._count(restarts, at)
        return True

    def _count(self, restarts: int, at: float) -> None:
        self.restarts = max(self.restarts, restarts)
        if self.first_seen is None:
            self.first_seen = at
