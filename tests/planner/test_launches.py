"""Every launch a pod may be created with is checked against its pinned engine at plan time."""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

from frutebox_infra.catalog.engine_options import EngineOptions
from frutebox_infra.catalog.schema import Model, Runtime
from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.plumbing.validation import validate
from tests.factories import (
    gpu,
    ollama_model,
    real_registry,
    registry,
    rules,
    settings,
    vllm_model,
)

P100 = gpu("P-1.00", vram_gb=80, secure=1.00)
P150 = gpu("P-1.50", vram_gb=80, secure=1.50)


REAL_FACTS = real_registry().engine_options


def checked_plan(
    catalog: list[Model],
    gpus: tuple[Any, ...] = (P100, P150),
    *,
    facts: Any = REAL_FACTS,
    images: Any = None,
    **config: Any,
) -> FleetPlan:
    config.setdefault("models", [m.id for m in catalog])
    reg = registry(catalog, gpus, engine_options=facts, images=images)
    return plan_fleet(reg, settings(**config), stack="test")


def test_a_flag_the_engine_does_not_know_is_a_plan_problem_with_the_fix() -> None:
    bad = vllm_model("bad", engine_args={"vllm": ["--tokenizer-mod", "mistral"]})
    fleet = checked_plan([bad])
    (problem,) = [p for p in fleet.problems if p.rule == "launch-rejected"]
    assert problem.message.startswith("bad: vllm/vllm-openai:v0.31.0-cu129 would refuse")
    assert "flag --tokenizer-mod" in problem.message and "--tokenizer-mode" in problem.message
    assert "registry/engine_options/vllm.json" in problem.message
    assert "--tokenizer-mod" in problem.fix
    good = vllm_model("good", engine_args={"vllm": ["--tokenizer-mode", "mistral"]})
    assert "launch-rejected" not in rules(checked_plan([good]))


def test_a_refusal_only_a_fallback_would_meet_is_caught() -> None:
    # vLLM caches KV in fp8 only on native-FP8 GPUs: with facts that lack `fp8`, the cheap
    # Ampere placement launches fine and only the dearer FP8 fallback would crash.
    ampere = gpu("AMPERE", vram_gb=80, fp8=False, secure=1.00)
    hopper = gpu("HOPPER", vram_gb=80, fp8=True, secure=1.20)
    data = asdict(REAL_FACTS[Runtime.VLLM])
    for f in data["flags"]:
        if "--kv-cache-dtype" in f["names"]:
            f["choices"] = [c for c in f["choices"] if c != "fp8"]
    facts = {**REAL_FACTS, Runtime.VLLM: validate(EngineOptions, data)}
    fleet = checked_plan([vllm_model("m")], (ampere, hopper), facts=facts)
    assert fleet.models[0].placement is not None and fleet.models[0].placement.gpu.id == "AMPERE"
    (problem,) = [p for p in fleet.problems if p.rule == "launch-rejected"]
    assert "1x HOPPER" in problem.message and "--kv-cache-dtype fp8" in problem.message
    alone = checked_plan([vllm_model("m")], (ampere,), facts=facts)
    assert "launch-rejected" not in rules(alone)


def test_a_shared_pods_launch_is_checked_with_all_its_members() -> None:
    images = dict(real_registry().images)
    ollama = images[Runtime.OLLAMA]
    images[Runtime.OLLAMA] = replace(ollama, cache_env={"OLLAMA_MODELZ": "/w"})
    small = [ollama_model("aa", vram_gb=1.0), ollama_model("bb", vram_gb=1.5)]
    fleet = checked_plan(small, (P100,), images=images, colocate=True)
    assert fleet.pods[0].model_ids == ("bb", "aa")
    (problem,) = [p for p in fleet.problems if p.rule == "launch-rejected"]
    assert problem.message.startswith(f"bb, aa: {ollama.reference} would refuse")
    assert "OLLAMA_MODELZ" in problem.message and "OLLAMA_MODELS" in problem.message
    assert "launch-rejected" not in rules(checked_plan(small, (P100,), colocate=True))


def test_a_registry_without_engine_facts_plans_unchecked() -> None:
    # A registry at a git ref from before the facts existed: the diff still plans it.
    bad = vllm_model("bad", engine_args={"vllm": ["--tokenizer-mod", "mistral"]})
    fleet = checked_plan([bad], facts={})
    assert "launch-rejected" not in rules(fleet) and fleet.models[0].placement is not None


def test_facts_read_for_another_tag_are_a_warning_to_refresh() -> None:
    images = dict(real_registry().images)
    images[Runtime.VLLM] = replace(images[Runtime.VLLM], tag="v0.32.0-cu129")
    fleet = checked_plan([vllm_model("m")], images=images)
    assert any(
        "read for vllm/vllm-openai:v0.31.0-cu129" in w
        and "v0.32.0-cu129" in w
        and "tools/engine-options" in w
        for w in fleet.warnings
    )
    assert not any("tools/engine-options" in w for w in checked_plan([vllm_model("m")]).warnings)


def test_placements_that_launch_alike_are_one_refusal_naming_the_first() -> None:
    # An Ollama pod is the same on every GPU type (one launch variant): its fallback launches
    # as its chosen placement does, so one refusal stands for both.
    images = dict(real_registry().images)
    images[Runtime.OLLAMA] = replace(images[Runtime.OLLAMA], cache_env={"OLLAMA_MODELZ": "/w"})
    small = [ollama_model("aa", vram_gb=1.0)]
    fleet = checked_plan(small, images=images, maxFallbackPremium=2.0)
    (plan,) = fleet.models
    assert plan.placement is not None and plan.placement.gpu.id == "P-1.00"
    assert [f.gpu.id for f in plan.fallbacks] == ["P-1.50"]
    (problem,) = [p for p in fleet.problems if p.rule == "launch-rejected"]
    assert "(1x P-1.00)" in problem.message and "OLLAMA_MODELZ" in problem.message
    accepted = checked_plan(small, maxFallbackPremium=2.0)
    assert "launch-rejected" not in rules(accepted) and accepted.models[0].fallbacks
