"""Create-and-adopt and ensure-gone, for any resource: no second billing resource after an
ambiguous answer, and a 404 believed only when the listing agrees."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from frutebox_infra.runpod import errors
from frutebox_infra.runpod.adopting import (
    AmbiguousCreates,
    Created,
    create_adopting,
    ensure_gone,
    look_offsets,
)
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
    """What the listing shows as time passes: each object from its own time on (RunPod's
    listing is eventually consistent per object); what was removed, and every look."""

    shows: dict[str, float]
    """Object id -> when the listing starts to show it."""
    now: float = 0.0
    removed: list[str] = field(default_factory=list)
    looks: list[float] = field(default_factory=list)
    failures: list[Exception] = field(default_factory=list)

    def __call__(self) -> list[Thing]:
        self.looks.append(self.now)
        if self.failures:
            raise self.failures.pop(0)
        return [Thing(i) for i, at in self.shows.items() if at <= self.now
                and i not in self.removed]  # fmt: skip

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def look(self, said: list[str], window_s: float = 120.0) -> AmbiguousCreates[Thing]:
        return AmbiguousCreates(
            "thing", "t-1", self, self.removed.append, window_s=window_s, log=said.append,
            sleep=self.sleep, clock=lambda: self.now,
        )  # fmt: skip


def ambiguous_then_created(listing: Listing, said: list[str], answers: int = 1) -> Any:
    """`answers` ambiguous answers whose look found nothing yet, then a clean create of "kept"."""
    look = listing.look(said)
    for _ in range(answers):
        assert look.find_new() is None
    look.keep("kept", adopted=False)
    return look


def test_the_window_s_looks_back_off_and_one_falls_on_its_end() -> None:
    offsets = look_offsets(120.0)
    first = [next(offsets) for _ in range(9)]
    assert first == pytest.approx([1.875, 5.625, 13.125, 28.125, 58.125, 118.125, 120.0,
                                   238.125, 478.125])  # fmt: skip
    assert list(look_offsets(0.0)) == [0.0]  # no window: one look, at once


def test_the_ambiguous_result_is_looked_for_itself_after_the_kept_one_lists() -> None:
    # The kept volume lists at once; what the 503'd create made lists 30 s after it. A look
    # that stopped once the kept one listed would leave it billing.
    listing, said = Listing({"kept": 5.0, "late": 35.0}), []
    look = ambiguous_then_created(listing, said)
    look.finish()
    assert listing.removed == ["late"] and look.done
    assert listing.now == pytest.approx(58.125)  # stopped once it was seen, not at the end
    assert any("thing late is a duplicate of kept" in line for line in said)
    assert not any("not seen" in line for line in said)


def test_a_result_never_seen_is_looked_for_the_whole_window_then_said() -> None:
    listing, said = Listing({"kept": 5.0}), []
    look = ambiguous_then_created(listing, said)
    look.finish()
    assert listing.removed == [] and listing.now == pytest.approx(120.0)
    assert listing.looks[1:] == pytest.approx([1.875, 5.625, 13.125, 28.125, 58.125,
                                               118.125, 120.0])  # fmt: skip
    [line] = [line for line in said if "was not seen" in line]
    assert "1 ambiguous create answer(s)" in line and "within 120s" in line
    assert "next `pulumi up`" in line and "frutebox status" in line


def test_an_adopted_result_of_one_ambiguous_answer_needs_no_more_looking() -> None:
    listing, said = Listing({"made": 0.0}), []
    look = listing.look(said)
    assert look.find_new() == Thing("made")
    look.keep("made", adopted=True)
    look.finish()
    assert look.done and listing.looks == [0.0] and listing.now == 0.0


def test_two_ambiguous_answers_one_adopted_keep_the_look_on_for_the_other() -> None:
    listing, said = Listing({"first": 3.0, "second": 50.0}), []
    look = listing.look(said)
    assert look.find_new() is None  # the first answer's object is not listed yet
    listing.now = 4.0
    assert look.find_new() == Thing("first")  # after the second answer, adopted
    look.keep("first", adopted=True)
    assert look.unseen == 1
    look.finish()
    assert listing.removed == ["second"] and look.done


def test_several_listed_at_once_after_an_answer_one_is_adopted_the_rest_removed() -> None:
    listing, said = Listing({"a": 1.0, "b": 1.0}), []
    look = listing.look(said)
    assert look.find_new() is None
    listing.now = 2.0
    assert look.find_new() == Thing("a")
    assert listing.removed == ["b"] and look.done


def test_looks_in_passing_follow_the_backoff_and_go_on_past_the_window() -> None:
    # A pod's bring-up polls every 5 s: the look happens only when one is due.
    listing, said = Listing({"kept": 5.0, "late": 200.0}), []
    look = ambiguous_then_created(listing, said)
    while listing.now < 240:
        look.look_if_due()
        listing.sleep(5.0)
    assert listing.looks[1:] == [5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 240.0][:-1]
    look.look_if_due()
    assert listing.removed == ["late"]  # a bring-up that outlasts the window still sees it
    look.finish()
    assert not any("not seen" in line for line in said)


@pytest.mark.parametrize(
    ("failure", "raises"),
    [
        pytest.param(problem(503), False, id="transient-in-passing-is-logged"),
        pytest.param(problem(401), True, id="a-refusal-still-raises"),
    ],
)
def test_a_look_in_passing_only_logs_what_may_pass(failure: Exception, raises: bool) -> None:
    listing, said = Listing({"kept": 5.0}), []
    look = ambiguous_then_created(listing, said)
    listing.failures.append(failure)
    listing.now = 10.0
    if raises:
        with pytest.raises(errors.AuthenticationError):
            look.look_if_due()
    else:
        look.look_if_due()
        assert any("looking for a duplicate failed" in line for line in said)


def test_a_failing_look_while_waiting_out_the_window_may_leave_one_billing() -> None:
    listing, said = Listing({"kept": 5.0}), []
    look = ambiguous_then_created(listing, said)
    listing.failures.append(problem(503))
    with pytest.raises(errors.MayStillBillError, match="delete any but kept") as caught:
        look.finish()
    assert (caught.value.kind, caught.value.name) == ("thing", "t-1")


def test_giving_up_looks_once_without_waiting_and_says_what_was_not_seen() -> None:
    listing, said = Listing({"kept": 5.0}), []
    look = ambiguous_then_created(listing, said, answers=2)
    look.give_up()
    assert listing.now == 0.0 and len(listing.looks) == 3
    assert any("2 ambiguous create answer(s)" in line and "was not seen" in line
               for line in said)  # fmt: skip


def test_a_look_is_due_on_the_backoff_until_everything_is_seen() -> None:
    listing, said = Listing({"kept": 5.0, "late": 6.0}), []
    look = ambiguous_then_created(listing, said)
    assert look.due_in() == pytest.approx(1.875)
    listing.now = 7.0
    assert look.due_in() == 0.0
    look.look_if_due()
    assert look.done and look.due_in() == float("inf")
