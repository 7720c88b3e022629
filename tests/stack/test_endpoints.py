"""The one resolution of RunPod's key and URL: environment, then stack, then the default."""

from __future__ import annotations

import pytest

from frutebox_infra.stack.endpoints import (
    DEFAULT_API_URL,
    DEFAULT_PROXY_URL_TEMPLATE,
    STEP_STACK_KEY_ENV,
    STEP_STACK_URL_ENV,
    resolve_endpoint,
    step_endpoint,
    step_environment,
)

ENV_KEY = "environment variable RUNPOD_API_KEY"
STACK_KEY = "stack secret frutebox-infra:runpodApiKey"


@pytest.mark.parametrize(
    ("env", "stack_key", "key", "source"),
    [
        pytest.param({}, None, None, None, id="none"),
        pytest.param({"RUNPOD_API_KEY": " k1 "}, "k2", "k1", ENV_KEY, id="env-wins"),
        pytest.param({"RUNPOD_API_KEY": "  "}, "k2", "k2", STACK_KEY, id="blank-env-is-unset"),
        pytest.param({}, "k2", "k2", STACK_KEY, id="stack-secret"),
        pytest.param({}, 42, None, None, id="not-text-is-unset"),
    ],
)
def test_the_key_and_where_it_came_from(
    env: dict[str, str], stack_key: object, key: str | None, source: str | None
) -> None:
    endpoint = resolve_endpoint(env, stack_key=stack_key)
    assert (endpoint.api_key, endpoint.key_source, endpoint.has_key) == (key, source, bool(key))


@pytest.mark.parametrize(
    ("env", "stack_url", "url", "source"),
    [
        pytest.param({}, None, DEFAULT_API_URL, "RunPod's public API (the default)", id="default"),
        pytest.param({}, "", DEFAULT_API_URL, "RunPod's public API (the default)", id="empty"),
        pytest.param(
            {}, "http://127.0.0.1:9/v2", "http://127.0.0.1:9/v2",
            "stack key frutebox-infra:runpodApiUrl", id="stack",
        ),
        pytest.param(
            {"RUNPOD_API_URL": "http://127.0.0.1:8"}, "http://127.0.0.1:9",
            "http://127.0.0.1:8", "environment variable RUNPOD_API_URL", id="env-wins",
        ),
    ],
)  # fmt: skip
def test_the_url_follows_the_same_precedence(
    env: dict[str, str], stack_url: str | None, url: str, source: str
) -> None:
    endpoint = resolve_endpoint(env, stack_url=stack_url)
    assert (endpoint.api_url, endpoint.url_source) == (url, source)


def test_the_key_never_shows_in_its_repr() -> None:
    endpoint = resolve_endpoint({"RUNPOD_API_KEY": "secret-key-123"})
    assert "secret-key-123" not in repr(endpoint)


def test_the_proxy_template_comes_from_the_environment_only() -> None:
    assert resolve_endpoint({}).proxy_template == DEFAULT_PROXY_URL_TEMPLATE
    env = {"RUNPOD_PROXY_URL_TEMPLATE": "http://127.0.0.1:7/proxy/{podId}-{port}"}
    assert resolve_endpoint(env).proxy_template == env["RUNPOD_PROXY_URL_TEMPLATE"]


def test_the_deploy_step_resolves_what_the_program_hands_it_by_the_same_rule() -> None:
    handed = step_environment("stack-key-1", " http://127.0.0.1:9 ")
    assert handed == {STEP_STACK_KEY_ENV: "stack-key-1", STEP_STACK_URL_ENV: "http://127.0.0.1:9"}
    alone = step_endpoint(handed)
    assert (alone.api_key, alone.key_source, alone.api_url) == (
        "stack-key-1",
        STACK_KEY,
        "http://127.0.0.1:9",
    )
    exported = step_endpoint({**handed, "RUNPOD_API_KEY": "env-key-1"})
    assert (exported.api_key, exported.key_source) == ("env-key-1", ENV_KEY)
    assert step_environment(None, "") == {}
