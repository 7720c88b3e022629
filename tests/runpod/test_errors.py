"""The error tree: drawn true in the module's docstring, one class per problem status, httpx's
failure families all named, and the may-still-bill case told apart from every other."""

from __future__ import annotations

import inspect
import re

import httpx
import pytest

from frutebox_infra.runpod import errors

TREE_ENTRY = re.compile(r"^(?P<indent>[ │├└─]+)(?P<name>[A-Z]\w+)\s")
"""A class in the drawn tree: four columns of indent per level below the base."""


def drawn_tree() -> dict[str, int]:
    """Each class name drawn in the docstring's tree, with its depth below RunPodError."""
    lines = (TREE_ENTRY.match(line) for line in (errors.__doc__ or "").splitlines())
    return {m["name"]: len(m["indent"]) // 4 - 1 for m in lines if m}


def defined_tree() -> dict[str, int]:
    classes = [
        c
        for _, c in inspect.getmembers(errors, inspect.isclass)
        if issubclass(c, errors.RunPodError) and c.__module__ == errors.__name__
    ]
    return {c.__name__: c.__mro__.index(errors.RunPodError) for c in classes}


def test_the_drawn_tree_is_the_defined_one() -> None:
    assert drawn_tree() == defined_tree()
    assert defined_tree()["MayStillBillError"] == 1  # its own branch, not a PodFailedError


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        pytest.param(400, errors.BadRequestError, id="400"),
        pytest.param(401, errors.AuthenticationError, id="401"),
        pytest.param(402, errors.InsufficientBalanceError, id="402"),
        pytest.param(403, errors.ForbiddenError, id="403-a-pool"),
        pytest.param(404, errors.NotFoundError, id="404"),
        pytest.param(409, errors.ConflictError, id="409"),
        pytest.param(422, errors.ContractError, id="422"),
        pytest.param(429, errors.RateLimitedError, id="429"),
        pytest.param(418, errors.ApiError, id="other-4xx"),
        pytest.param(499, errors.ApiError, id="below-5xx"),
        pytest.param(500, errors.ServerError, id="500"),
        pytest.param(524, errors.ServerError, id="proxy-timeout"),
    ],
)
def test_each_status_has_its_most_specific_error(status: int, kind: type[errors.ApiError]) -> None:
    problem = errors.Problem(status=status, title="T", detail="d.", errors=("$.x: bad",))
    error = errors.api_error(problem, operation="GET /v2/pods", hint="Do this.")
    assert type(error) is kind and error.status == status
    assert str(error) == f"GET /v2/pods failed: {status} T: d [$.x: bad]. Do this."


@pytest.mark.parametrize(
    ("detail", "kind"),
    [
        pytest.param("access denied", errors.KeyNotPermittedError, id="runpods-no-access"),
        pytest.param("Access denied.", errors.KeyNotPermittedError, id="any-case-and-a-period"),
        pytest.param("your account cannot access the requested pool", errors.ForbiddenError,
                     id="a-pool"),
        pytest.param("access denied for the requested pool", errors.ForbiddenError,
                     id="more-than-no-access"),
    ],
)
def test_a_403_is_about_the_key_only_with_runpods_generic_detail(
    detail: str, kind: type[errors.ApiError]
) -> None:
    problem = errors.Problem(status=403, title="Forbidden", detail=detail)
    assert type(errors.api_error(problem, operation="POST /v2/pods")) is kind


def test_httpx_failures_name_every_exception_an_exchange_can_raise() -> None:
    raised = {
        c
        for _, c in inspect.getmembers(httpx, inspect.isclass)
        if issubclass(c, Exception) and c.__module__.startswith("httpx")
    }
    # Raised only by looking a cookie up by name, which the package never does.
    assert httpx.CookieConflict in raised
    uncovered = {c for c in raised if not issubclass(c, errors.HTTPX_FAILURES)}
    assert uncovered == {httpx.CookieConflict}


def test_may_still_bill_carries_what_to_look_for() -> None:
    error = errors.MayStillBillError("Delete pod p1.", kind="pod", name="n", ids=["p1"])
    assert (str(error), error.kind, error.name, error.ids) == (
        "Delete pod p1.",
        "pod",
        "n",
        ("p1",),
    )
    assert isinstance(error, errors.RunPodError)
    assert not isinstance(error, errors.PodFailedError | errors.ConfigurationError)


def _transport(cause: BaseException | None) -> errors.TransportError:
    try:
        raise errors.TransportError("GET /pods: no answer") from cause
    except errors.TransportError as error:
        return error


@pytest.mark.parametrize(
    ("cause", "timed_out"),
    [
        pytest.param(httpx.ReadTimeout("read"), True, id="read-timeout"),
        pytest.param(httpx.ConnectTimeout("connect"), True, id="connect-timeout"),
        pytest.param(httpx.ConnectError("refused"), False, id="refused"),
        pytest.param(None, False, id="no-cause"),
    ],
)
def test_a_transport_error_says_whether_it_timed_out(
    cause: BaseException | None, timed_out: bool
) -> None:
    assert _transport(cause).timed_out is timed_out
