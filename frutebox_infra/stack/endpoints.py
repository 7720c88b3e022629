"""Which RunPod API, reached with which key: one resolution, one precedence, for every command.

The precedence is the same for the key and for the URL, and for the program (preview's live
look), the deploy step, `frutebox status` and `frutebox prices`:

1. the environment: `RUNPOD_API_KEY`, `RUNPOD_API_URL` (what CI and a shell export);
2. the stack: the secret `frutebox-infra:runpodApiKey`, the key `frutebox-infra:runpodApiUrl`;
3. the default: no key, RunPod's public API.

An exported URL winning means a rehearsal against the emulator can never reach the real API.
Pure: the caller hands in the environment and what it read of the stack; no module but this
one reads these variables (tests/test_layers.py checks it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from frutebox_infra.stack.settings import PROJECT

API_KEY_ENV = "RUNPOD_API_KEY"
API_URL_ENV = "RUNPOD_API_URL"
PROXY_TEMPLATE_ENV = "RUNPOD_PROXY_URL_TEMPLATE"
STACK_API_KEY = "runpodApiKey"
"""The stack secret (`frutebox-infra:runpodApiKey`); deliberately not declared in Pulumi.yaml."""
STACK_API_URL = "runpodApiUrl"

STEP_STACK_KEY_ENV = "FRUTEBOX_STACK_RUNPOD_API_KEY"
"""How the program hands the stack's secret key to the deploy step, which cannot read config:
under its own name, so the step applies the same precedence and can say where its key came
from."""
STEP_STACK_URL_ENV = "FRUTEBOX_STACK_RUNPOD_API_URL"

_K = TypeVar("_K")

DEFAULT_API_URL = "https://api.runpod.io"
DEFAULT_PROXY_URL_TEMPLATE = "https://{podId}-{port}.proxy.runpod.net"


@dataclass(frozen=True, kw_only=True)
class Endpoint:
    """Where RunPod is, the key to use and where each came from (never the key itself)."""

    api_key: str | None = field(repr=False)
    key_source: str | None
    """`environment variable RUNPOD_API_KEY` or `stack secret frutebox-infra:runpodApiKey`."""
    api_url: str
    url_source: str
    proxy_template: str

    @property
    def has_key(self) -> bool:
        return bool(self.api_key)


def _given(value: object) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def resolve_endpoint(
    env: Mapping[str, str], *, stack_key: object = None, stack_url: object = None
) -> Endpoint:
    """The one resolution: the environment, then the stack, then the default."""
    key, key_source = _given(env.get(API_KEY_ENV)), f"environment variable {API_KEY_ENV}"
    if key is None:
        key, key_source = _given(stack_key), f"stack secret {PROJECT}:{STACK_API_KEY}"
    url, url_source = _given(env.get(API_URL_ENV)), f"environment variable {API_URL_ENV}"
    if url is None:
        url, url_source = _given(stack_url), f"stack key {PROJECT}:{STACK_API_URL}"
    if url is None:
        url, url_source = DEFAULT_API_URL, "RunPod's public API (the default)"
    return Endpoint(
        api_key=key,
        key_source=key_source if key else None,
        api_url=url,
        url_source=url_source,
        proxy_template=_given(env.get(PROXY_TEMPLATE_ENV)) or DEFAULT_PROXY_URL_TEMPLATE,
    )


def step_endpoint(env: Mapping[str, str]) -> Endpoint:
    """The deploy step's resolution: the stack's values arrive under their own names."""
    return resolve_endpoint(
        env, stack_key=env.get(STEP_STACK_KEY_ENV), stack_url=env.get(STEP_STACK_URL_ENV)
    )


def step_environment(stack_key: _K | None, stack_url: str | None) -> dict[str, _K | str]:
    """What the program passes the deploy step of the stack's endpoint (the key may be a
    secret Output, which the caller marks). The step inherits the environment itself, so an
    exported key or URL is never copied into the stack's state."""
    out: dict[str, _K | str] = {}
    if stack_key is not None:
        out[STEP_STACK_KEY_ENV] = stack_key
    if stack_url and stack_url.strip():
        out[STEP_STACK_URL_ENV] = stack_url.strip()
    return out


SECRET_ENV = (API_KEY_ENV, STEP_STACK_KEY_ENV)
"""Variables that carry a RunPod key: masked in everything the step prints, dropped from
sandboxes."""
