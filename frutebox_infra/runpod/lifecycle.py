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
from frutebox_infra.runpod.client import Pod, ProxyClient, RunPodClient
from frutebox_infra.runpod.errors import NotFoundError, PodFailedError, RunPodError
from frutebox_infra.runpod.listing import missing_files
from frutebox_infra.runpod.placement import Placement, place
from frutebox_infra.runpod.volumes import VolumeRules

LIVE = frozenset({"PROVISIONING", "STARTING", "RUNNING"})
DEAD = frozenset({"ERROR", "EXITED", "TERMINATED"})

Log = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class Timeouts:
    """Bounds of one bring-up, in seconds; these defaults are the only home of the numbers."""

    running_s: float = 900.0
    healthy_s: float = 1800.0
    poll_interval_s: float = 5.0
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


class Provisioner(VolumeRules):
    """Runs the create/wait/teardown rules of SPEC §5 against one account."""

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

    def place(self, name: str, candidates: Sequence[Mapping[str, Any]]) -> Placement:
        """Create a pod from the first candidate that places, cheapest first."""
        return place(self.api, name, candidates, sleep=self._sleep, log=self._log)

    # Waiting

    def wait_running(self, pod_id: str, timeouts: Timeouts) -> Pod:
        deadline = self._clock() + timeouts.running_s
        while True:
            try:
                pod = self.api.get_pod(pod_id)
            except NotFoundError as exc:
                raise PodFailedError(
                    f"Pod {pod_id} vanished while we waited for RUNNING (404). Run the command"
                    " again to create a new one.",
                    pod_id=pod_id,
                    last_status="NOT FOUND",
                ) from exc
            if pod.status == "RUNNING":
                return pod
            if pod.status in DEAD:
                raise PodFailedError(
                    f"Pod {pod_id} went to {pod.status} instead of RUNNING. Check the image and"
                    " args in the pod's logs (RunPod console), fix them, then run `pulumi up`.",
                    pod_id=pod_id,
                    last_status=pod.status,
                )
            if self._clock() >= deadline:
                raise PodFailedError(
                    f"Pod {pod_id} was still {pod.status} after {timeouts.running_s:g}s of waiting"
                    f" for RUNNING. Large images can take long to pull: {RUNNING_HINT}, or"
                    " retry later.",
                    pod_id=pod_id,
                    last_status=pod.status,
                )
            self._sleep(timeouts.poll_interval_s)

    def wait_healthy(self, pod_id: str, health: Health, timeouts: Timeouts) -> None:
        url = self.proxy.url(pod_id, health.port) + health.path
        deadline = self._clock() + timeouts.healthy_s
        last: int | None = None
        missing: list[str] = []
        while True:
            last = self.proxy.probe(url)
            if last is not None and 200 <= last < 300:
                missing = self._unlisted(pod_id, health)
                if not missing:
                    return
            status = self.api.get_pod(pod_id).status
            if status in DEAD:
                raise PodFailedError(
                    f"Pod {pod_id} went to {status} while we waited for {url} to answer. Check"
                    " the server's logs in the RunPod console, fix the recipe, then `pulumi up`.",
                    pod_id=pod_id,
                    last_status=status,
                )
            if self._clock() >= deadline:
                answer = f"HTTP {last}" if last is not None else "no answer"
                if missing:
                    answer += f" but the server never listed {', '.join(missing)}"
                raise PodFailedError(
                    f"Pod {pod_id} ({status}) never became healthy: {url} gave {answer} for"
                    f" {timeouts.healthy_s:g}s. Check the server's logs in the RunPod console;"
                    f" a large model may need longer: {HEALTH_HINT}.",
                    pod_id=pod_id,
                    last_status=status,
                )
            self._sleep(timeouts.poll_interval_s)

    def _unlisted(self, pod_id: str, health: Health) -> list[str]:
        if not health.expected_files:
            return []
        base = self.proxy.url(pod_id, health.port)
        return missing_files(self.proxy.get_json, base, health.expected_files)

    def wait_restarted(self, before: Pod, patched: Pod, timeouts: Timeouts) -> None:
        """Return once the PATCHed pod shows a restart, so health is not read off the old process.

        Right after a PATCH the API may still say RUNNING while the old server answers; a
        restart shows as a status other than RUNNING or as a new `startedAt`.
        """

        def restarted(pod: Pod) -> bool:
            return pod.status != "RUNNING" or pod.started_at != before.started_at

        deadline = self._clock() + timeouts.running_s
        pod = patched
        while not restarted(pod):
            if self._clock() >= deadline:
                raise PodFailedError(
                    f"Pod {before.id} was updated but RunPod showed no restart within"
                    f" {timeouts.running_s:g}s (still RUNNING, started {pod.started_at}), so"
                    " its server may still run the old settings; restart it from the RunPod"
                    f" console, or {RUNNING_HINT}.",
                    pod_id=before.id,
                    last_status=pod.status,
                )
            self._sleep(timeouts.poll_interval_s)
            pod = self.api.get_pod(before.id)

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
        self, pod_id: str, *, health: Health, ollama_tag: str | None, timeouts: Timeouts
    ) -> Pod:
        """RUNNING, healthy and pulled; a failure raises and leaves the pod as it is."""
        pod = self.wait_running(pod_id, timeouts)
        self._log(f"pod {pod_id} is RUNNING; waiting for {health.path} on port {health.port}")
        self.wait_healthy(pod_id, health, timeouts)
        if ollama_tag:
            self.pull(pod_id, health, ollama_tag, timeouts)
        self._log(f"pod {pod_id} is serving")
        return pod

    def bring_up(
        self, pod_id: str, *, health: Health, ollama_tag: str | None, timeouts: Timeouts
    ) -> Pod:
        """`serve` a pod this run created; any failure (or cancellation) terminates it."""
        try:
            return self.serve(pod_id, health=health, ollama_tag=ollama_tag, timeouts=timeouts)
        except BaseException as exc:
            self._tear_down_after(pod_id, exc)
            raise

    def settle_update(
        self,
        before: Pod,
        patched: Pod,
        *,
        health: Health,
        ollama_tag: str | None,
        timeouts: Timeouts,
    ) -> Pod:
        """Wait for a PATCHed pod to restart and serve; on failure report, never terminate."""
        try:
            self.wait_restarted(before, patched, timeouts)
            return self.serve(before.id, health=health, ollama_tag=ollama_tag, timeouts=timeouts)
        except RunPodError as exc:
            raise left_running(exc, before.id, "was updated in place but does not serve") from exc

    def refresh_pull(self, pod: Pod, *, health: Health, tag: str, timeouts: Timeouts) -> None:
        """Pull `tag` again into a pod left unchanged: a changed tag changes nothing else.

        Ollama answers at once when the model is already there, so this does not wait.
        """
        if pod.status != "RUNNING":
            self._log(f"pod {pod.id} is {pod.status}; not pulling {tag} now")
            return
        try:
            self.pull(pod.id, health, tag, timeouts)
        except RunPodError as exc:
            raise left_running(exc, pod.id, "is unchanged but could not pull") from exc

    def _tear_down_after(self, pod_id: str, failure: BaseException) -> None:
        try:
            self.terminate(pod_id)
        except RunPodError as exc:
            raise PodFailedError(
                f"{failure} Terminating pod {pod_id} failed too ({exc}): it may still bill —"
                " delete it in the RunPod console.",
                pod_id=pod_id,
                last_status=getattr(failure, "last_status", "unknown"),
            ) from exc
        self._log(f"pod {pod_id} terminated so that it does not bill")
        if isinstance(failure, RunPodError):
            raise PodFailedError(
                f"{failure} Pod {pod_id} was terminated so that it does not bill.",
                pod_id=pod_id,
                last_status=getattr(failure, "last_status", "unknown"),
            ) from failure

    def terminate(self, pod_id: str) -> bool:
        """Delete the pod; False when it was already gone."""
        try:
            self.api.delete_pod(pod_id)
        except NotFoundError:
            return False
        return True


def left_running(failure: RunPodError, pod_id: str, what: str) -> PodFailedError:
    """The failure of a pod this run did not create: said, and the pod left to the user."""
    return PodFailedError(
        f"{failure} Pod {pod_id} {what}; it was left running because the stack records it"
        " (it is no orphan) and this run did not create it. Look at it in the RunPod console,"
        " then fix the recipe and run `pulumi up` again, or remove it with `pulumi destroy`.",
        pod_id=pod_id,
        last_status=getattr(failure, "last_status", "unknown"),
    )
