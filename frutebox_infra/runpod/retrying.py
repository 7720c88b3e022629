"""The one retry policy of the package, on tenacity: which failures are worth another try, and
how long to wait before it (the API's Retry-After when it gives one, else exponential)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import tenacity

from frutebox_infra.runpod.errors import (
    ApiError,
    ProtocolError,
    RateLimitedError,
    ServerError,
    TransportError,
)

_T = TypeVar("_T")
Sleep = Callable[[float], None]
OnRetry = Callable[[BaseException, float], None]

TRANSIENT: tuple[type[Exception], ...] = (RateLimitedError, ServerError, TransportError)
"""Not the request's fault: the same request may succeed later."""
AMBIGUOUS: tuple[type[Exception], ...] = (ServerError, TransportError, ProtocolError)
"""A create answered like this may still have created the resource."""


def retry_after_s(exc: BaseException) -> float | None:
    """The wait a 429 (or 503) asked for, in seconds, when it said one."""
    return exc.problem.retry_after_s if isinstance(exc, ApiError) else None


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How often and how long to retry transient failures; all durations in seconds."""

    max_attempts: int = 5
    backoff_s: float = 2.0
    """The first wait, doubled before each later retry: 2 + 4 + 8 + 16 s ride out a RunPod
    hiccup of half a minute before five attempts give up. The deploy step's default too."""
    max_backoff_s: float = 30.0
    max_retry_after_s: float = 120.0

    def backoff(self, attempt: int) -> float:
        """Exponential delay before retry number `attempt` (1-based)."""
        return float(min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1)))

    def wait_s(self, failure: BaseException, attempt: int) -> float:
        asked = retry_after_s(failure)
        if asked is not None:
            return min(asked, self.max_retry_after_s)
        return self.backoff(attempt)

    def run(
        self,
        attempt: Callable[[], _T],
        *,
        sleep: Sleep,
        retry_on: tuple[type[Exception], ...] = TRANSIENT,
        on_retry: OnRetry | None = None,
    ) -> _T:
        """Call `attempt` until it returns, or raise its last failure once attempts run out.

        `attempt` is also the hook point for anything to do before a retry (the
        adopt-before-retry lookup of a create lives inside the create's attempt).
        """

        def wait(state: tenacity.RetryCallState) -> float:
            failure = state.outcome.exception() if state.outcome else None
            return self.wait_s(failure, state.attempt_number) if failure else 0.0

        def before_sleep(state: tenacity.RetryCallState) -> None:
            failure = state.outcome.exception() if state.outcome else None
            if on_retry is not None and failure is not None:
                on_retry(failure, state.upcoming_sleep)

        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(max(1, self.max_attempts)),
            wait=wait,
            retry=tenacity.retry_if_exception_type(retry_on),
            sleep=sleep,
            before_sleep=before_sleep,
            reraise=True,
        )
        return retrying(attempt)
