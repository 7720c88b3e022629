"""A pod's lifecycle over the waits (waits.py): place, serve, pull, roll back, or tear down.

Who may terminate a pod on failure: the run that created it (`bring_up`), always. A pod that
an update patched is recorded in the stack: when its new container does not serve, the update
rolls it back to the settings it served with (`settle_update`), and only a pod that does not
serve with those either is terminated (the next `up` creates it anew).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from frutebox_infra.runpod import ollama
from frutebox_infra.runpod.adopting import AmbiguousCreates, ensure_gone
from frutebox_infra.runpod.errors import (
    Cancelled,
    MayStillBillError,
    NotFoundError,
    PodFailedError,
    RunPodError,
)
from frutebox_infra.runpod.placement import Ownership, Placement, place
from frutebox_infra.runpod.restarts import RestartWatch
from frutebox_infra.runpod.timeouts import Timeouts
from frutebox_infra.runpod.waits import DEAD, LIVE, UNKNOWN, Health, Log, Waits
from frutebox_infra.runpod.wire import Pod

__all__ = ["DEAD", "LIVE", "Health", "Log", "Provisioner", "Timeouts", "left_running"]

NETWORKING = "globalNetworking"
"""The pod field that changes only at the pod's next start (PATCH /v2/pods/{podId})."""


class Provisioner(Waits):
    """Runs a pod's create/wait/teardown rules against one account."""

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
            clock=self._clock,
        )

    def patch(self, pod_id: str, patch: Mapping[str, Any]) -> Pod:
        """PATCH the pod; a PATCH of only `globalNetworking`, which "takes effect on the next
        pod start/restart" and restarts nothing itself, is followed by a restart."""
        patched = self.api.update_pod(pod_id, patch)
        if set(patch) == {NETWORKING}:
            self._log(f"pod {pod_id}: restarting it, so that {NETWORKING} takes effect")
            self.api.restart_pod(pod_id)
        return patched

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
        self,
        pod_id: str,
        *,
        health: Health,
        ollama_tags: Sequence[str],
        timeouts: Timeouts,
        watch: RestartWatch | None = None,
        sweep: AmbiguousCreates[Pod] | None = None,
        private: bool = False,
    ) -> Pod:
        """RUNNING, healthy and pulled; a failure raises and leaves the pod as it is. `watch`
        fails a crash loop early; `sweep` goes on looking for what an ambiguous create made.
        A `private` pod publishes no port: RUNNING and a container that stays up is all that
        can be seen of it from here."""
        pod = self.wait_running(pod_id, timeouts, watch=watch, looker=sweep)
        if private:
            self._log(
                f"pod {pod_id} is RUNNING; it is private (no published port), so {health.path}"
                f" cannot be asked from here: waiting for its container to stay up"
                f" {timeouts.steady_s:g}s"
            )
            pod = self.wait_steady(pod_id, timeouts, watch=watch, looker=sweep)
            self._log(
                f"pod {pod_id} is up, reachable only from the account's own pods at"
                f" {pod_id}.runpod.internal:{health.port}; its server was not probed"
            )
            return pod
        self._log(f"pod {pod_id} is RUNNING; waiting for {health.path} on port {health.port}")
        self.wait_healthy(pod_id, health, timeouts, watch=watch, looker=sweep)
        if not health.pulls_on_pod:  # else the launch pulled them before its server answered
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
        if health.pulls_on_pod and tags:
            # The gateway refuses /api/delete to everyone: the model stays in the store.
            self._log(
                f"pod {pod.id}: no longer serves {', '.join(tags)}; it stays in its store on"
                " the volume (the gateway refuses deletes)"
            )
            return
        url = self.proxy.url(pod.id, health.port)
        for tag in tags:
            why = ollama.delete(self.proxy, url, tag)
            self._log(
                f"pod {pod.id}: removed {tag}, which it no longer serves"
                if why is None
                else f"pod {pod.id}: could not remove {tag} ({why}); it stays on the volume"
            )

    def bring_up(
        self,
        pod_id: str,
        *,
        health: Health,
        ollama_tags: Sequence[str],
        timeouts: Timeouts,
        sweep: AmbiguousCreates[Pod] | None = None,
        private: bool = False,
    ) -> Pod:
        """`serve` a pod this run created; any failure (or cancellation) terminates it."""
        try:
            return self.serve(
                pod_id,
                health=health,
                ollama_tags=ollama_tags,
                timeouts=timeouts,
                watch=RestartWatch(logged_before=0),
                sweep=sweep,
                private=private,
            )
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
        logged_before: int | None = None,
        rollback: Mapping[str, Any] | None = None,
        rollback_tags: Sequence[str] = (),
        private: bool = False,
    ) -> Pod:
        """Wait for a PATCHed pod to restart and serve.

        Its new container not serving (a crash loop, a timeout, a dead status, a failed
        pull) rolls the pod back with the PATCH `rollback` and fails the update; a pod that
        shows no restart, or an API that refuses, is reported and left as it is.
        """
        does_not_serve = "was updated in place but does not serve"
        try:
            self.wait_restarted(before, patched, timeouts, patched_at=patched_at)
        except RunPodError as exc:
            raise left_running(exc, before.id, does_not_serve) from exc
        try:
            return self.serve(
                before.id,
                health=health,
                ollama_tags=ollama_tags,
                timeouts=timeouts,
                watch=RestartWatch(logged_before=logged_before),
                private=private,
            )
        except PodFailedError as exc:
            if rollback is None:
                raise left_running(exc, before.id, does_not_serve) from exc
            failure = exc
        except Cancelled as exc:
            raise left_running(exc, before.id, "was being updated in place") from exc
        except RunPodError as exc:
            raise left_running(exc, before.id, does_not_serve) from exc
        raise self._roll_back(before, failure, rollback, rollback_tags, health, timeouts)

    def _roll_back(
        self,
        before: Pod,
        failure: PodFailedError,
        rollback: Mapping[str, Any],
        tags: Sequence[str],
        health: Health,
        timeouts: Timeouts,
    ) -> RunPodError:
        """Patch the pod back to the settings it served with; the error the update ends in."""
        pod_id = before.id
        self._log(
            f"pod {pod_id}: the new settings do not serve; rolling back"
            f" {', '.join(sorted(rollback))} to the previous ones"
        )
        try:
            # The restart to wait for is the rollback's, not the failed container's own.
            current = self._current(before)
            patched_at = self._clock()
            patched = self.patch(pod_id, rollback)
            self.wait_restarted(current, patched, timeouts, patched_at=patched_at)
            # No crash watch: these settings served, and the container they replace may
            # still be restarting on its own for a while; the health deadline bounds it.
            # Private again when the settings rolled back to publish no port of its health.
            ports = rollback.get("ports", current.ports)
            private = f"{health.port}/http" not in (ports or [])
            self.serve(pod_id, health=health, ollama_tags=tags, timeouts=timeouts,
                       private=private)  # fmt: skip
        except Cancelled as exc:
            return left_running(exc, pod_id, "was being rolled back after a failed update")
        except RunPodError as exc:
            self._log(f"pod {pod_id}: rolling back did not make it serve ({exc})")
            try:
                self.terminate(pod_id)
            except RunPodError as gone:
                return MayStillBillError(
                    f"{failure} Rolling pod {pod_id} back to its previous settings did not make"
                    f" it serve either ({exc}), and terminating it failed ({gone}): it may"
                    " still bill — delete it in the RunPod console, then run `pulumi up`.",
                    kind="pod",
                    ids=(pod_id,),
                )
            return PodFailedError(
                f"{failure} Rolling pod {pod_id} back to its previous settings did not make it"
                f" serve either ({exc}), so it was terminated so that it does not bill; the"
                " next `pulumi up` creates a new pod.",
                pod_id=pod_id,
                last_status="TERMINATED",
            )
        self._log(f"pod {pod_id} serves its previous settings again")
        return PodFailedError(
            f"{failure} The change was rolled back: pod {pod_id} serves its previous settings"
            " again, and the stack still records them. Fix the change, then run `pulumi up`.",
            pod_id=pod_id,
            last_status="RUNNING",
        )

    def _current(self, known: Pod) -> Pod:
        """The pod as it is now; `known` when the API cannot say."""
        try:
            return self.api.get_pod(known.id)
        except RunPodError:
            return known

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
            for tag in () if health.pulls_on_pod else tags:  # its launch pulls them itself
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
