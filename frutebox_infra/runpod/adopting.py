"""Create without leaving a second billing resource, and believe a 404 only when the listing does.

The rules hold for pods and volumes alike: a create whose answer is ambiguous may still have
made the resource, so it is looked for and adopted before any retry, and what each ambiguous
answer made is looked for itself, for a whole window (`AmbiguousCreates`: the one statement
of that rule), however late the listing shows it; a 404 on a delete may mean a wrong URL
rather than a resource already gone.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
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
"""The first look after an ambiguous answer comes after this share of the window."""


def look_offsets(window_s: float) -> Iterator[float]:
    """Seconds after the first ambiguous answer at which to look: the first after 1/64 of the
    window, each gap twice the one before, and one at the window's end (120 s: 1.9, 5.6, 13,
    28, 58, 118 and 120 s), then on at the same doubling pace (236, 476 s…) for as long as the
    step still waits for its pod. A window of 0 looks once, at once."""
    if window_s <= 0:
        yield 0.0
        return
    step, ended = 1, False
    while True:
        at = window_s * FIRST_LOOK_SHARE * (2**step - 1)
        if not ended and at >= window_s:
            ended = True
            yield window_s
            if at == window_s:
                step += 1
            continue
        yield at
        step += 1


class AmbiguousCreates(Generic[_T]):
    """What ambiguous create answers made, looked for itself until seen, for the whole window.

    The rule, in this one place (the window's length is `Timeouts.duplicate_check_s`, 120 s
    unless FRUTEBOX_DUPLICATE_CHECK_S says otherwise):

    - **What is looked for.** Each ambiguous answer (a 5xx, no answer, an unreadable 201) may
      have made one object that RunPod's listing shows late, in any order relative to later
      creates. Until that many objects besides a cleanly created kept one are seen, the
      creates' results are not all accounted for — whatever else lists meanwhile.
    - **How.** `listing` returns the objects of ours these creates may have made, proven ours
      by the stack's token (never by a name alone). Each look keeps the kept one and removes
      every other one as soon as it lists; right after an ambiguous answer the first one
      listed is adopted instead of creating again (`find_new`).
    - **When.** From the first ambiguous answer, on `look_offsets`' backoff: the window is
      waited out (`wait_out`) unless everything is seen sooner; a pod's or seeding pod's
      looks go on while its step waits for it (`look_if_due`), so the step returns no sooner
      than the window ends and no look is skipped because the bring-up outlasted it.
    - **At the end**, with a result still unseen, the step says so (`say_unseen`): if it
      lists later it bills until the next `pulumi up`, whose sweep removes what the stack's
      token names and the state does not (`frutebox status` lists it as untracked meanwhile).
    """

    def __init__(
        self,
        kind: str,
        name: str,
        listing: Callable[[], Sequence[_T]],
        remove: Callable[[str], object],
        *,
        window_s: float,
        log: Log,
        sleep: Sleep = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kind, self.name = kind, name
        self.window_s = window_s
        self.kept_id: str | None = None
        self.answers = 0
        """Ambiguous answers so far: each may have made one object."""
        self.adopted = False
        self.removed: list[str] = []
        self._listing, self._remove = listing, remove
        self._log, self._sleep, self._clock = log, sleep, clock
        self._start: float | None = None
        self._offsets: Iterator[float] = iter(())
        self._next_at = float("inf")

    @property
    def ambiguous(self) -> bool:
        return self.answers > 0

    @property
    def unseen(self) -> int:
        """Ambiguous answers whose object, if they made one, has not been seen yet."""
        return max(0, self.answers - len(self.removed) - (1 if self.adopted else 0))

    @property
    def done(self) -> bool:
        return self.unseen == 0

    def find_new(self) -> _T | None:
        """After an ambiguous answer: what it (or an earlier one) made, to adopt rather than
        create again; any other one listed is removed. A failing listing raises."""
        self.answers += 1
        if self._start is None:
            self._start = self._clock()
            self._offsets = look_offsets(self.window_s)
            self._next_at = self._start + next(self._offsets)
        found = [r for r in self._listing() if _id(r) not in self.removed]
        if not found:
            return None
        self.kept_id, self.adopted = _id(found[0]), True
        self._remove_others(found)
        return found[0]

    def keep(self, kept_id: str, *, adopted: bool) -> None:
        """The object the create ended with; `adopted` when an ambiguous answer made it."""
        self.kept_id, self.adopted = kept_id, adopted

    def look(self) -> None:
        """One listing; every object but the kept one is removed. A failing listing raises."""
        self._remove_others([r for r in self._listing() if _id(r) not in self.removed])

    def look_if_due(self) -> None:
        """A look in passing, when the backoff says one is due and something is unseen; a
        listing that does not answer now is only logged."""
        if self.done or self._clock() < self._next_at:
            return
        self._advance()
        try:
            self.look()
        except TRANSIENT as exc:
            self._log(f"{self.kind} {self.kept_id}: looking for a duplicate failed ({exc})")

    def due_in(self) -> float:
        """Seconds until the next look is due; infinity once everything is seen."""
        return float("inf") if self.done else max(0.0, self._next_at - self._clock())

    def wait_out(self) -> None:
        """Look on the backoff until everything is seen or the window has ended; a failing
        listing raises MayStillBillError, since one of ours may then bill unseen."""
        end = (self._start or self._clock()) + self.window_s
        if not self.done and self._next_at <= end:
            self._log(
                f"{self.kind} {self.kept_id} ({self.name}): an ambiguous create answer may have"
                f" made another {self.kind} the listing shows late; looking for it until it is"
                f" seen, at most until {self.window_s:g}s after the first such answer"
            )
        while not self.done and self._next_at <= end:
            self._sleep(max(0.0, self._next_at - self._clock()))
            self._advance()
            self._must_look()

    def finish(self) -> None:
        """Before the step returns: the window waited out, then any unseen result said."""
        self.wait_out()
        self.say_unseen()

    def give_up(self) -> None:
        """The step fails: one more look in passing, no waiting, then any unseen result said."""
        if not self.done:
            self._next_at = min(self._next_at, self._clock())
            self.look_if_due()
        self.say_unseen()

    def say_unseen(self) -> None:
        if self.done:
            return
        self._log(
            f"{self.kind} {self.name}: {self.unseen} ambiguous create answer(s) may have made a"
            f" {self.kind} that was not seen within {self.window_s:g}s of the first one. If one"
            " lists later it bills until the next `pulumi up`, which removes what this stack's"
            " token names and its state does not; `frutebox status` lists it as untracked"
            " meanwhile (`--terminate-untracked` removes it at once)."
        )

    def _advance(self) -> None:
        """The next look time after now, on the backoff."""
        now = self._clock()
        start = self._start if self._start is not None else now
        self._next_at = float("inf")
        for offset in self._offsets:
            if start + offset > now:
                self._next_at = start + offset
                break

    def _remove_others(self, listed: Sequence[_T]) -> None:
        for extra in (_id(r) for r in listed):
            if extra == self.kept_id or extra in self.removed:
                continue
            self._log(
                f"{self.kind} {extra} is a duplicate of {self.kept_id} ({self.name}) made by an"
                " ambiguous create; removing it so that it does not bill"
            )
            with contextlib.suppress(NotFoundError):
                self._remove(extra)
            self.removed.append(extra)

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


def _id(resource: object) -> str:
    return str(getattr(resource, "id", ""))
