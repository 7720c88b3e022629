"""Problems read like the real API's: RFC 9457 JSON with a title, the status and a detail."""

from __future__ import annotations

import pytest

from frutebox_infra.emulator.errors import TITLES, ApiProblem
from tests.emulator.conftest import valid


@pytest.mark.parametrize("status", sorted(TITLES))
def test_every_status_the_emulator_answers_has_its_http_title(status: int) -> None:
    body = ApiProblem(status, "why").body()
    assert body == {"title": TITLES[status], "status": status, "detail": "why"}


def test_an_unlisted_status_is_titled_error() -> None:
    assert ApiProblem(418, "teapot").body()["title"] == "Error"


def test_field_errors_appear_only_when_given() -> None:
    assert "errors" not in ApiProblem(422, "x").body()
    body = ApiProblem(422, "Request validation failed.", errors=["$.disk: too small"]).body()
    assert body["errors"] == ["$.disk: too small"]
    assert ApiProblem(422, "x", errors=[]).body()["errors"] == []


def test_headers_are_copied_so_the_caller_cannot_change_them_afterwards() -> None:
    given = {"Retry-After": "3"}
    problem = ApiProblem(429, "slow down", headers=given)
    given["Retry-After"] = "0"
    assert problem.headers == {"Retry-After": "3"} and str(problem) == "slow down"


@pytest.mark.parametrize(
    "problem",
    [
        pytest.param(ApiProblem(404, "pod p not found"), id="plain"),
        pytest.param(ApiProblem(422, "Request validation failed.", errors=["$: x"]), id="fields"),
    ],
)
def test_the_body_is_the_official_error_shape(problem: ApiProblem) -> None:
    valid("ErrorResponse", problem.body())
