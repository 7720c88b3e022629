"""Create-and-adopt and ensure-gone, for any resource: no second billing resource after an
ambiguous answer, and a 404 believed only when the listing agrees."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest

from frutebox_infra.runpod import errors
from frutebox_infra.runpod.adopting import Created, DuplicateSweep, create_adopting, ensure_gone
from frutebox_infra.runpod.retrying import RetryPolicy


@dataclass(frozen=True)
class Thing:
    id: str
    status: str = "RUNNING"


def problem(status: int, detail: str = "d") -> errors.ApiError:
    answer = errors.Problem(status=status, title="t", detail=detail)
    return errors.api_error(answer, operation="POST /v2/things")


@dataclass
class Account:
    """Scripted answers to the create and to the look that follows an ambiguous one."""

    creates: list[Thing | Exception]
    looks: list[Thing | Exception | None]
    slept: list[float]
    said: list[str]

    def create(self) -> Thing:
        answer = self.creates.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def find_new(self) -> Thing | None:
        answer = self.looks.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def run(self, attempts: int = 3) -> Created[Thing]:
        return create_adopting(
            "thing",
            "t-1",
            self.create,
            self.find_new,
            retry=RetryPolicy(max_attempts=attempts, backoff_s=1),
            sleep=self.slept.append,
            log=self.said.append,
        )


def account(
    creates: Sequence[Thing | Exception], looks: Sequence[Thing | Exception | None] = ()
) -> Account:
    return Account(list(creates), list(looks), [], [])


def test_a_clean_create_is_created_and_never_looked_for() -> None:
    acc = account([Thing("a")])
    assert acc.run() == Created(Thing("a"), "created", ambiguous=False)
    assert acc.looks == [] and acc.slept == []


@pytest.mark.parametrize(
    "ambiguous",
    [
        pytest.param(problem(503), id="5xx"),
        pytest.param(errors.TransportError("no answer"), id="no-answer"),
        pytest.param(errors.ProtocolError("unreadable 201"), id="unreadable"),
    ],
)
def test_an_ambiguous_answer_that_did_create_is_adopted_not_retried(
    ambiguous: Exception,
) -> None:
    acc = account([ambiguous], [Thing("made")])
    assert acc.run() == Created(Thing("made"), "adopted", ambiguous=True)
    assert acc.creates == [] and acc.slept == []
    assert acc.said == ["thing t-1: the failed create did make it; adopting it"]


def test_an_ambiguous_answer_that_made_nothing_is_retried_and_stays_ambiguous() -> None:
    acc = account([problem(502), Thing("second")], [None])
    assert acc.run() == Created(Thing("second"), "created", ambiguous=True)
    assert acc.slept == [1]
    assert acc.said == ["thing t-1: 502 d; retrying in 1s"]


def test_a_429_is_retried_without_looking() -> None:
    acc = account([problem(429), Thing("a")])
    assert acc.run() == Created(Thing("a"), "created", ambiguous=False)
    assert acc.looks == []


@pytest.mark.parametrize(
    ("failure", "kind"),
    [
        pytest.param(problem(503), errors.ServerError, id="5xx"),
        pytest.param(problem(429), errors.RateLimitedError, id="429"),
        pytest.param(errors.TransportError("no answer"), errors.TransportError, id="no-answer"),
    ],
)
def test_giving_up_says_nothing_was_left_behind(
    failure: Exception, kind: type[errors.RunPodError]
) -> None:
    acc = account([failure] * 2, [None] * 2)
    with pytest.raises(kind, match="Gave up on thing t-1 after 2 attempts; nothing was left"):
        acc.run(attempts=2)


def test_other_refusals_propagate_unchanged() -> None:
    refused = problem(400, "no capacity")
    acc = account([refused])
    with pytest.raises(errors.BadRequestError) as caught:
        acc.run()
    assert caught.value is refused


def test_when_the_look_after_an_ambiguous_answer_fails_the_thing_may_still_bill() -> None:
    acc = account([problem(503)], [problem(403, "no list permission")])
    with pytest.raises(errors.MayStillBillError) as caught:
        acc.run()
    assert (caught.value.kind, caught.value.name, caught.value.ids) == ("thing", "t-1", ())
    message = str(caught.value)
    assert "look for thing t-1 in the RunPod console and delete it" in message
    assert "503" in message and "no list permission" in message
    assert acc.slept == []  # never retried blind


def test_a_cancellation_while_looking_is_not_a_listing_failure() -> None:
    acc = account([problem(503)], [errors.Cancelled("Cancelled by SIGTERM")])
    with pytest.raises(errors.Cancelled):
        acc.run()


def listing(*things: Thing) -> Callable[[], list[Thing]]:
    return lambda: list(things)


def not_found() -> list[Thing]:
    raise problem(404, "no such path")


@pytest.mark.parametrize(
    "listed",
    [
        pytest.param(listing(), id="not-listed"),
        pytest.param(listing(Thing("other")), id="others-listed"),
        pytest.param(listing(Thing("t1", "TERMINATED")), id="listed-terminated"),
    ],
)
def test_a_404_is_believed_when_the_listing_agrees(listed: Callable[[], list[Thing]]) -> None:
    ensure_gone("pod", "t1", listed)


@pytest.mark.parametrize(
    ("listed", "expected"),
    [
        pytest.param(not_found, "the API URL is wrong", id="listing-404s-too"),
        pytest.param(listing(Thing("t1")), "but still lists it", id="still-listed"),
        pytest.param(listing(Thing("t1", "EXITED")), "but still lists it", id="listed-exited"),
    ],
)
def test_a_404_the_listing_contradicts_may_still_bill(
    listed: Callable[[], list[Thing]], expected: str
) -> None:
    with pytest.raises(errors.MayStillBillError, match=expected) as caught:
        ensure_gone("pod", "t1", listed)
    assert (caught.value.kind, caught.value.ids) == ("pod", ("t1",))


@dataclass
class Listing:
    """What the listing answers, look after look (the last repeats), and what was removed."""

    answers: list[list[Thing] | Exception]
    removed: list[str]
    now: float = 0.0
    slept: list[float] | None = None

    def __call__(self) -> list[Thing]:
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return [t for t in answer if t.id not in self.removed]

    def sleep(self, seconds: float) -> None:
        (self.slept if self.slept is not None else []).append(seconds)
        self.now += seconds

    def sweep(self, said: list[str]) -> DuplicateSweep[Thing]:
        remove = self.removed.append
        return DuplicateSweep(
            "thing", "t-1", "kept", self, remove, log=said.append, sleep=self.sleep,
            clock=lambda: self.now,
        )  # fmt: skip


KEPT, EXTRA = Thing("kept"), Thing("extra")


def test_the_sweep_removes_a_duplicate_as_soon_as_it_lists_and_stops_once_caught_up() -> None:
    listing = Listing([[], [EXTRA], [EXTRA, KEPT]], [], slept=[])
    said: list[str] = []
    sweep = listing.sweep(said)
    sweep.catch_up(32.0)
    assert listing.removed == ["extra"] and sweep.caught_up
    assert listing.slept == [0.5, 1.0, 2.0]  # a look after 0.5 s, 1.5 s, 3.5 s: then done
    assert any("duplicate of kept" in line for line in said)


def test_the_sweep_gives_up_catching_up_at_its_bound_and_keeps_looking_later() -> None:
    listing = Listing([[]], [], slept=[])
    sweep = listing.sweep([])
    sweep.catch_up(32.0)
    assert not sweep.caught_up and listing.now == pytest.approx(32.0)
    listing.answers = [[EXTRA, KEPT]]
    sweep.keep_looking()  # at the bring-up's next API check
    assert listing.removed == ["extra"] and sweep.caught_up


@pytest.mark.parametrize(
    ("failure", "raises"),
    [
        pytest.param(problem(503), False, id="transient-in-passing-is-logged"),
        pytest.param(problem(401), True, id="a-refusal-still-raises"),
    ],
)
def test_a_look_in_passing_only_logs_what_may_pass(failure: Exception, raises: bool) -> None:
    said: list[str] = []
    sweep = Listing([failure], []).sweep(said)
    if raises:
        with pytest.raises(errors.AuthenticationError):
            sweep.keep_looking()
    else:
        sweep.keep_looking()
        assert any("looking for a duplicate failed" in line for line in said)


def test_a_final_look_that_fails_may_leave_one_billing() -> None:
    sweep = Listing([problem(503)], []).sweep([])
    with pytest.raises(errors.MayStillBillError, match="delete any but kept") as caught:
        sweep.final()
    assert (caught.value.kind, caught.value.name) == ("thing", "t-1")
