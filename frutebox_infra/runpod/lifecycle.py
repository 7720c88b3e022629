"""Pod and volume lifecycles: place, wait for RUNNING and healthy, pull, or tear down."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from frutebox_infra.runpod.client import NetworkVolume, Pod, ProxyClient, RunPodClient
from frutebox_infra.runpod.errors import NotFoundError, PodFailedError, RunPodError, TransportError
from frutebox_infra.runpod.placement import Placement, create_adopting, place

LIVE = frozenset({"PROVISIONING", "STARTING", "RUNNING"})
DEAD = frozenset({"ERROR", "EXITED", "TERMINATED"})

Log = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class Timeouts:
    """Bounds of one bring-up, in seconds."""

    running_s: float
    healthy_s: float
    poll_interval_s: float = 5.0
    pull_s: float = 3600.0


@dataclass(frozen=True, kw_only=True)
class Health:
    """Where a pod answers when its server is ready."""

    port: int
    path: str


class Provisioner:
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
                    " for RUNNING. Large images can take long to pull: raise"
                    " timeouts.runningSeconds (or FRUTEBOX_RUNNING_TIMEOUT_S), or retry later.",
                    pod_id=pod_id,
                    last_status=pod.status,
                )
            self._sleep(timeouts.poll_interval_s)

    def wait_healthy(self, pod_id: str, health: Health, timeouts: Timeouts) -> None:
        url = self.proxy.url(pod_id, health.port) + health.path
        deadline = self._clock() + timeouts.healthy_s
        last: int | None = None
        while True:
            last = self.proxy.probe(url)
            if last is not None and 200 <= last < 300:
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
                raise PodFailedError(
                    f"Pod {pod_id} ({status}) never became healthy: {url} gave {answer} for"
                    f" {timeouts.healthy_s:g}s. Check the server's logs in the RunPod console;"
                    " a large model may need a longer timeouts.healthySeconds (or"
                    " FRUTEBOX_HEALTH_TIMEOUT_S).",
                    pod_id=pod_id,
                    last_status=status,
                )
            self._sleep(timeouts.poll_interval_s)

    def pull(self, pod_id: str, health: Health, tag: str, timeouts: Timeouts) -> None:
        """Ask the pod's Ollama server to pull `tag`; its image cannot do it from args."""
        url = self.proxy.url(pod_id, health.port) + "/api/pull"
        self._log(f"pod {pod_id}: pulling {tag} through ollama")
        why = ""
        try:
            response = self.proxy.post_json(
                url, {"model": tag, "stream": False}, timeout_s=timeouts.pull_s
            )
        except TransportError as exc:
            why = str(exc)
        else:
            body = _json_or_none(response)
            if response.is_success and isinstance(body, dict) and body.get("status") == "success":
                return
            error = body.get("error") if isinstance(body, dict) else None
            why = f"HTTP {response.status_code}" + (f": {error}" if error else "")
        raise PodFailedError(
            f"Pod {pod_id}: ollama could not pull {tag} ({why}). Check that the tag exists"
            " (ollama.com/library) and the volume has room, then run `pulumi up` again.",
            pod_id=pod_id,
            last_status="RUNNING",
        )

    def bring_up(
        self, pod_id: str, *, health: Health, ollama_tag: str | None, timeouts: Timeouts
    ) -> Pod:
        """RUNNING, healthy and pulled; any failure (or interrupt) terminates the pod."""
        try:
            pod = self.wait_running(pod_id, timeouts)
            self._log(f"pod {pod_id} is RUNNING; waiting for {health.path} on port {health.port}")
            self.wait_healthy(pod_id, health, timeouts)
            if ollama_tag:
                self.pull(pod_id, health, ollama_tag, timeouts)
            self._log(f"pod {pod_id} is serving")
            return pod
        except BaseException as exc:
            self._tear_down_after(pod_id, exc)
            raise

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

    # Network volumes

    def create_volume(self, name: str, size: int, data_center: str) -> tuple[NetworkVolume, str]:
        def mine(volume: NetworkVolume) -> bool:
            return volume.name == name and volume.data_center == data_center

        before = {v.id for v in self.api.list_volumes() if mine(v)}

        def find_new() -> NetworkVolume | None:
            return next(
                (v for v in self.api.list_volumes() if mine(v) and v.id not in before), None
            )

        body = {"name": name, "size": size, "dataCenter": data_center}
        return create_adopting(
            f"volume {name}",
            lambda: self.api.create_volume_once(body),
            find_new,
            retry=self.api.retry,
            sleep=self._sleep,
            log=self._log,
        )

    def grow_volume(self, volume: NetworkVolume, size: int) -> NetworkVolume:
        """Grow to `size` GB; a smaller size keeps the current one (volumes never shrink)."""
        if size > volume.size:
            self._log(f"volume {volume.id}: growing {volume.size} GB -> {size} GB")
            return self.api.update_volume(volume.id, {"size": size})
        if size < volume.size:
            self._log(
                f"volume {volume.id}: asked for {size} GB but it holds {volume.size} GB;"
                " network volumes never shrink, keeping the current size"
            )
        return volume

    def delete_volume(self, volume_id: str) -> bool:
        try:
            self.api.delete_volume(volume_id)
        except NotFoundError:
            return False
        return True


def _json_or_none(response: Any) -> Any:
    try:
        return response.json()
    except ValueError:
        return None
