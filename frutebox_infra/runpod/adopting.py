"""Create without leaving a second billing resource, and believe a 404 only when the listing does.

Both rules hold for pods and volumes alike: a create whose answer is ambiguous may still have
made the resource, so it is looked for and adopted before any retry; a 404 on a delete may
mean a wrong URL rather than a resource already gone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from frutebox_infra.endpoints import DEFAULT_API_URL
from frutebox_infra.runpod.errors import (
    ApiError,
    Cancelled,
    MayStillBillError,
    NotFoundError,
    ProtocolError,
    RateLimitedError,
    RunPodError,
    ServerError,
    TransportError,
    api_error,
)
from frutebox_infra.runpod.retrying import AMBIGUOUS, RetryPolicy

Log = Callable[[str], None]
Sleep = Callable[[float], None]
_T = TypeVar("_T")


@dataclass(frozen=True)
class Created(Generic[_T]):
    """What a create produced; `ambiguous` when an answer left open whether it made another."""

    resource: _T
    outcome: str
    ambiguous: bool


def create_adopting(
    kind: str,
    name: str,
    create: Callable[[], _T],
    find_new: Callable[[], _T | None],
    *,
    retry: RetryPolicy,
    sleep: Sleep,
    log: Log,
) -> Created[_T]:
    """Create the `kind` named `name`, retrying 429/5xx/no answer on the package's one policy.

    A 5xx, a lost connection or a 201 whose body we cannot read may still have created the
    resource, so the attempt itself looks for it (`find_new`) and adopts it before any retry.
    Other API answers propagate unchanged.
    """
    what = f"{kind} {name}"
    ambiguous = False

    def attempt() -> tuple[_T, str]:
        nonlocal ambiguous
        try:
            return create(), "created"
        except AMBIGUOUS as exc:
            ambiguous = True
            found = _look_again(kind, name, exc, find_new)
            if found is None:
                raise
            log(f"{what}: the failed create did make it; adopting it")
            return found, "adopted"

    def on_retry(failure: BaseException, wait: float) -> None:
        if isinstance(failure, ApiError):
            reason = f"{failure.status} {failure.problem.detail}"
        else:
            reason = "no answer" if isinstance(failure, TransportError) else "unreadable answer"
        log(f"{what}: {reason}; retrying in {wait:g}s")

    try:
        resource, outcome = retry.run(
            attempt, sleep=sleep, retry_on=(*AMBIGUOUS, RateLimitedError), on_retry=on_retry
        )
    except ApiError as exc:
        if not isinstance(exc, RateLimitedError | ServerError):
            raise
        hint = f"Gave up on {what} after {retry.max_attempts} attempts; nothing was left behind."
        raise api_error(exc.problem, operation=exc.operation, hint=hint) from exc
    except (TransportError, ProtocolError) as exc:
        hint = f"Gave up on {what} after {retry.max_attempts} attempts; nothing was left behind."
        raise type(exc)(f"{exc} {hint}") from exc
    return Created(resource, outcome, ambiguous)


def _look_again(
    kind: str, name: str, failure: Exception, find_new: Callable[[], _T | None]
) -> _T | None:
    try:
        return find_new()
    except Cancelled:
        raise  # the caller's cleanup looks again; this is not a listing failure
    except RunPodError as exc:
        what = f"{kind} {name}"
        raise MayStillBillError(
            f"Creating {what} failed ({failure}) and listing afterwards failed too ({exc})."
            f" One may exist and bill: look for {what} in the RunPod console and delete it,"
            " then run the command again.",
            kind=kind,
            name=name,
        ) from exc


def ensure_gone(kind: str, resource_id: str, listing: Callable[[], Sequence[Any]]) -> None:
    """After a 404 on a delete: is the resource really gone, or is the URL wrong?

    A 404 for a path the API does not have looks like one for a deleted resource; the listing
    tells them apart (it 404s as well when the base URL is wrong). Raises unless gone.
    """
    try:
        present = [r for r in listing() if getattr(r, "id", None) == resource_id]
    except NotFoundError as exc:
        raise MayStillBillError(
            f"RunPod answered 404 for {kind} {resource_id} and for its listing too: the API URL"
            " is wrong (RUNPOD_API_URL / frutebox-infra:runpodApiUrl; the base is"
            f" {DEFAULT_API_URL}, with or without /v2). Nothing was deleted; the {kind} may"
            " still bill.",
            kind=kind,
            ids=(resource_id,),
        ) from exc
    if present and getattr(present[0], "status", "") != "TERMINATED":
        raise MayStillBillError(
            f"RunPod answered 404 deleting {kind} {resource_id} but still lists it; delete it"
            " in the RunPod console, then run the command again.",
            kind=kind,
            ids=(resource_id,),
        )
