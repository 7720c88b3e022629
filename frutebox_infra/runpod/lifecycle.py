"""Pod and volume lifecycles: place, wait for RUNNING and healthy, pull, or tear down.

Who may terminate a pod on failure: only the run that created it (`bring_up`). A pod that
an update patched is recorded in the stack, so a failed update reports and leaves it
(`settle_update`): the user decides, and nothing is orphaned either way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from frutebox_infra.runpod import ollama
from frutebox_infra.runpod.adopting import ensure_gone
from frutebox_infra.runpod.client import RunPodClient
from frutebox_infra.runpod.errors import (
    MayStillBillError,
    NotFoundError,
    PodFailedError,
    ProtocolError,
    RunPodError,
)
from frutebox_infra.runpod.listing import missing_files
from frutebox_infra.runpod.placement import Ownership, Placement, place
from frutebox_infra.runpod.proxy import ProxyClient
from frutebox_infra.runpod.retrying import TRANSIENT, retry_after_s
from frutebox_infra.runpod.wire import Pod

# Inside a wait these mean "the API cannot say right now", never "the pod failed".
UNKNOWN: tuple[type[Exception], ...] = (*TRANSIENT, ProtocolError)
LOG_LINES = 15

LIVE = frozenset({"PROVISIONING", "STARTING", "RUNNING"})
DEAD = frozenset({"ERROR", "EXITED", "TERMINATED"})

Log = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class Timeouts:
    """Bounds of one bring-up, in seconds; these defaults are the only home of the numbers."""

    running_s: float = 900.0
    healthy_s: float = 1800.0
    poll_interval_s: float = 5.0
    api_check_s: float = 60.0
    """While waiting for health the proxy probe is the signal; the API is asked this rarely
    whether the pod died, so a fleet's waits stay far inside RunPod's quotas."""
    duplicate_check_s: float = 30.0
    """After an ambiguous create, how long to let RunPod's listing catch up before looking
    for a second pod the first request may have made."""
    delete_s: float = 300.0
    pull_s: float = 3600.0


# What users can change: the running bound only from the environment; the health bound is a
# stack key the program sends (the environment variable, when set, wins over it).
RUNNING_HINT = (
    f"set FRUTEBOX_RUNNING_TIMEOUT_S (seconds, default {Timeouts.running_s:g}) in the"
    " environment of `pulumi up`"
)
HEALTH_HINT = (
    "raise the stack key frutebox-infra:healthTimeoutSeconds (`pulumi config set"
    " frutebox-infra:healthTimeoutSeconds 3600`), or set FRUTEBOX_HEALTH_TIMEOUT_S, which"
    " overrides it"
)


@dataclass(frozen=True, kw_only=True)
class Health:
    """Where a pod answers when its server is ready."""

    port: int
    path: str
    expected_files: tuple[str, ...] = ()
    """Files the server must list (ComfyUI /models/<kind>) before it counts as healthy."""


class Provisioner:
    """Runs a pod's create/wait/teardown rules against one account."""

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

    def place(
        self,
        name: str,
        candidates: Sequence[Mapping[str, Any]],
        owner: Ownership,
        timeouts: Timeouts,
    ) -> Placement:
        """Create a pod from the first candidate that places, cheapest first."""
        return place(
            self.api,
            name,
            candidates,
            owner,
            sleep=self._sleep,
            log=self._log,
            duplicate_check_s=timeouts.duplicate_check_s,
        )

    # Waiting: every wait reads 429, 5xx and no answer as "unknown" and keeps going until its
    # own deadline, honouring Retry-After and the quota the API reports.

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

    def log_tail(self, pod_id: str) -> str:
        """The last lines of the pod's log, for an error to show what the server said."""
        try:
            lines = self.api.pod_logs(pod_id, tail=LOG_LINES)
        except RunPodError:
            lines = []
        if not lines:
            return ""
        return " Last log lines: " + " | ".join(line.strip() for line in lines) + "."

    def wait_running(self, pod_id: str, timeouts: Timeouts) -> Pod:
        deadline = self._clock() + timeouts.running_s
        status = "unknown"
        while True:
            try:
                pod, failure = self._read(pod_id, "waiting for RUNNING")
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
            self._pause(deadline, timeouts.poll_interval_s, failure)

    def wait_healthy(self, pod_id: str, health: Health, timeouts: Timeouts) -> None:
        """Probe the health URL through the proxy; ask the API only every `api_check_s`."""
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
                next_check = self._clock() + timeouts.api_check_s
                pod, failure = self._read(pod_id, "waiting for health")
                status = pod.status if pod is not None else status
                if status in DEAD:
                    raise PodFailedError(
                        f"Pod {pod_id} went to {status} while we waited for {url} to answer."
                        " Fix the recipe, then `pulumi up`." + self.log_tail(pod_id),
                        pod_id=pod_id,
                        last_status=status,
                    )
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
            self._sleep(
                max(0.001, min(timeouts.poll_interval_s, max(0.0, deadline - self._clock())))
            )
            if failure is not None and retry_after_s(failure):
                self._pause(deadline, 0.0, failure)

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

    def pull(self, pod_id: str, health: Health, tag: str, timeouts: Timeouts) -> None:
        """Ask the pod's Ollama server to pull `tag`; its image cannot do it from args."""
        url = self.proxy.url(pod_id, health.port) + "/api/pull"
        self._log(f"pod {pod_id}: pulling {tag} through ollama")

        def log(message: str) -> None:
            self._log(f"pod {pod_id}: {message}")

        why = ollama.pull(
            self.proxy, url, tag, timeout_s=timeouts.pull_s, clock=self._clock, log=log
        )
        if why is None:
            return
        raise PodFailedError(
            f"Pod {pod_id}: ollama could not pull {tag} ({why}). Check that the tag exists"
            " (ollama.com/library) and the volume has room, then run `pulumi up` again.",
            pod_id=pod_id,
            last_status="RUNNING",
        )

    def serve(
        self, pod_id: str, *, health: Health, ollama_tags: Sequence[str], timeouts: Timeouts
    ) -> Pod:
        """RUNNING, healthy and pulled; a failure raises and leaves the pod as it is."""
        pod = self.wait_running(pod_id, timeouts)
        self._log(f"pod {pod_id} is RUNNING; waiting for {health.path} on port {health.port}")
        self.wait_healthy(pod_id, health, timeouts)
        for tag in self._unlisted_tags(pod_id, health, ollama_tags):
            self.pull(pod_id, health, tag, timeouts)
        self.check_listed(pod_id, health, ollama_tags)
        self._log(f"pod {pod_id} is serving")
        return pod

    def _unlisted_tags(self, pod_id: str, health: Health, tags: Sequence[str]) -> list[str]:
        """The tags a new pod must pull: those its model store (seeded, or kept from an
        earlier pod) does not list; every tag when the server gives no listing."""
        if not tags:
            return []
        absent = ollama.missing(self.proxy, self.proxy.url(pod_id, health.port), tags)
        listed = [t for t in tags if absent is not None and t not in absent]
        if listed:
            self._log(f"pod {pod_id}: {', '.join(listed)} already in its store; not pulled")
        return list(tags) if absent is None else absent

    def check_listed(self, pod_id: str, health: Health, tags: Sequence[str]) -> None:
        """Every member's model is on the server: a shared pod serving some of its members
        is not healthy."""
        if not tags:
            return
        url = self.proxy.url(pod_id, health.port)
        absent = ollama.missing(self.proxy, url, tags)
        if absent == []:
            return
        what = "does not answer GET /api/tags" if absent is None else (
            f"does not list {', '.join(absent)} after pulling it")  # fmt: skip
        raise PodFailedError(
            f"Pod {pod_id}: ollama {what}. Check the pod's log in the RunPod console, then run"
            " `pulumi up` again.",
            pod_id=pod_id,
            last_status="RUNNING",
        )

    def forget(self, pod: Pod, *, health: Health, tags: Sequence[str]) -> None:
        """Delete models a shared pod no longer serves (a disarmed member); a failure is
        logged, not fatal: the remaining members serve, the model only takes disk."""
        url = self.proxy.url(pod.id, health.port)
        for tag in tags:
            why = ollama.delete(self.proxy, url, tag)
            self._log(
                f"pod {pod.id}: removed {tag}, which it no longer serves"
                if why is None
                else f"pod {pod.id}: could not remove {tag} ({why}); it stays on the volume"
            )

    def bring_up(
        self, pod_id: str, *, health: Health, ollama_tags: Sequence[str], timeouts: Timeouts
    ) -> Pod:
        """`serve` a pod this run created; any failure (or cancellation) terminates it."""
        try:
            return self.serve(pod_id, health=health, ollama_tags=ollama_tags, timeouts=timeouts)
        except BaseException as exc:
            self._tear_down_after(pod_id, exc)
            raise

    def settle_update(
        self,
        before: Pod,
        patched: Pod,
        *,
        health: Health,
        ollama_tags: Sequence[str],
        timeouts: Timeouts,
        patched_at: float,
    ) -> Pod:
        """Wait for a PATCHed pod to restart and serve; on failure report, never terminate."""
        try:
            self.wait_restarted(before, patched, timeouts, patched_at=patched_at)
            return self.serve(before.id, health=health, ollama_tags=ollama_tags, timeouts=timeouts)
        except RunPodError as exc:
            raise left_running(exc, before.id, "was updated in place but does not serve") from exc

    def refresh_pull(
        self, pod: Pod, *, health: Health, tags: Sequence[str], timeouts: Timeouts
    ) -> None:
        """Pull `tags` again into a pod left unchanged: a changed tag changes nothing else.

        Ollama answers at once when the model is already there, so this does not wait.
        """
        if pod.status != "RUNNING":
            self._log(f"pod {pod.id} is {pod.status}; not pulling {', '.join(tags)} now")
            return
        try:
            for tag in tags:
                self.pull(pod.id, health, tag, timeouts)
            self.check_listed(pod.id, health, tags)
        except RunPodError as exc:
            raise left_running(exc, pod.id, "is unchanged but could not pull") from exc

    def _tear_down_after(self, pod_id: str, failure: BaseException) -> None:
        try:
            self.terminate(pod_id)
        except RunPodError as exc:
            raise MayStillBillError(
                f"{failure} Terminating pod {pod_id} failed too ({exc}): it may still bill —"
                " delete it in the RunPod console.",
                kind="pod",
                ids=(pod_id,),
            ) from exc
        self._log(f"pod {pod_id} terminated so that it does not bill")
        if isinstance(failure, RunPodError):
            raise PodFailedError(
                f"{failure} Pod {pod_id} was terminated so that it does not bill.",
                pod_id=pod_id,
                last_status=getattr(failure, "last_status", "unknown"),
            ) from failure

    def clock(self) -> float:
        return self._clock()

    # The same reads and pauses for another resource's wait (a seeding pod's status).

    def read_pod(self, pod_id: str, phase: str) -> tuple[Pod | None, BaseException | None]:
        """The pod, or (None, why) while the API cannot answer; a 404 raises."""
        return self._read(pod_id, phase)

    def pause(self, deadline: float, interval: float, failure: BaseException | None = None) -> None:
        """Sleep `interval` (longer when the quota or a Retry-After asks), never past `deadline`."""
        self._pause(deadline, interval, failure)

    def terminate(self, pod_id: str, *, within_s: float = Timeouts.delete_s) -> bool:
        """Delete the pod; False when it was already gone. Transient failures are retried
        until `within_s` has passed: a pod left billing is the worst outcome."""
        deadline = self._clock() + within_s
        while True:
            try:
                self.api.delete_pod(pod_id)
                return True
            except NotFoundError:
                ensure_gone("pod", pod_id, self.api.list_pods)
                return False
            except UNKNOWN as exc:
                if self._clock() >= deadline:
                    raise
                self._log(f"pod {pod_id}: delete: the API did not answer ({exc}); trying again")
                self._pause(deadline, self.api.retry.backoff(1), exc)


def left_running(failure: RunPodError, pod_id: str, what: str) -> PodFailedError:
    """The failure of a pod this run did not create: said, and the pod left to the user."""
    return PodFailedError(
        f"{failure} Pod {pod_id} {what}; it was left running because the stack records it"
        " (it is no orphan) and this run did not create it. Look at it in the RunPod console,"
        " then fix the recipe and run `pulumi up` again, or remove it with `pulumi destroy`.",
        pod_id=pod_id,
        last_status=getattr(failure, "last_status", "unknown"),
    )
