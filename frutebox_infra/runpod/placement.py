"""Create with candidates: cheapest first, retry in place, and never leave a second billing pod."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from frutebox_infra.runpod.client import Pod, RetryPolicy, RunPodClient, retryable
from frutebox_infra.runpod.errors import (
    ApiError,
    Attempt,
    Cancelled,
    NotFoundError,
    PlacementError,
    ProtocolError,
    RunPodError,
    TransportError,
    api_error,
)

CAPACITY_MARK = "no longer any instances available"

Log = Callable[[str], None]
Sleep = Callable[[float], None]
_T = TypeVar("_T")


@dataclass(frozen=True)
class Placement:
    """The pod a create produced, which candidate it came from, and what each candidate said."""

    pod: Pod
    candidate_index: int
    attempts: tuple[Attempt, ...]


def gpu_of(body: Mapping[str, Any]) -> tuple[str, int]:
    """(GPU type id, count) of a CreatePodRequest body; ("", 0) when it names no GPU."""
    gpu = body.get("gpu")
    if not isinstance(gpu, Mapping) or not isinstance(gpu.get("id"), str):
        return ("", 0)
    count = gpu.get("count", 1)
    return (gpu["id"], count if isinstance(count, int) else 1)


def create_adopting(
    what: str,
    create: Callable[[], _T],
    find_new: Callable[[], _T | None],
    *,
    retry: RetryPolicy,
    sleep: Sleep,
    log: Log,
) -> tuple[_T, str]:
    """Create, retrying 429/5xx in place; returns (resource, "created" | "adopted").

    A 5xx, a lost connection or a 201 whose body we cannot read may still have created the
    resource, so before any retry we look for it (`find_new`) and adopt it. Other API
    answers propagate unchanged.
    """
    attempt = 1
    while True:
        try:
            return create(), "created"
        except (TransportError, ProtocolError) as exc:
            failure: ApiError | TransportError | ProtocolError = exc
        except ApiError as exc:
            if not retryable(exc.status):
                raise
            failure = exc
        rate_limited = isinstance(failure, ApiError) and failure.status == 429
        if not rate_limited:
            try:
                found = find_new()
            except Cancelled:
                raise  # the caller's cleanup looks again; this is not a listing failure
            except RunPodError as exc:
                raise RunPodError(
                    f"Creating {what} failed ({failure}) and listing afterwards failed too"
                    f" ({exc}). One may exist and bill: look for {what} in the RunPod console"
                    " and delete it, then run the command again."
                ) from exc
            if found is not None:
                log(f"{what}: the failed create did make it; adopting it")
                return found, "adopted"
        if attempt >= retry.max_attempts:
            hint = f"Gave up on {what} after {attempt} attempts; nothing was left behind."
            if isinstance(failure, ApiError):
                raise api_error(
                    failure.problem, operation=failure.operation, hint=hint
                ) from failure
            raise type(failure)(f"{failure} {hint}") from failure
        if isinstance(failure, ApiError):
            wait = retry.wait_before_retry(failure.problem, attempt)
            reason = f"{failure.status} {failure.problem.detail}"
        else:
            wait = retry.backoff(attempt)
            reason = "no answer" if isinstance(failure, TransportError) else "unreadable answer"
        log(f"{what}: {reason}; retrying in {wait:g}s")
        sleep(wait)
        attempt += 1


def place(
    api: RunPodClient, name: str, candidates: Sequence[Mapping[str, Any]], *, sleep: Sleep, log: Log
) -> Placement:
    """Create pod `name` from the first candidate that places, in the order given.

    We only create when the stack records no pod, so a pod already named `name` is an orphan
    of an earlier run that failed before Pulumi recorded it: it is terminated first. A
    cancellation mid-create terminates whatever the create made.
    """
    before = _clear_orphans(api, name, log)

    def find_new() -> Pod | None:
        # The list has no name filter, so we filter here; pods from before are not ours.
        fresh = [p for p in api.list_pods() if p.name == name and p.id not in before]
        for extra in fresh[1:]:
            log(f"terminating duplicate pod {extra.id} named {name}")
            with contextlib.suppress(NotFoundError):
                api.delete_pod(extra.id)
        return fresh[0] if fresh else None

    try:
        return _walk(api, name, candidates, find_new, sleep=sleep, log=log)
    except (Cancelled, KeyboardInterrupt):
        _terminate_made(api, name, before, log)
        raise


def _clear_orphans(api: RunPodClient, name: str, log: Log) -> set[str]:
    """Terminate every pod already named `name`; returns their ids, never to be adopted."""
    stale = [pod for pod in api.list_pods() if pod.name == name]
    for pod in stale:
        if pod.status == "TERMINATED":
            continue  # bills nothing; listed for a while after a delete
        log(
            f"pod {pod.id} ({pod.status}) is already named {name}: an orphan of an earlier run"
            " that failed before Pulumi recorded it; terminating it before creating"
        )
        try:
            api.delete_pod(pod.id)
        except NotFoundError:
            continue
        except Cancelled:
            raise
        except RunPodError as exc:
            raise RunPodError(
                f"Pod {pod.id}, left named {name} by an earlier run, could not be terminated"
                f" ({exc}); it may bill. Delete it in the RunPod console, then run `pulumi up`"
                " again."
            ) from exc
    return {pod.id for pod in stale}


def _terminate_made(api: RunPodClient, name: str, before: set[str], log: Log) -> None:
    """After a cancellation mid-create: terminate whatever the create made."""
    try:
        made = [p for p in api.list_pods() if p.name == name and p.id not in before]
        for pod in made:
            log(f"cancelled: terminating pod {pod.id}, created just before")
            with contextlib.suppress(NotFoundError):
                api.delete_pod(pod.id)
    except RunPodError as exc:
        log(
            f"cancelled, and checking for a pod created just before failed ({exc}); look for"
            f" pods named {name} in the RunPod console"
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
        gpu_id, count = gpu_of(body)
        label = f"candidate {index} ({count}x {gpu_id})"
        log(f"creating pod {name} on {label}")
        try:
            pod, outcome = create_adopting(
                f"pod {name}",
                partial(api.create_pod_once, body),
                find_new,
                retry=api.retry,
                sleep=sleep,
                log=log,
            )
        except ApiError as exc:
            attempts.append(Attempt(gpu_id, count, outcome_of(exc)))
            if exc.status not in (400, 403):
                raise _stopped(exc) from exc
            last_detail = exc.problem.detail
            log(f"{label}: {outcome_of(exc)} ({exc.problem.detail}); trying the next one")
            continue
        attempts.append(Attempt(gpu_id, count, outcome))
        log(f"pod {pod.id} {outcome} on {label}")
        return Placement(pod, index, tuple(attempts))
    raise _exhausted(name, attempts, last_detail)


def outcome_of(exc: ApiError) -> str:
    """Stable token for candidatesTried."""
    if exc.status == 400:
        return "no-capacity" if CAPACITY_MARK in exc.problem.detail else "rejected"
    tokens = {402: "insufficient-balance", 403: "forbidden", 422: "invalid-request"}
    tokens[429] = "rate-limited"
    return tokens.get(exc.status, "server-error" if exc.status >= 500 else f"http-{exc.status}")


def _stopped(exc: ApiError) -> ApiError:
    hints = {
        401: "Check the key in frutebox-infra:runpodApiKey / RUNPOD_API_KEY.",
        402: "No candidate can succeed: add funds to the RunPod account, then run `pulumi up`.",
        422: "The request breaks RunPod's contract (a frutebox-infra bug, so it is never"
        " retried); the errors above name each field.",
    }
    if exc.status not in hints:
        return exc
    return api_error(exc.problem, operation=exc.operation, hint=hints[exc.status])


def _exhausted(name: str, attempts: Sequence[Attempt], last_detail: str) -> PlacementError:
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
        message = (
            f"No candidate for pod {name} could be placed ({tried}); last detail:"
            f" {last_detail!r}. Allow more GPU types or data centres, or check which pools"
            " the API key may use."
        )
    return PlacementError(message, attempts=attempts)
