"""What a 401 or 403 says: which key was refused (where it came from, never its value) and what
the command needs of it.

RunPod keys have a permission (All, Restricted, Read Only) and can be disabled. A key RunPod
does not accept is a 401; a valid key whose scope does not cover the action is a 403 `access
denied` (errors.is_key_scope). Reading (preview's live look, `frutebox status`, `frutebox
prices`) needs read access; `pulumi up` and `pulumi destroy` need write access.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from frutebox_infra.stack.endpoints import API_KEY_ENV, STACK_API_KEY
from frutebox_infra.stack.settings import PROJECT


class Need(StrEnum):
    READ = "read"
    WRITE = "write"


SCOPES = {
    Need.READ: "read access (a Read Only key is enough)",
    Need.WRITE: "write access (permission All, or Restricted with Read/Write on Pods and"
    " Network Volumes)",
}

DEPLOY = "`pulumi up` and `pulumi destroy`"
"""The command the deploy step serves."""


@dataclass(frozen=True)
class KeyUse:
    """The key a client sends and the command it serves: what a refusal names."""

    source: str | None
    """Where the key came from (`Endpoint.key_source`), e.g. `environment variable
    RUNPOD_API_KEY`; never the key itself."""
    command: str
    need: Need


def method_need(method: str) -> Need:
    return Need.READ if method.upper() in ("GET", "HEAD") else Need.WRITE


def refusal_hint(status: int, method: str, use: KeyUse) -> str:
    """The sentence that ends a 401, or a 403 about the key's scope, for `use`'s command."""
    source = use.source or "the configured RunPod key"
    fix = (
        f"create one in the RunPod console (Settings, API Keys) and export {API_KEY_ENV} or set"
        f" the stack secret {PROJECT}:{STACK_API_KEY}"
    )
    needs = f"For {use.command} the key needs {SCOPES[use.need]}"
    if status == 401:
        return (
            f"RunPod does not accept the API key from {source}: it is wrong, expired, or"
            f" disabled in the RunPod console. {needs}; {fix}."
        )
    return (
        f"The API key from {source} is valid but may not {method_need(method).value} this"
        f" (its permission is Read Only, or Restricted without it). {needs}; {fix}."
    )
