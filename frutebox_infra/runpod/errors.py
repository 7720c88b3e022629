"""Errors the RunPod client and provisioner raise; nothing else escapes the package.

    RunPodError                     base: every failure the package reports
    ├── ConfigurationError          missing API key, malformed request or previous result
    ├── TransportError              no usable HTTP exchange (connection, timeout, bad URL)
    ├── ProtocolError               the API answered something that is not its documented JSON
    ├── ApiError                    the API answered with an RFC 9457 problem
    │   ├── BadRequestError         400: a rule was broken, or no capacity for this candidate
    │   ├── AuthenticationError     401: the API key was refused (wrong, expired, disabled)
    │   ├── KeyNotPermittedError    403 "access denied": the key's scope does not cover the
    │   │                           action (a Read Only key writing); no candidate can succeed
    │   ├── ForbiddenError          403 otherwise: the account may not use this pool
    │   ├── InsufficientBalanceError  402: no candidate can succeed
    │   ├── NotFoundError           404
    │   ├── ConflictError           409: action not valid for the pod's status
    │   ├── ContractError           422: our request breaks the schema; never retried
    │   ├── RateLimitedError        429 after the bounded retries
    │   └── ServerError             5xx after the bounded retries
    ├── PlacementError              every candidate was refused; lists what each answered
    ├── PodFailedError              the pod never served (error state, timeout, failed pull);
    │   │                           a pod this run created has been terminated
    │   └── CrashLoopError          its container exited and was restarted, again and again
    ├── SeedFailedError             a seeding pod did not place every model's weights; each
    │                               failed model's reason and fix; the pod was terminated
    ├── MayStillBillError           a pod or volume of ours may still exist and bill: it could
    │                               not be removed or looked for; the message says what to
    │                               delete and where, the attributes carry its kind, name, ids
    └── Cancelled                   SIGTERM/SIGINT arrived; raised from the signal handler so
                                    the same teardown that handles a failure runs

httpx raises the three families in HTTPX_FAILURES; each is translated where it is caught (to
TransportError, ConfigurationError, or "no answer"), so none leaves the package. Every
message ends with what to do next.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import httpx

HTTPX_FAILURES = (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError)
"""Every exception an httpx exchange raises (its CookieConflict comes only from looking a cookie
up by name, which we never do); caught only to be translated into the tree above."""


class RunPodError(Exception):
    """Base of every error the RunPod package raises."""


class ConfigurationError(RunPodError):
    """The environment, the request on stdin or the previous result is unusable."""


class TransportError(RunPodError):
    """The HTTP exchange itself failed: connection refused, timeout, invalid URL."""

    @property
    def timed_out(self) -> bool:
        """True when it failed for want of an answer in time (an httpx timeout)."""
        return isinstance(self.__cause__, httpx.TimeoutException)


class ProtocolError(RunPodError):
    """The API answered with a body that is not the JSON its contract documents."""


@dataclass(frozen=True)
class Problem:
    """An RFC 9457 problem document as RunPod v2 returns it."""

    status: int
    title: str
    detail: str
    errors: tuple[str, ...] = field(default=())
    retry_after_s: float | None = None

    def describe(self) -> str:
        text = f"{self.status} {self.title}: {self.detail.rstrip('.')}"
        if self.errors:
            text += " [" + "; ".join(self.errors) + "]"
        return text


class ApiError(RunPodError):
    """The API answered with a problem document."""

    def __init__(self, problem: Problem, *, operation: str, hint: str = "") -> None:
        self.problem = problem
        self.operation = operation
        message = f"{operation} failed: {problem.describe()}."
        super().__init__(f"{message} {hint}" if hint else message)

    @property
    def status(self) -> int:
        return self.problem.status


class BadRequestError(ApiError):
    """400: the body matches the contract but breaks a rule, or there is no capacity."""


class AuthenticationError(ApiError):
    """401: the API key is missing, malformed or revoked."""


class ForbiddenError(ApiError):
    """403: the account may not use this pool (the next candidate may place)."""


class KeyNotPermittedError(ApiError):
    """403 with RunPod's generic `access denied`: the key is valid but its scope does not
    cover the action (a Read Only key, or a Restricted one without it), whatever the pool."""


NO_ACCESS_DETAIL = "access denied"
"""RunPod's 403 detail for a valid key without access to the action (the OpenAPI document's
`insufficientAccess` example); a pool the account may not use answers another detail."""


def is_key_scope(problem: Problem) -> bool:
    return problem.status == 403 and problem.detail.strip().rstrip(".").lower() == NO_ACCESS_DETAIL


class InsufficientBalanceError(ApiError):
    """402: the account balance cannot pay for a pod."""


class NotFoundError(ApiError):
    """404: the pod or volume does not exist (or is no longer visible)."""


class ConflictError(ApiError):
    """409: the action is not valid for the resource's current state."""


class ContractError(ApiError):
    """422: the request breaks the OpenAPI contract — a bug on our side."""


class RateLimitedError(ApiError):
    """429 that persisted through every allowed retry."""


class ServerError(ApiError):
    """5xx that persisted through every allowed retry."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    402: InsufficientBalanceError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    422: ContractError,
    429: RateLimitedError,
}


def api_error(problem: Problem, *, operation: str, hint: str = "") -> ApiError:
    """The most specific ApiError subclass for the problem's status (and, for a 403, detail)."""
    kind = ServerError if problem.status >= 500 else _BY_STATUS.get(problem.status, ApiError)
    if is_key_scope(problem):
        kind = KeyNotPermittedError
    return kind(problem, operation=operation, hint=hint)


@dataclass(frozen=True)
class Attempt:
    """What one candidate answered during placement."""

    gpu_id: str
    count: int
    outcome: str


class PlacementError(RunPodError):
    """No candidate produced a pod; `attempts` says what each one answered."""

    def __init__(self, message: str, *, attempts: Sequence[Attempt]) -> None:
        self.attempts = tuple(attempts)
        super().__init__(message)


class PodFailedError(RunPodError):
    """The pod never served. A pod this run created was terminated so that nothing bills for
    it (one that could not be is a MayStillBillError); a pod the stack already recorded (an
    update) was left running. The message says which.
    """

    def __init__(self, message: str, *, pod_id: str, last_status: str) -> None:
        self.pod_id = pod_id
        self.last_status = last_status
        super().__init__(message)


class CrashLoopError(PodFailedError):
    """The pod stayed RUNNING while its container exited and RunPod restarted it again and
    again: it bills without ever serving. `restarts` is how many restarts were seen."""

    def __init__(self, message: str, *, pod_id: str, restarts: int) -> None:
        self.restarts = restarts
        super().__init__(message, pod_id=pod_id, last_status="RUNNING (crash loop)")


class SeedFailedError(RunPodError):
    """Seeding did not put every model's weights on the volume: `failures` maps each failed
    model to (reason, fix). The seeding pod was terminated; no GPU pod for them was made."""

    def __init__(self, message: str, *, failures: Mapping[str, tuple[str, str]]) -> None:
        self.failures = dict(failures)
        super().__init__(message)


class MayStillBillError(RunPodError):
    """A pod or volume of ours may still exist and bill, and this run could not remove it or
    could not look for it. The message says what to delete and where; `kind` ("pod" or
    "volume"), `name` (what to look for) and `ids` (those known) say it to a program.
    """

    def __init__(
        self, message: str, *, kind: str, name: str | None = None, ids: Sequence[str] = ()
    ) -> None:
        self.kind = kind
        self.name = name
        self.ids = tuple(ids)
        super().__init__(message)


class Cancelled(RunPodError):
    """The command was asked to stop (SIGTERM, Ctrl-C, or its shell or engine gone).

    A RunPodError, so every path that tears down after a failure (a pod created in this run
    is terminated) handles a cancellation the same way, and main exits 1 with the reason.
    """
