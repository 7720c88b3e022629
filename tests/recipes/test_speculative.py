"""Speculative decoding: the method is the model's, the flags the engine's, and off says why."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from frutebox_infra.catalog.schema import Model, Runtime
from frutebox_infra.planner.plan import plan_fleet
from frutebox_infra.recipes.speculative import eagle3_env_name, speculation
from frutebox_infra.stack.environment import Environment
from tests.factories import real_registry, server_words, settings, sglang_model, words
from tests.recipes.conftest import BuildPod

HEAD = "org/eagle3-head"


def spec_model(method: str, *, k: int = 7, draft: str | None = None) -> Model:
    speed: dict[str, object] = {"spec_decode": method, "K": k}
    if draft:
        speed["draft_model"] = draft
    return sglang_model("spec-target", speed=speed)


def sglang_flags(head: str, k: int) -> tuple[str, ...]:
    return (
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        head,
        "--speculative-num-steps",
        str(k),
    )


def vllm_config(flags: tuple[str, ...]) -> dict[str, object]:
    assert len(flags) == 2 and flags[0] == "--speculative-config"
    return json.loads(flags[1])  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("method", "engine"),
    [
        pytest.param("none", Runtime.SGLANG, id="none-sglang"),
        pytest.param("none", Runtime.VLLM, id="none-vllm"),
        pytest.param("mtp", Runtime.SGLANG, id="mtp-sglang"),
        pytest.param("mtp", Runtime.VLLM, id="mtp-vllm"),
        pytest.param("eagle3", Runtime.LLAMACPP, id="eagle3-llamacpp"),
        pytest.param("draft", Runtime.LLAMACPP, id="draft-llamacpp"),
    ],
)
def test_methods_that_need_no_flags_add_none(method: str, engine: Runtime) -> None:
    spec = speculation(spec_model(method, draft=HEAD), engine, enabled=True, eagle3_head=HEAD)
    assert spec.flags == ()
    assert not spec.active
    assert spec.note is None


@pytest.mark.parametrize("engine", [Runtime.SGLANG, Runtime.VLLM])
def test_draft_needs_a_draft_model(engine: Runtime) -> None:
    off = speculation(spec_model("draft"), engine, enabled=True, eagle3_head=None)
    assert off.flags == () and off.note is not None and "draft_model" in off.note
    on = speculation(spec_model("draft", draft="org/small"), engine, enabled=True, eagle3_head=None)
    assert on.active and on.note is None
    if engine is Runtime.SGLANG:
        assert on.flags[on.flags.index("--speculative-draft-model-path") + 1] == "org/small"
    else:
        config = vllm_config(on.flags)
        assert (config["model"], config["num_speculative_tokens"]) == ("org/small", 7)


@pytest.mark.parametrize("method", ["eagle3", "p-eagle"])
@pytest.mark.parametrize("engine", [Runtime.SGLANG, Runtime.VLLM])
def test_eagle_without_a_head_is_off_and_says_how_to_fix(method: str, engine: Runtime) -> None:
    spec = speculation(spec_model(method), engine, enabled=True, eagle3_head=None)
    assert spec.flags == ()
    assert spec.note is not None
    assert "FRUTEBOX_EAGLE3_HEAD_SPEC_TARGET" in spec.note
    assert "draft_model" in spec.note


@pytest.mark.parametrize(
    ("registry_head", "env_head"),
    [pytest.param(HEAD, None, id="from-registry"), pytest.param(None, HEAD, id="from-env")],
)
def test_sglang_eagle3_flags_are_exact(registry_head: str | None, env_head: str | None) -> None:
    spec = speculation(
        spec_model("eagle3", k=5, draft=registry_head),
        Runtime.SGLANG,
        enabled=True,
        eagle3_head=env_head,
    )
    assert spec.flags == sglang_flags(HEAD, 5)
    assert spec.note is None


def test_vllm_eagle3_config_is_exact() -> None:
    spec = speculation(spec_model("eagle3"), Runtime.VLLM, enabled=True, eagle3_head=HEAD)
    assert vllm_config(spec.flags) == {
        "method": "eagle3",
        "model": HEAD,
        "num_speculative_tokens": 7,
    }


def test_p_eagle_drafts_in_parallel_only_on_vllm() -> None:
    vllm = speculation(spec_model("p-eagle", k=4), Runtime.VLLM, enabled=True, eagle3_head=HEAD)
    assert vllm_config(vllm.flags) == {
        "method": "eagle3",
        "model": HEAD,
        "num_speculative_tokens": 4,
        "parallel_drafting": True,
    }
    sglang = speculation(spec_model("p-eagle", k=4), Runtime.SGLANG, enabled=True, eagle3_head=HEAD)
    assert sglang.flags == sglang_flags(HEAD, 4)
    assert "parallel" not in " ".join(sglang.flags)
    assert sglang.note is not None and "vLLM" in sglang.note


@pytest.mark.parametrize("method", ["draft", "eagle3", "p-eagle", "mtp"])
@pytest.mark.parametrize("engine", [Runtime.SGLANG, Runtime.VLLM])
def test_one_switch_turns_it_all_off(method: str, engine: Runtime) -> None:
    spec = speculation(spec_model(method, draft=HEAD), engine, enabled=False, eagle3_head=HEAD)
    assert spec.flags == ()
    assert spec.note is not None and "FRUTEBOX_SPEC_DECODE" in spec.note


@pytest.mark.parametrize(
    ("model_id", "name"),
    [
        pytest.param("qwen3-coder", "FRUTEBOX_EAGLE3_HEAD_QWEN3_CODER", id="dash"),
        pytest.param("kimi-k2.7-code", "FRUTEBOX_EAGLE3_HEAD_KIMI_K2_7_CODE", id="dot"),
    ],
)
def test_env_name_is_the_id_upper_cased(model_id: str, name: str) -> None:
    assert eagle3_env_name(model_id) == name


def test_flags_are_appended_to_the_sglang_pod_and_survive_splitting(build_pod: BuildPod) -> None:
    pod = build_pod("qwen3-coder", Runtime.SGLANG, "NVIDIA H200", 4, eagle3_head=HEAD)
    assert tuple(words(pod.args)[-6:]) == sglang_flags(HEAD, 7)


def test_vllm_json_survives_the_args_string(build_pod: BuildPod) -> None:
    m = replace(spec_model("p-eagle"), runtimes=(Runtime.VLLM,))
    pod = build_pod(m, Runtime.VLLM, "NVIDIA H200", 1, eagle3_head=HEAD)
    split = words(pod.args)
    config = json.loads(split[split.index("--speculative-config") + 1])
    assert config["parallel_drafting"] is True


# ---- through the planner and the process environment --------------------------------------


def coder_args(env: dict[str, str], **config: object) -> tuple[str, tuple[str, ...]]:
    plan = plan_fleet(
        real_registry(),
        settings(models=["qwen3-coder"], **config),
        stack="t",
        environment=Environment.from_env(env),
    )
    m = plan.model("qwen3-coder")
    assert m is not None and m.placement is not None, plan.problems
    return m.placement.pod.args, plan.warnings


def test_an_env_head_switches_eagle3_on_for_that_model() -> None:
    args, _ = coder_args({"FRUTEBOX_EAGLE3_HEAD_QWEN3_CODER": HEAD})
    assert "--speculative-algorithm" in server_words(args)
    args, warnings = coder_args({})
    assert "--speculative-algorithm" not in words(args)
    assert any("FRUTEBOX_EAGLE3_HEAD_QWEN3_CODER" in w for w in warnings)


@pytest.mark.parametrize("value", ["false", "FALSE", " false "])
def test_frutebox_spec_decode_false_turns_it_off(value: str) -> None:
    env = {"FRUTEBOX_EAGLE3_HEAD_QWEN3_CODER": HEAD, "FRUTEBOX_SPEC_DECODE": value}
    assert Environment.from_env(env).spec_decode is False
    args, warnings = coder_args(env)
    assert "--speculative-algorithm" not in words(args)
    assert any("FRUTEBOX_SPEC_DECODE" in w for w in warnings)


def test_stack_config_can_turn_it_off_too() -> None:
    args, _ = coder_args({"FRUTEBOX_EAGLE3_HEAD_QWEN3_CODER": HEAD}, specDecode=False)
    assert "--speculative-algorithm" not in words(args)


def test_spec_decode_stays_on_unless_false() -> None:
    assert Environment.from_env({}).spec_decode is True
    assert Environment.from_env({"FRUTEBOX_SPEC_DECODE": "true"}).spec_decode is True
