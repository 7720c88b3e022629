"""API keys and their scopes, answered as RunPod v2 answers them: 401 for a key it does not
accept, 403 for a valid key without access to the action.

RunPod's console makes keys with the permission All, Restricted or Read Only, and can disable
(revoke) one. The OpenAPI document's examples are the bodies: 401 `{"title": "Unauthorized",
"detail": "missing bearer token"}` (the key is "missing, malformed, expired, or invalid") and
403 `{"title": "Forbidden", "detail": "access denied"}` ("the bearer token is valid, but it
does not grant access to the requested resource or action"). A disabled key is one RunPod no
longer accepts, so it answers like a wrong one.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from frutebox_infra.emulator.errors import ApiProblem

NO_ACCESS_DETAIL = "access denied"
"""RunPod's 403 detail for a key whose scope does not cover the action."""
INVALID_KEY_DETAIL = "invalid API key"
WRITES = frozenset({"POST", "PATCH", "PUT", "DELETE"})


class Scope(StrEnum):
    ALL = "all"
    READ_ONLY = "read-only"
    REVOKED = "revoked"


def authenticate(keys: Mapping[str, Scope], authorization: str, *, any_key: bool) -> Scope:
    """The scope of the Authorization header's key; a 401 for one RunPod does not accept.

    `keys` are the account's keys with their scopes; with `any_key`, a key not among them is
    accepted with the scope All (the forgiving default of a local emulator).
    """
    token = authorization[7:].strip() if authorization.startswith("Bearer ") else ""
    if not token:
        raise ApiProblem(401, "missing bearer token")
    scope = keys.get(token, Scope.ALL if any_key else None)
    if scope is None or scope is Scope.REVOKED:
        raise ApiProblem(401, INVALID_KEY_DETAIL)
    return scope


def permit(scope: Scope, method: str) -> None:
    """A 403 when the key's scope does not cover the method: a Read Only key never writes."""
    if scope is Scope.READ_ONLY and method in WRITES:
        raise ApiProblem(403, NO_ACCESS_DETAIL)


def parse_key(spec: str) -> tuple[str, Scope]:
    """`KEY` (scope All) or `KEY:SCOPE` with SCOPE one of all, read-only, revoked."""
    key, sep, scope = spec.partition(":")
    if not key.strip():
        raise ValueError(f"{spec!r}: expected KEY or KEY:SCOPE")
    try:
        return key.strip(), Scope(scope.strip()) if sep else Scope.ALL
    except ValueError:
        known = ", ".join(s.value for s in Scope)
        raise ValueError(f"{spec!r}: unknown scope {scope!r}; one of {known}") from None
