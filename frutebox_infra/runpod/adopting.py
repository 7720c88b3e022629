"""Create without leaving a second billing resource, and believe a 404 only when the listing does.

The rules hold for pods and volumes alike: a create whose answer is ambiguous may still have
made the resource, so it is looked for and adopted before any retry, and the listing, which
may show a create late, is swept for extras until it has caught up; a 404 on a delete may mean
a wrong URL rather than a resource already gone.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

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
from frutebox_infra.runpod.retrying import AMBIGUOUS, TRANSIENT, RetryPolicy
from frutebox_infra.stack.endpoints import DEFAULT_API_URL

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


FIRST_LOOK_SHARE = 1 / 64
"""The sweep's first look comes after this share of its bound; each later one after twice the
wait before (30 s: looks after 0.5, 1.4, 3.3, 7, 15, 29.5 and 30 s)."""


class DuplicateSweep(Generic[_T]):
    """After an ambiguous create: remove every extra resource of ours made by its attempts.

    RunPod's listing may show a create late, so one look is not enough: `catch_up` looks with
    backoff until the listing shows the kept resource (whatever was created before it shows
    by then), `keep_looking` looks again at each check of a later wait (a create a gateway
    answered for while it was still running shows later still), and `final` before the step
    returns. `listing` returns the resources of ours the create may have made, kept included.
    """

    def __init__(
        self,
        kind: str,
        name: str,
        kept_id: str,
        listing: Callable[[], Sequence[_T]],
        remove: Callable[[str], object],
        *,
        log: Log,
        sleep: Sleep = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kind, self.name, self.kept_id = kind, name, kept_id
        self.caught_up = False
        self.removed: list[str] = []
        self._listing, self._remove = listing, remove
        self._log, self._sleep, self._clock = log, sleep, clock

    def look(self) -> None:
        """One listing; every extra is removed. A failing listing raises its RunPodError."""
        listed = [str(getattr(r, "id", "")) for r in self._listing()]
        self.caught_up = self.caught_up or self.kept_id in listed
        for extra in listed:
            if extra == self.kept_id or extra in self.removed:
                continue
            self._log(
                f"{self.kind} {extra} is a duplicate of {self.kept_id} ({self.name}) made by a"
                " retried create; removing it so that it does not bill"
            )
            with contextlib.suppress(NotFoundError):
                self._remove(extra)
            self.removed.append(extra)

    def catch_up(self, bound_s: float) -> None:
        """Look with backoff until the listing shows the kept resource, or `bound_s` passed."""
        self._log(
            f"{self.kind} {self.kept_id}: an earlier create answer was ambiguous; looking for a"
            f" duplicate until the listing shows {self.kept_id} (at most {bound_s:g}s)"
        )
        deadline = self._clock() + bound_s
        wait = bound_s * FIRST_LOOK_SHARE
        while True:
            self._sleep(max(0.0, min(wait, deadline - self._clock())))
            self._must_look()
            if self.caught_up:
                return
            if self._clock() >= deadline:
                self._log(
                    f"{self.kind} {self.kept_id}: the listing did not show it within"
                    f" {bound_s:g}s; looking again later"
                )
                return
            wait *= 2

    def keep_looking(self) -> None:
        """A look in passing: a listing that does not answer now is only logged."""
        try:
            self.look()
        except TRANSIENT as exc:
            self._log(f"{self.kind} {self.kept_id}: looking for a duplicate failed ({exc})")

    def final(self) -> None:
        """The last look before the step returns; a failing listing may leave one billing."""
        self._must_look()

    def _must_look(self) -> None:
        try:
            self.look()
        except Cancelled:
            raise
        except RunPodError as exc:
            raise MayStillBillError(
                f"{self.kind.capitalize()} {self.kept_id} exists, but checking for a duplicate"
                f" made by an earlier, ambiguous create failed ({exc}). Look for"
                f" {self.kind}s named {self.name} in the RunPod console and delete any but"
                f" {self.kept_id}.",
                kind=self.kind,
                name=self.name,
            ) from exc
