"""Create with candidates: cheapest first, retry in place, and never leave a second billing pod."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from frutebox_infra.deploy.contract import owns_pod
from frutebox_infra.runpod.access import KeyUse
from frutebox_infra.runpod.adopting import AmbiguousCreates, Log, Sleep, create_adopting
from frutebox_infra.runpod.client import RunPodClient
from frutebox_infra.runpod.errors import (
    ApiError,
    Attempt,
    AuthenticationError,
    BadRequestError,
    Cancelled,
    ContractError,
    ForbiddenError,
    InsufficientBalanceError,
    KeyNotPermittedError,
    MayStillBillError,
    NotFoundError,
    PlacementError,
    RateLimitedError,
    RunPodError,
    ServerError,
    api_error,
)
from frutebox_infra.runpod.wire import Pod

CAPACITY_MARK = "no longer any instances available"


@dataclass(frozen=True)
class Placement:
    """The pod a create produced, which candidate it came from, and what each candidate said;
    after an ambiguous create, the look for what it made, which goes on while the pod comes
    up (`AmbiguousCreates`)."""

    pod: Pod
    candidate_index: int
    attempts: tuple[Attempt, ...]
    adopted: bool = False
    sweep: AmbiguousCreates[Pod] | None = None


def gpu_of(body: Mapping[str, Any]) -> tuple[str, int]:
    """(GPU type id, count) of a CreatePodRequest body; ("", 0) when it names no GPU."""
    gpu = body.get("gpu")
    if not isinstance(gpu, Mapping) or not isinstance(gpu.get("id"), str):
        return ("", 0)
    count = gpu.get("count", 1)
    return (gpu["id"], count if isinstance(count, int) else 1)


def hardware_of(body: Mapping[str, Any]) -> tuple[str, int]:
    """(GPU type id, count), or for a CPU pod (flavor id, vCPUs): what a candidate asks for."""
    cpu = body.get("cpu")
    if isinstance(cpu, Mapping) and isinstance(cpu.get("id"), str):
        count = cpu.get("vcpuCount")
        return (cpu["id"], count if isinstance(count, int) else 0)
    return gpu_of(body)


@dataclass(frozen=True)
class Ownership:
    """What makes a pod provably this stack's: RunPod names are not unique, so a pod is ours
    only when its env carries our token and it mounts our volume."""

    token: str
    volume_id: str

    def owns(self, pod: Pod) -> bool:
        return owns_pod(pod.env, pod.volume_id, owner=self.token, volume_id=self.volume_id)


def place(
    api: RunPodClient,
    name: str,
    candidates: Sequence[Mapping[str, Any]],
    owner: Ownership,
    *,
    sleep: Sleep,
    log: Log,
    duplicate_check_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> Placement:
    """Create pod `name` from the first candidate that places, in the order given.

    We only create when the stack records no pod, so a pod of ours already named `name` is an
    orphan of an earlier run that failed before Pulumi recorded it: it is terminated first.
    Pods that merely share the name are someone else's and are left alone. A cancellation
    mid-create terminates whatever the create made; after an ambiguous create, what it made
    is looked for (and any extra pod of ours terminated) for the whole window, the first
    looks here and the rest while the pod comes up (`Placement.sweep`).
    """
    before = _clear_orphans(api, name, owner, log)

    def fresh() -> list[Pod]:
        # The list has no name filter, so we filter here; pods from before are not new.
        return [
            p
            for p in api.list_pods()
            if p.name == name and owner.owns(p) and p.id not in before and p.status != "TERMINATED"
        ]

    look = AmbiguousCreates(
        "pod",
        name,
        fresh,
        api.delete_pod,
        window_s=duplicate_check_s,
        log=log,
        sleep=sleep,
        clock=clock,
    )
    try:
        placement = _walk(api, name, candidates, look.find_new, sleep=sleep, log=log)
    except (Cancelled, KeyboardInterrupt):
        _terminate_made(api, fresh, log)
        raise
    if not look.ambiguous:
        return placement
    look.keep(placement.pod.id, adopted=placement.adopted)
    try:
        look.look_if_due()
    except BaseException:
        # The step fails, so Pulumi will not record the pod: it must not bill either.
        with contextlib.suppress(RunPodError):
            api.delete_pod(placement.pod.id)
            log(f"pod {placement.pod.id} terminated: this run fails before recording it")
        _terminate_made(api, fresh, log)
        raise
    return replace(placement, sweep=look)


def _clear_orphans(api: RunPodClient, name: str, owner: Ownership, log: Log) -> set[str]:
    """Terminate our pods already named `name`; returns every same-named id, never adopted."""
    same_name = [pod for pod in api.list_pods() if pod.name == name]
    for pod in same_name:
        if pod.status == "TERMINATED":
            continue  # bills nothing; listed for a while after a delete
        if not owner.owns(pod):
            log(
                f"pod {pod.id} ({pod.status}, {pod.data_center_id}) is also named {name} but is"
                " not this stack's (no ownership token of ours, or not on our volume); leaving"
                " it alone — RunPod names are not unique"
            )
            continue
        log(
            f"pod {pod.id} ({pod.status}) is ours and named {name}: an orphan of an earlier run"
            " that failed before Pulumi recorded it; terminating it before creating"
        )
        try:
            api.delete_pod(pod.id)
        except NotFoundError:
            continue
        except Cancelled:
            raise
        except RunPodError as exc:
            raise MayStillBillError(
                f"Pod {pod.id}, left named {name} by an earlier run, could not be terminated"
                f" ({exc}); it may bill. Delete it in the RunPod console, then run `pulumi up`"
                " again.",
                kind="pod",
                name=name,
                ids=(pod.id,),
            ) from exc
    return {pod.id for pod in same_name}


def _terminate_made(api: RunPodClient, fresh: Callable[[], list[Pod]], log: Log) -> None:
    """After a cancellation mid-create: terminate whatever the create made."""
    try:
        for pod in fresh():
            log(f"cancelled: terminating pod {pod.id}, created just before")
            with contextlib.suppress(NotFoundError):
                api.delete_pod(pod.id)
    except RunPodError as exc:
        log(
            f"cancelled, and checking for a pod created just before failed ({exc}); look for"
            " pods of this stack in the RunPod console"
        )


def _walk(
    api: RunPodClient,
    name: str,
    candidates: Sequence[Mapping[str, Any]],
    find_new: Callable[[], Pod | None],
    *,
    sleep: Sleep,
    log: Log,
) -> Placement:
    attempts: list[Attempt] = []
    last_detail = ""
    for index, body in enumerate(candidates):
        gpu_id, count = hardware_of(body)
        size = f"{count} vCPUs" if "cpu" in body else f"{count}x"
        label = f"candidate {index} ({size} {gpu_id})"
        log(f"creating pod {name} on {label}")
        try:
            made = create_adopting(
                "pod",
                name,
                partial(api.create_pod_once, body),
                find_new,
                retry=api.retry,
                sleep=sleep,
                log=log,
            )
        except (BadRequestError, ForbiddenError) as exc:
            # No capacity (a CUDA floor no free host meets included), or a pool this account
            # may not use: the next candidate may still place. A key that may not create
            # (KeyNotPermittedError) stops the walk below: no candidate can succeed.
            attempts.append(Attempt(gpu_id, count, outcome_of(exc)))
            last_detail = exc.problem.detail
            log(f"{label}: {outcome_of(exc)} ({exc.problem.detail}); trying the next one")
            continue
        except ApiError as exc:
            attempts.append(Attempt(gpu_id, count, outcome_of(exc)))
            raise _stopped(exc) from exc
        attempts.append(Attempt(gpu_id, count, made.outcome))
        log(f"pod {made.resource.id} {made.outcome} on {label}")
        return Placement(
            pod=made.resource,
            candidate_index=index,
            attempts=tuple(attempts),
            adopted=made.outcome == "adopted",
        )
    raise _exhausted(name, attempts, last_detail, api.key_use)


_OUTCOMES: tuple[tuple[type[ApiError], str], ...] = (
    (InsufficientBalanceError, "insufficient-balance"),
    (ForbiddenError, "forbidden"),
    (KeyNotPermittedError, "key-not-permitted"),
    (ContractError, "invalid-request"),
    (RateLimitedError, "rate-limited"),
    (ServerError, "server-error"),
)


def outcome_of(exc: ApiError) -> str:
    """Stable token for candidatesTried."""
    if isinstance(exc, BadRequestError):
        return "no-capacity" if CAPACITY_MARK in exc.problem.detail else "rejected"
    return next((token for kind, token in _OUTCOMES if isinstance(exc, kind)), f"http-{exc.status}")


def _stopped(exc: ApiError) -> ApiError:
    """The error that ends the walk, with what to do next."""
    if isinstance(exc, AuthenticationError | KeyNotPermittedError):
        return exc  # the client named the key's source and what the command needs
    if isinstance(exc, InsufficientBalanceError):
        hint = "No candidate can succeed: add funds to the RunPod account, then run `pulumi up`."
    elif isinstance(exc, ContractError) and exc.problem.errors:
        hint = (
            "The request breaks RunPod's contract (a frutebox-infra bug, so it is never"
            " retried); the errors above name each field."
        )
    elif isinstance(exc, ContractError):
        hint = (
            "RunPod refused the request without naming a field: read its detail above. An"
            " image it cannot pull is the usual cause: check the image's repository and tag in"
            " registry/images.yaml."
        )
    else:
        return exc
    return api_error(exc.problem, operation=exc.operation, hint=hint)


def _exhausted(
    name: str, attempts: Sequence[Attempt], last_detail: str, key: KeyUse | None
) -> PlacementError:
    tried = ", ".join(f"{a.count}x {a.gpu_id}: {a.outcome}" for a in attempts) or "none"
    outcomes = {a.outcome for a in attempts}
    if outcomes == {"no-capacity"}:
        message = (
            f"No candidate for pod {name} has capacity now ({tried}); RunPod's last detail:"
            f" {last_detail!r}. Retry later or allow more GPU types or data centres; if it"
            " persists, treat it as a problem with the request."
        )
    elif outcomes <= {"no-capacity", "rejected"}:
        message = (
            f"Every candidate for pod {name} was refused with 400 ({tried}). A rule breaks the"
            f" same way on each, so the last detail names a problem with the request:"
            f" {last_detail!r}. Fix the recipe or the stack config."
        )
    else:
        source = key.source if key is not None and key.source else "the RunPod key"
        message = (
            f"No candidate for pod {name} could be placed ({tried}); last detail:"
            f" {last_detail!r}. Allow more GPU types or data centres, or check which pools"
            f" the account of the API key from {source} may use."
        )
    return PlacementError(message, attempts=attempts)
