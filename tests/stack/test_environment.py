"""What the planner learns from the process environment: the token, the switch, EAGLE3 heads."""

from __future__ import annotations

import pytest

from frutebox_infra.stack.environment import NO_ENVIRONMENT, Environment


def test_serve_options_pick_each_models_own_eagle3_head_from_the_environment() -> None:
    env = Environment.from_env({"FRUTEBOX_EAGLE3_HEAD_QWEN3_CODER": " org/head ", "HF_TOKEN": "x"})
    assert env.serve_options("qwen3-coder").eagle3_head == "org/head"
    assert env.serve_options("qwen3-8b").eagle3_head is None
    assert env.serve_options("qwen3-8b").hf_token_configured is True
    assert Environment().serve_options("m", hf_token=True).hf_token_configured is True


def test_a_blank_eagle3_head_is_no_head() -> None:
    env = Environment.from_env({"FRUTEBOX_EAGLE3_HEAD_QWEN3_CODER": "  "})
    assert env.eagle3_heads == {}
    assert env.serve_options("qwen3-coder").eagle3_head is None


@pytest.mark.parametrize(
    ("env", "token"),
    [
        pytest.param({}, False, id="none"),
        pytest.param({"HF_TOKEN": ""}, False, id="empty"),
        pytest.param({"HF_TOKEN": "x"}, True, id="hf-token"),
        pytest.param({"FRUTEBOX_HF_TOKEN": "x"}, True, id="deploy-step-name"),
    ],
)
def test_the_hf_token_counts_under_either_name(env: dict[str, str], token: bool) -> None:
    assert Environment.from_env(env).serve_options("m").hf_token_configured is token


@pytest.mark.parametrize(
    ("value", "enabled"),
    [
        pytest.param(None, True, id="unset"),
        pytest.param("true", True, id="true"),
        pytest.param("no", True, id="only-false-turns-it-off"),
        pytest.param("false", False, id="false"),
        pytest.param(" FALSE ", False, id="any-case-and-spacing"),
    ],
)
def test_speculative_decoding_is_on_unless_switched_off(value: str | None, enabled: bool) -> None:
    env = Environment.from_env({} if value is None else {"FRUTEBOX_SPEC_DECODE": value})
    assert env.serve_options("m").spec_decode_enabled is enabled
    # The stack's own switch can only turn it off too.
    assert env.serve_options("m", spec_decode=False).spec_decode_enabled is False


def test_no_environment_is_the_default() -> None:
    assert Environment.from_env({}) == NO_ENVIRONMENT
