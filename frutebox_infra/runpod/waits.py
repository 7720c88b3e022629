"""Waiting for a pod: RUNNING, a restart after a PATCH, health through the proxy (or, for a
private pod, a container that stays up), and a crash loop seen while it lasts.

Every wait reads 429, 5xx and no answer as "unknown" and keeps going until its own deadline,
honouring Retry-After and the quota the API reports. While health is probed through the proxy
(which costs no API quota) the API is asked only every `api_check_s` whether the pod died or
its container restarts; once a restart is seen, every `restart_check_s`, and the system log is
read to count the starts a read may have missed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from frutebox_infra.runpod.client import RunPodClient
from frutebox_infra.runpod.errors import (
    CrashLoopError,
    NotFoundError,
    PodFailedError,
    ProtocolError,
    RunPodError,
)
from frutebox_infra.runpod.listing import missing_files
from frutebox_infra.runpod.proxy import ProxyClient
from frutebox_infra.runpod.restarts import START_LINE, RestartWatch
from frutebox_infra.runpod.retrying import TRANSIENT, retry_after_s
from frutebox_infra.runpod.timeouts import HEALTH_HINT, RUNNING_HINT, Timeouts
from frutebox_infra.runpod.wire import Pod

# Inside a wait these mean "the API cannot say right now", never "the pod failed".
UNKNOWN: tuple[type[Exception], ...] = (*TRANSIENT, ProtocolError)
LOG_LINES = 15
START_LOG_TAIL = 200
"""System-log lines read to count container starts (a bring-up fails long before that many)."""

LIVE = frozenset({"PROVISIONING", "STARTING", "RUNNING"})
DEAD = frozenset({"ERROR", "EXITED", "TERMINATED"})

Log = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class Health:
    """Where a pod answers when its server is ready."""

    port: int
    path: str
    expected_files: tuple[str, ...] = ()
    """Files the server must list (ComfyUI /models/<kind>) before it counts as healthy."""
    pulls_on_pod: bool = False
    """The pod's own launch pulls its Ollama tags before its server answers (a gateway in
    front refuses /api/pull and /api/delete to everyone): the deploy step only checks that
    they are listed."""


class Looker(Protocol):
    """Something to do as a wait goes on (the look for what an ambiguous create made): a wait
    looks when one is due, and sleeps no longer than until the next one."""

    def look_if_due(self) -> None:
        """A look when one is due; a transient failure is logged, never raised."""

    def due_in(self) -> float:
        """Seconds until the next look is due; infinity when none is."""


def until_look(interval: float, looker: Looker | None) -> float:
    """`interval`, shortened so that a wait wakes when `looker`'s next look is due."""
    return interval if looker is None else min(interval, looker.due_in())


class Waits:
    """The waits of a pod's bring-up against one account (the Provisioner builds on them)."""

    def __init__(
        self,
        api: RunPodClient,
        proxy: ProxyClient,
        *,
        log: Log,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.proxy = proxy
        self._log = log
        self._sleep = sleep
        self._clock = clock

    def clock(self) -> float:
        return self._clock()

    def _pause(self, deadline: float, interval: float, failure: BaseException | None) -> None:
        wait = max(interval, self.api.quota.pace_s())
        asked = retry_after_s(failure) if failure is not None else None
        if asked is not None:
            wait = max(wait, asked)
        self._sleep(max(0.0, min(wait, deadline - self._clock())) or 0.001)

    def _read(self, pod_id: str, phase: str) -> tuple[Pod | None, BaseException | None]:
        """The pod, or (None, why) while the API cannot answer."""
        try:
            return self.api.get_pod(pod_id, retry=False), None
        except UNKNOWN as exc:
            self._log(f"pod {pod_id}: {phase}: the API did not answer ({exc}); still waiting")
            return None, exc

    def pause(self, deadline: float, interval: float, failure: BaseException | None = None) -> None:
        """Sleep `interval` (longer when the quota or a Retry-After asks), never past
        `deadline`: for another resource's wait (a seeding pod's status)."""
        self._pause(deadline, interval, failure)

    def watched_read(
        self, pod_id: str, phase: str, watch: RestartWatch, timeouts: Timeouts
    ) -> tuple[Pod | None, BaseException | None]:
        """One API check of another resource's wait: the pod, or (None, why) while the API
        cannot answer; shown to `watch`, so a crash loop raises CrashLoopError."""
        return self._watched_read(pod_id, phase, watch, timeouts)

    def _watched_read(
        self, pod_id: str, phase: str, watch: RestartWatch | None, timeouts: Timeouts
    ) -> tuple[Pod | None, BaseException | None]:
        """`_read`, shown to the restart watch; a crash loop raises CrashLoopError."""
        sent = self._clock()
        pod, failure = self._read(pod_id, phase)
        if pod is not None and watch is not None:
            self._watch(pod_id, pod, watch, timeouts, sent=sent, answered=self._clock())
        return pod, failure

    def log_tail(self, pod_id: str) -> str:
        """The last lines of the pod's log, for an error to show what the server said."""
        try:
            lines = self.api.pod_logs(pod_id, tail=LOG_LINES)
        except RunPodError:
            lines = []
        if not lines:
            return ""
        return " Last log lines: " + " | ".join(line.strip() for line in lines) + "."

    def logged_starts(self, pod_id: str) -> int | None:
        """How many container starts the pod's system log shows; None when it cannot say
        (not read, or more lines than one read holds)."""
        lines = self.api.read_pod_logs(pod_id, tail=START_LOG_TAIL, source="system")
        if lines is None or len(lines) >= START_LOG_TAIL:
            return None
        return sum(1 for line in lines if line.strip().lower().endswith(START_LINE))

    def _watch(
        self, pod_id: str, pod: Pod, watch: RestartWatch, timeouts: Timeouts, **at: float
    ) -> None:
        seen = watch.see(pod, **at)
        if seen or watch.container_down:
            starts = self.logged_starts(pod_id)
            if starts is not None:
                seen = watch.logged(starts, self._clock()) or seen
        if seen:
            self._log(
                f"pod {pod_id}: its container restarted ({watch.restarts} restart(s) seen) while"
                f" the pod stays {pod.status}; a crash loop fails after"
                f" {timeouts.restart_limit} or {timeouts.crash_window_s:g}s"
            )
        if watch.first_seen is None:
            return
        lasted = self._clock() - watch.first_seen
        if watch.restarts >= timeouts.restart_limit or lasted >= timeouts.crash_window_s:
            raise CrashLoopError(
                f"Pod {pod_id} crash-loops: RunPod restarted its container {watch.restarts}"
                f" time(s) ({lasted:.0f}s after the first) while the pod stayed RUNNING, so it"
                " would bill without ever serving. Its server exits at start (a flag or value"
                " the engine rejects, weights it cannot load, too little memory): fix the"
                " launch (registry/images.yaml, registry/models.yaml or the stack's overrides),"
                " then run `pulumi up`." + self.log_tail(pod_id),
                pod_id=pod_id,
                restarts=watch.restarts,
            )

    def wait_running(
        self,
        pod_id: str,
        timeouts: Timeouts,
        *,
        watch: RestartWatch | None = None,
        looker: Looker | None = None,
    ) -> Pod:
        deadline = self._clock() + timeouts.running_s
        status = "unknown"
        while True:
            if looker is not None:
                looker.look_if_due()
            try:
                pod, failure = self._watched_read(pod_id, "waiting for RUNNING", watch, timeouts)
            except NotFoundError as exc:
                raise PodFailedError(
                    f"Pod {pod_id} vanished while we waited for RUNNING (404). Run the command"
                    " again to create a new one.",
                    pod_id=pod_id,
                    last_status="NOT FOUND",
                ) from exc
            if pod is not None:
                status = pod.status
                if pod.status == "RUNNING":
                    return pod
                if pod.status in DEAD:
                    raise PodFailedError(
                        f"Pod {pod_id} went to {pod.status} instead of RUNNING. Check the image"
                        " and args, fix them, then run `pulumi up`." + self.log_tail(pod_id),
                        pod_id=pod_id,
                        last_status=pod.status,
                    )
            if self._clock() >= deadline:
                raise PodFailedError(
                    f"Pod {pod_id} was still {status} after {timeouts.running_s:g}s of waiting"
                    f" for RUNNING. Large images can take long to pull: {RUNNING_HINT}, or"
                    " retry later." + self.log_tail(pod_id),
                    pod_id=pod_id,
                    last_status=status,
                )
            self._pause(deadline, until_look(timeouts.poll_interval_s, looker), failure)

    def wait_healthy(
        self,
        pod_id: str,
        health: Health,
        timeouts: Timeouts,
        *,
        watch: RestartWatch | None = None,
        looker: Looker | None = None,
    ) -> None:
        """Probe the health URL through the proxy; ask the API only every `api_check_s`
        (every `restart_check_s` once `watch` saw a restart); `looker` looks when due."""
        url = self.proxy.url(pod_id, health.port) + health.path
        deadline = self._clock() + timeouts.healthy_s
        last: int | None = None
        status = "RUNNING"
        missing: list[str] = []
        next_check = self._clock() + timeouts.api_check_s
        while True:
            last = self.proxy.probe(url)
            if last is not None and 200 <= last < 300:
                missing = self._unlisted(pod_id, health)
                if not missing:
                    return
            failure: BaseException | None = None
            if self._clock() >= next_check or self._clock() >= deadline:
                pod, failure = self._watched_read(pod_id, "waiting for health", watch, timeouts)
                restarting = watch is not None and watch.restarts > 0
                interval = timeouts.restart_check_s if restarting else timeouts.api_check_s
                next_check = self._clock() + interval
                status = pod.status if pod is not None else status
                if status in DEAD:
                    raise PodFailedError(
                        f"Pod {pod_id} went to {status} while we waited for {url} to answer."
                        " Fix the recipe, then `pulumi up`." + self.log_tail(pod_id),
                        pod_id=pod_id,
                        last_status=status,
                    )
            if looker is not None:
                looker.look_if_due()
            if self._clock() >= deadline:
                answer = f"HTTP {last}" if last is not None else "no answer"
                if missing:
                    answer += f" but the server never listed {', '.join(missing)}"
                raise PodFailedError(
                    f"Pod {pod_id} ({status}) never became healthy: {url} gave {answer} for"
                    f" {timeouts.healthy_s:g}s. A large model may need longer: {HEALTH_HINT}."
                    + self.log_tail(pod_id),
                    pod_id=pod_id,
                    last_status=status,
                )
            # The probe costs no API quota, so it keeps its own pace; only a 429 slows it.
            interval = until_look(timeouts.poll_interval_s, looker)
            self._sleep(max(0.001, min(interval, max(0.0, deadline - self._clock()))))
            if failure is not None and retry_after_s(failure):
                self._pause(deadline, 0.0, failure)

    def wait_steady(
        self,
        pod_id: str,
        timeouts: Timeouts,
        *,
        watch: RestartWatch | None = None,
        looker: Looker | None = None,
    ) -> Pod:
        """A private pod (no published port) cannot be asked its health path from outside:
        return once RunPod shows it RUNNING with its container up for `steady_s` since its
        last start (`runtime.uptime`). A crash loop still fails as fast as `watch` sees it,
        a dead status at once; never steady within `healthy_s`, it fails as a health wait
        does."""
        deadline = self._clock() + timeouts.healthy_s
        status, uptime = "RUNNING", None
        while True:
            if looker is not None:
                looker.look_if_due()
            pod, failure = self._watched_read(pod_id, "waiting for a steady container", watch,
                                              timeouts)  # fmt: skip
            if pod is not None:
                status, uptime = pod.status, pod.uptime_s
                if status in DEAD:
                    raise PodFailedError(
                        f"Pod {pod_id} went to {status} while its container was watched."
                        " Fix the recipe, then `pulumi up`." + self.log_tail(pod_id),
                        pod_id=pod_id,
                        last_status=status,
                    )
                if status == "RUNNING" and uptime is not None and uptime >= timeouts.steady_s:
                    return pod
            if self._clock() >= deadline:
                up = "never up" if uptime is None else f"up {uptime:g}s at most"
                raise PodFailedError(
                    f"Pod {pod_id} ({status}, {up}) never kept its container up for"
                    f" {timeouts.steady_s:g}s within {timeouts.healthy_s:g}s. It is private"
                    " (no published port), so only its container could be watched."
                    f" {HEALTH_HINT}." + self.log_tail(pod_id),
                    pod_id=pod_id,
                    last_status=status,
                )
            restarting = watch is not None and watch.restarts > 0
            pace = timeouts.restart_check_s if restarting else timeouts.poll_interval_s
            self._pause(deadline, until_look(pace, looker), failure)

    def _unlisted(self, pod_id: str, health: Health) -> list[str]:
        if not health.expected_files:
            return []
        base = self.proxy.url(pod_id, health.port)
        return missing_files(self.proxy.get_json, base, health.expected_files)

    def wait_restarted(
        self, before: Pod, patched: Pod, timeouts: Timeouts, *, patched_at: float
    ) -> None:
        """Return once the PATCHed pod shows a restart, so health is not read off the old process.

        RunPod keeps showing the old container, RUNNING with its old `startedAt`, for a while
        after a PATCH. A restart shows as a status other than RUNNING, a new `startedAt`, or a
        `runtime.uptime` shorter than the time since the PATCH (`patched_at`, on our clock).
        """

        def restarted(pod: Pod) -> bool:
            if pod.status != "RUNNING" or pod.started_at != before.started_at:
                return True
            uptime = pod.uptime_s
            return uptime is not None and uptime < self._clock() - patched_at

        deadline = self._clock() + timeouts.running_s
        pod: Pod | None = patched
        last = patched
        while pod is None or not restarted(pod):
            if self._clock() >= deadline:
                raise PodFailedError(
                    f"Pod {before.id} was updated but RunPod showed no restart within"
                    f" {timeouts.running_s:g}s (still {last.status}, up"
                    f" {last.uptime_s}s), so its server may still run the old settings;"
                    f" restart it from the RunPod console, or {RUNNING_HINT}.",
                    pod_id=before.id,
                    last_status=last.status,
                )
            self._pause(deadline, timeouts.poll_interval_s, None)
            pod, failure = self._read(before.id, "waiting for the restart")
            last = pod or last
            if failure is not None:
                self._pause(deadline, 0.0, failure)
