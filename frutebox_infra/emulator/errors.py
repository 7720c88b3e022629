"""Errors shaped like the real API's: RFC 9457 problem JSON with a status and a detail."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CAPACITY_DETAIL = (
    "There are no longer any instances available with the requested specifications."
    " Please refresh and try again."
)

TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    402: "Payment Required",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


class ApiProblem(Exception):
    """An answer the real API gives as RFC 9457 problem JSON."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        errors: list[str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.errors = errors
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        problem: dict[str, Any] = {
            "title": TITLES.get(self.status, "Error"),
            "status": self.status,
            "detail": self.detail,
        }
        if self.errors is not None:
            problem["errors"] = self.errors
        return problem
