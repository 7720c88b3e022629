"""The one retry policy: which failures get another try, how long it waits, when it gives up."""

from __future__ import annotations

import pytest

from frutebox_infra.runpod import errors
from frutebox_infra.runpod.command_io import Settings
from frutebox_infra.runpod.retrying import AMBIGUOUS, TRANSIENT, RetryPolicy, retry_after_s


def failure(status: int, retry_after_s: float | None = None) -> errors.ApiError:
    problem = errors.Problem(status=status, title="t", detail="d", retry_after_s=retry_after_s)
    return errors.api_error(problem, operation="GET /v2/pods")


def test_retry_policy_caps_backoff_and_retry_after() -> None:
    policy = RetryPolicy(backoff_s=1, max_backoff_s=5, max_retry_after_s=30)
    assert [policy.backoff(n) for n in (1, 2, 3, 4)] == [1, 2, 4, 5]
    assert policy.wait_s(failure(429, retry_after_s=3600), 1) == 30
    assert policy.wait_s(failure(429, retry_after_s=7), 1) == 7
    assert policy.wait_s(errors.TransportError("down"), 3) == 4


def test_the_deploy_step_and_the_policy_share_one_backoff_default() -> None:
    assert Settings.from_env({}).retry == RetryPolicy()
    given = Settings.from_env({"FRUTEBOX_RETRY_BACKOFF_S": "0.5", "FRUTEBOX_RETRY_ATTEMPTS": "2"})
    assert given.retry == RetryPolicy(backoff_s=0.5, max_attempts=2)


def test_transient_failures_are_retried_until_one_succeeds() -> None:
    answers: list[Exception | str] = [
        failure(503),
        failure(429, 3),
        errors.TransportError("x"),
        "ok",
    ]
    slept: list[float] = []
    said: list[tuple[str, float]] = []

    def attempt() -> str:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    result = RetryPolicy(backoff_s=1).run(
        attempt, sleep=slept.append, on_retry=lambda f, w: said.append((type(f).__name__, w))
    )
    assert result == "ok"
    assert slept == [1, 3, 4]  # backoff, then the 429's Retry-After, then backoff again
    assert [name for name, _ in said] == ["ServerError", "RateLimitedError", "TransportError"]


@pytest.mark.parametrize(
    ("exc", "attempts"),
    [
        pytest.param(failure(503), 3, id="5xx-until-attempts-run-out"),
        pytest.param(failure(400), 1, id="400-never"),
        pytest.param(failure(422), 1, id="422-never"),
        pytest.param(errors.ProtocolError("html"), 1, id="unreadable-not-transient"),
    ],
)
def test_the_last_failure_is_raised_once_attempts_run_out(exc: Exception, attempts: int) -> None:
    calls: list[int] = []

    def attempt() -> None:
        calls.append(1)
        raise exc

    with pytest.raises(type(exc)) as caught:
        RetryPolicy(max_attempts=3, backoff_s=0).run(attempt, sleep=lambda _s: None)
    assert caught.value is exc and len(calls) == attempts


def test_an_ambiguous_answer_is_retried_only_when_the_caller_says_so() -> None:
    calls: list[int] = []

    def attempt() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise errors.ProtocolError("a 201 we cannot read")
        return "made"

    policy = RetryPolicy(backoff_s=0)
    assert policy.run(attempt, sleep=lambda _s: None, retry_on=AMBIGUOUS) == "made"
    assert errors.ProtocolError in AMBIGUOUS and errors.ProtocolError not in TRANSIENT


def test_retry_after_is_read_only_from_api_errors() -> None:
    assert retry_after_s(failure(429, 12)) == 12
    assert retry_after_s(failure(429)) is None
    assert retry_after_s(errors.TransportError("down")) is None
