"""The planner: fallbacks, worst case, volume, cost, budget, stack-level problems, the pod body."""

from __future__ import annotations

import itertools
import json
import math
import re
from functools import cache
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry as SchemaRegistry
from referencing import Resource
from referencing.jsonschema import DRAFT202012

from frutebox_infra.engine_options import EngineOptions
from frutebox_infra.plan import (
    HEALTH_BASE_S,
    HOURS_PER_MONTH,
    Environment,
    FleetPlan,
    VolumePlan,
    health_deadline_s,
    plan_fleet,
    pod_body,
    pod_name,
    pod_request,
    volume_request,
)
from frutebox_infra.registry import Model, Registry, Runtime
from frutebox_infra.resolver import PlanProblem
from tests.factories import (
    flag,
    gpu,
    ollama_model,
    openapi_path,
    real_registry,
    registry,
    settings,
    sglang_model,
)

OWNER = "0123456789abcdef"
P100 = gpu("P-1.00", vram_gb=80, secure=1.00)
P150 = gpu("P-1.50", vram_gb=80, secure=1.50)
P151 = gpu("P-1.51", vram_gb=80, secure=1.51)
TEN_GB = sglang_model("ten", vram_gb=10)


def plan(
    catalog: list[Model], gpus: tuple[Any, ...] = (P100, P150, P151), **config: Any
) -> FleetPlan:
    """Plan a synthetic catalog; every catalog model is armed unless `models=` says otherwise."""
    config.setdefault("models", [m.id for m in catalog])
    return plan_fleet(registry(catalog, gpus), settings(**config), stack="test")


def rules(fleet: FleetPlan) -> list[str]:
    return [p.rule for p in fleet.problems]


# ---- fallbacks and the worst case ------------------------------------------------------------


@pytest.mark.parametrize(
    ("premium", "fallbacks"),
    [
        pytest.param(1.0, [], id="none-at-1.0"),
        pytest.param(1.49, [], id="just-below-1.50"),
        pytest.param(1.5, ["P-1.50"], id="1.50-allowed-at-1.5"),
        pytest.param(1.51, ["P-1.50", "P-1.51"], id="1.51-allowed-at-1.51"),
    ],
)
def test_fallbacks_only_within_the_premium(premium: float, fallbacks: list[str]) -> None:
    m = plan([TEN_GB], maxFallbackPremium=premium).model("ten")
    assert m is not None and m.placement is not None
    assert m.placement.gpu.id == "P-1.00"
    assert [p.gpu.id for p in m.fallbacks] == fallbacks


def test_worst_case_is_the_dearest_allowed_candidate() -> None:
    fleet = plan([TEN_GB, sglang_model("other", vram_gb=10)], maxFallbackPremium=1.5)
    m = fleet.model("ten")
    assert m is not None
    assert (m.usd_per_hour_best, m.usd_per_hour_worst) == (1.00, 1.50)
    assert [p.usd_per_hour for p in m.candidates] == [1.00, 1.50]
    assert (fleet.usd_per_hour_best, fleet.usd_per_hour_worst) == (2.00, 3.00)


def test_without_fallbacks_worst_is_best() -> None:
    m = plan([TEN_GB], maxFallbackPremium=1.0).model("ten")
    assert m is not None and m.usd_per_hour_worst == m.usd_per_hour_best == 1.00


# ---- the volume ------------------------------------------------------------------------------


def weights(model_id: str, disk_gb: float) -> Model:
    return ollama_model(model_id, vram_gb=1, disk_gb=disk_gb)


@pytest.mark.parametrize(
    ("disks", "headroom", "size"),
    [
        pytest.param([100, 50], 0.2, 180, id="sum-plus-20pct"),
        pytest.param([100], 0.1, 110, id="exact-product-is-not-rounded-up"),
        pytest.param([100.5], 0.0, 101, id="fractions-round-up"),
        pytest.param([13.44], 0.2, 17, id="dev-like"),
    ],
)
def test_volume_is_armed_weights_plus_headroom(
    disks: list[float], headroom: float, size: int
) -> None:
    models = [weights(f"w{i}", d) for i, d in enumerate(disks)]
    fleet = plan(models, volumeHeadroom=headroom)
    assert fleet.volume.weights_gb == pytest.approx(sum(disks))
    assert fleet.volume.size_gb == size


def test_unarmed_models_take_no_volume() -> None:
    fleet = plan([weights("armed", 100), weights("idle", 900)], models=["armed"], volumeHeadroom=0)
    assert fleet.volume.size_gb == 100


@pytest.mark.parametrize(
    ("disk", "min_volume", "size"),
    [
        pytest.param(1, 10, 10, id="runpod-minimum-10"),
        pytest.param(9, 10, 10, id="just-under-minimum"),
        pytest.param(11, 10, 11, id="just-over-minimum"),
        pytest.param(100, 500, 500, id="stack-minimum-wins"),
        pytest.param(600, 500, 600, id="weights-beat-stack-minimum"),
        pytest.param(4096, 10, 4096, id="runpod-maximum"),
        pytest.param(5000, 10, 4096, id="capped-at-4096"),
    ],
)
def test_volume_bounds(disk: float, min_volume: int, size: int) -> None:
    fleet = plan([weights("w", disk)], volumeHeadroom=0, minVolumeGb=min_volume)
    assert fleet.volume.size_gb == size


def test_weights_no_volume_can_hold_are_a_problem() -> None:
    # RunPod's largest volume is 4096 GB: capping silently would fail the download after the
    # GPUs are billing, so preview must refuse it.
    small = plan([weights("w", 4000)], volumeHeadroom=0)
    assert small.ok and small.volume.size_gb == 4000
    huge = plan([weights("w", 5000)], volumeHeadroom=0)
    assert not huge.ok, "5000 GB of weights planned onto a 4096 GB volume without a problem"


def test_no_models_still_keeps_a_volume() -> None:
    fleet = plan([], models=[])
    assert fleet.volume.size_gb == 10
    assert fleet.usd_per_month_best == fleet.volume.usd_per_month > 0


@pytest.mark.parametrize(
    ("size", "usd_per_month"),
    [
        pytest.param(10, 0.70, id="10GB"),
        pytest.param(999, 69.93, id="999GB-at-0.07"),
        pytest.param(1000, 70.00, id="1000GB-all-at-0.07"),
        pytest.param(1001, 70.05, id="1001GB-the-last-GB-at-0.05"),
        pytest.param(4096, 224.80, id="4096GB-graduated"),
    ],
)
def test_volume_price_tiers(size: int, usd_per_month: float) -> None:
    facts = real_registry().network_volume
    assert VolumePlan(size, 0.0, "EU-RO-1", facts).usd_per_month == pytest.approx(usd_per_month)
    fleet = plan([], models=[], minVolumeGb=size)
    assert fleet.volume.usd_per_month == pytest.approx(usd_per_month)


# ---- cost and budget -------------------------------------------------------------------------


def test_fleet_month_is_730_hours_of_pods_plus_the_volume() -> None:
    fleet = plan([TEN_GB], maxFallbackPremium=1.5)
    assert HOURS_PER_MONTH == 730
    assert fleet.usd_per_month_best == pytest.approx(730 * 1.00 + fleet.volume.usd_per_month)
    assert fleet.usd_per_month_worst == pytest.approx(730 * 1.50 + fleet.volume.usd_per_month)


@pytest.mark.parametrize(
    ("budget", "within"),
    [
        pytest.param(1.50, True, id="worst-equals-budget"),
        pytest.param(1.49, False, id="worst-over-budget"),
    ],
)
def test_budget_is_checked_against_the_worst_case(budget: float, within: bool) -> None:
    fleet = plan([TEN_GB], maxFallbackPremium=1.5, budgetUsdPerHour=budget)
    assert fleet.within_budget is within
    assert ("over-budget" in rules(fleet)) is not within
    assert fleet.ok is within


def test_over_budget_names_the_numbers_and_the_fix() -> None:
    fleet = plan([TEN_GB], maxFallbackPremium=1.5, budgetUsdPerHour=1.2)
    [problem] = [p for p in fleet.problems if p.rule == "over-budget"]
    assert "$1.50" in problem.message and "$1.20" in problem.message
    assert "budgetUsdPerHour" in problem.fix
    assert fleet.budget_headroom_usd_per_hour == pytest.approx(-0.30)


# ---- stack-level problems --------------------------------------------------------------------


def test_an_unknown_data_centre_is_a_problem() -> None:
    fleet = plan([TEN_GB], dataCenter="MARS-1")
    [problem] = [p for p in fleet.problems if p.rule == "unknown-data-centre"]
    assert "MARS-1" in problem.message and "EU-RO-1" in problem.fix


def test_an_unknown_gpu_override_is_a_problem() -> None:
    fleet = plan([TEN_GB], overrides={"ten": {"gpu": "NVIDIA B200"}})
    [problem] = [p for p in fleet.problems if p.rule == "unknown-gpu"]
    assert "NVIDIA B200" in problem.message and "P-1.00" in problem.fix
    m = fleet.model("ten")
    assert m is not None and m.placement is None


def test_a_gpu_override_pins_every_candidate() -> None:
    m = plan([TEN_GB], maxFallbackPremium=2, overrides={"ten": {"gpu": "P-1.51"}}).model("ten")
    assert m is not None and [p.gpu.id for p in m.candidates] == ["P-1.51"]


def test_community_cloud_cannot_mount_the_volume() -> None:
    fleet = plan([TEN_GB], gpus=(gpu("C", secure=1.0, community=0.5),), cloud="COMMUNITY")
    assert "community-with-volume" in rules(fleet)


def test_secure_cloud_has_no_cloud_problem() -> None:
    assert plan([TEN_GB]).problems == ()


def test_model_problems_fail_the_plan() -> None:
    fleet = plan([TEN_GB], models=["ten", "ghost"])
    assert rules(fleet) == ["unknown-model"]
    assert not fleet.ok


def test_an_override_for_an_unarmed_model_is_warned_about() -> None:
    fleet = plan([TEN_GB], overrides={"ghost": {"context": 4096}})
    assert any("ghost" in w for w in fleet.warnings)


def test_overrides_reach_the_pod() -> None:
    m = plan([TEN_GB], overrides={"ten": {"context": 2048, "concurrency": 3}}).model("ten")
    assert m is not None and m.placement is not None
    assert flag(m.placement.pod.args, "--context-length") == "2048"
    assert flag(m.placement.pod.args, "--max-running-requests") == "3"


@pytest.mark.parametrize(
    ("env", "servable"),
    [pytest.param({}, False, id="no-token"), pytest.param({"HF_TOKEN": "x"}, True, id="token")],
)
def test_an_hf_token_in_the_environment_counts(env: dict[str, str], servable: bool) -> None:
    fleet = plan_fleet(
        real_registry(),
        settings(models=["stable-audio-open-1.0"]),
        stack="t",
        environment=Environment.from_env(env),
    )
    assert fleet.ok is servable


def test_plan_fleet_never_mutates_its_inputs() -> None:
    reg = real_registry()
    s = settings(
        models=["qwen3-8b", "kimi-k2.6", "ghost"],
        overrides={"kimi-k2.6": {"context": 8192}, "qwen3-8b": {"gpu": "NVIDIA H200"}},
    )
    env = Environment.from_env({"FRUTEBOX_EAGLE3_HEAD_QWEN3_CODER": "org/head"})
    before = (reg.model_dump(), s.model_dump(), dict(env.eagle3_heads))
    first = plan_fleet(reg, s, stack="t", environment=env)
    assert (reg.model_dump(), s.model_dump(), dict(env.eagle3_heads)) == before
    second = plan_fleet(reg, s, stack="t", environment=env)
    assert first == second


# ---- the RunPod pod body ---------------------------------------------------------------------


@cache
def create_pod_validator() -> Draft202012Validator:
    doc = json.loads(openapi_path().read_text())
    uri = "urn:runpod:openapi-v2"
    schemas = SchemaRegistry().with_resource(
        uri, Resource.from_contents(doc, default_specification=DRAFT202012)
    )
    schema = {"$ref": f"{uri}#/components/schemas/CreatePodRequest"}
    return Draft202012Validator(schema, registry=schemas)


def all_servable_plan() -> tuple[FleetPlan, Registry]:
    reg = real_registry()
    armed = [m.id for m in reg.models]
    fleet = plan_fleet(
        reg, settings(models=armed), stack="prod", environment=Environment(hf_token=True)
    )
    return fleet, reg


def test_the_validator_can_fail() -> None:
    validator = create_pod_validator()
    good = {"name": "x", "image": "a:b", "gpu": {"id": "NVIDIA H200", "count": 1}}
    assert not list(validator.iter_errors(good))
    assert list(validator.iter_errors({**good, "entrypoint": ["sh"]}))
    assert list(validator.iter_errors({k: v for k, v in good.items() if k != "name"}))
    assert list(validator.iter_errors({**good, "mounts": {"network": [{"volumeId": "v"}]}}))


def test_every_pod_body_is_a_valid_create_pod_request() -> None:
    fleet, _ = all_servable_plan()
    validator = create_pod_validator()
    bodies = 0
    for m in fleet.models:
        for p in m.candidates:
            body = pod_body(m, p, fleet.settings, stack="prod", volume_id="vol-123", owner=OWNER)
            errors = [e.message for e in validator.iter_errors(body)]
            assert not errors, (m.model_id, errors)
            assert body["mounts"] == {"network": [{"volumeId": "vol-123", "path": "/workspace"}]}
            assert body["dataCenterIds"] == ["EU-RO-1"]
            assert body["cloud"] == "SECURE"
            assert body["gpu"] == {
                "id": p.gpu.id, "count": p.count, "minCudaVersion": p.image.min_cuda_version
            }  # fmt: skip
            assert body["env"]["FRUTEBOX_OWNER"] == OWNER
            assert body["name"] == pod_name("prod", m.model_id)
            assert body["args"] == p.pod.args and body["image"] == p.pod.image
            assert body["ports"] == [f"{p.pod.port}/http"]
            bodies += 1
    assert bodies >= len([m for m in fleet.models if m.placement])


def test_pod_names_are_unique_per_stack_and_model() -> None:
    names = {pod_name(s, m) for s in ("dev", "prod") for m in ("qwen3-8b", "sdxl-1.0")}
    assert len(names) == 4


def test_pod_request_walks_candidates_cheapest_first() -> None:
    fleet, _ = all_servable_plan()
    for m in fleet.models:
        if m.placement is None:
            continue
        request = pod_request(m, fleet.settings, stack="prod", volume_id="vol-1", owner=OWNER)
        request = json.loads(request.to_json())
        costs = [c["gpu"]["count"] for c in request["candidates"]]
        assert len(costs) == 1 + len(m.fallbacks)
        prices = [p.usd_per_hour for p in m.candidates]
        assert prices == sorted(prices)
        for candidate in request["candidates"]:
            args = candidate["args"]
            if m.resolution.engine == "sglang":
                assert flag(args, "--tp-size") == str(candidate["gpu"]["count"])
            if m.resolution.engine == "vllm":
                assert flag(args, "--tensor-parallel-size") == str(candidate["gpu"]["count"])


@pytest.mark.parametrize(
    ("model_id", "pull", "token_env"),
    [
        pytest.param("qwen3-8b", "qwen3:8b", [], id="ollama-pull"),
        pytest.param("stable-audio-open-1.0", None, ["HF_TOKEN"], id="gated-token-env"),
        pytest.param("sdxl-1.0", None, [], id="open"),
    ],
)
def test_pod_request_carries_the_pull_and_the_token_env(
    model_id: str, pull: str | None, token_env: list[str]
) -> None:
    fleet, _ = all_servable_plan()
    m = fleet.model(model_id)
    assert m is not None
    request = pod_request(m, fleet.settings, stack="prod", volume_id="vol-1", owner=OWNER)
    assert request.ollamaPull == ([pull] if pull else [])
    assert request.hfTokenEnv == token_env
    assert request.health.path.startswith("/")


def test_health_deadlines_scale_with_the_weights_and_a_stack_key_overrides() -> None:
    fleet, _ = all_servable_plan()
    small, big = fleet.model("qwen3-8b"), fleet.model("qwen3-235b-a22b")
    assert small is not None and big is not None
    small_s, big_s = (health_deadline_s(m, fleet.settings) for m in (small, big))
    assert HEALTH_BASE_S < small_s < big_s
    weights_gb = big.resolution.serving.weights_disk_gb if big.resolution.serving else 0
    assert big_s == HEALTH_BASE_S + math.ceil((weights_gb or 0) * 1000 / 100)  # 100 MB/s
    fixed = fleet.settings.model_copy(update={"health_timeout_seconds": 1234})
    assert health_deadline_s(big, fixed) == 1234


def test_every_gpu_create_carries_its_images_cuda_floor() -> None:
    floors = {i.min_cuda_version for i in real_registry().images.values()}
    assert floors and all(re.fullmatch(r"\d+\.\d+", f) for f in floors)
    fleet, _ = all_servable_plan()
    for m in fleet.models:
        for p in m.candidates:
            body = pod_body(m, p, fleet.settings, stack="prod", volume_id="v", owner=OWNER)
            assert body["gpu"]["minCudaVersion"] == p.image.min_cuda_version


def test_serve_options_pick_each_models_own_eagle3_head_from_the_environment() -> None:
    from frutebox_infra.plan import Environment

    env = Environment.from_env({"FRUTEBOX_EAGLE3_HEAD_QWEN3_CODER": " org/head ", "HF_TOKEN": "x"})
    assert env.serve_options("qwen3-coder").eagle3_head == "org/head"
    assert env.serve_options("qwen3-8b").eagle3_head is None
    assert env.serve_options("qwen3-8b").hf_token_configured is True
    assert Environment().serve_options("m", hf_token=True).hf_token_configured is True
    off = Environment.from_env({"FRUTEBOX_SPEC_DECODE": "false"})
    assert off.serve_options("m").spec_decode_enabled is False


def test_a_bigger_volume_never_costs_less() -> None:
    facts = real_registry().network_volume
    prices = [facts.usd_per_month(size) for size in range(10, 4097)]
    assert all(a <= b for a, b in itertools.pairwise(prices))


def test_the_volume_keeps_its_current_size_and_is_priced_at_it() -> None:
    stack = settings(models=["qwen3-8b"])
    fleet = plan_fleet(real_registry(), stack, stack="t", current_volume_gb=995)
    assert fleet.volume.size_gb == 995 and fleet.volume.kept_larger
    assert fleet.volume.usd_per_month == pytest.approx(69.65)
    grown = plan_fleet(real_registry(), stack, stack="t", current_volume_gb=5)
    assert grown.volume.size_gb == 10  # 5.2 GB x 1.2 -> 7 GB, raised to RunPod's minimum
    assert not grown.volume.kept_larger


# ---- every override key is honoured by the engine, or refused with the reason ----------------


def only_problem(config: dict[str, Any]) -> PlanProblem:
    plan = plan_fleet(real_registry(), settings(**config), stack="t")
    assert len(plan.problems) == 1, plan.problems
    return plan.problems[0]


def test_a_context_above_the_model_s_is_refused_with_its_maximum() -> None:
    problem = only_problem(
        {"models": ["qwen-3.6-27b"], "overrides": {"qwen-3.6-27b": {"context": 1_000_000}}}
    )
    assert problem.rule == "override-refused"
    assert "32768" in problem.message and "overrides.qwen-3.6-27b.context" in problem.fix


def test_llamacpp_s_maximum_is_its_quant_s_context() -> None:
    problem = only_problem(
        {"models": ["kimi-k2.6"], "overrides": {"kimi-k2.6": {"context": 32768}}}
    )
    assert problem.rule == "override-refused" and "16384" in problem.fix


@pytest.mark.parametrize("model_id", ["qwen3-8b", "kimi-k2.6"])
def test_static_slot_engines_launch_enough_slots_for_the_sequence_floor(model_id: str) -> None:
    config = {"models": [model_id], "overrides": {model_id: {"minConcurrentSequences": 9}}}
    plan = plan_fleet(real_registry(), settings(**config), stack="t")
    model = plan.model(model_id)
    assert model is not None and model.resolution.serving is not None
    assert model.resolution.serving.concurrency == 9
    if model.placement is not None:
        assert model.placement.fit.configured_sequences == 9


@pytest.mark.parametrize("model_id", ["qwen3-8b", "kimi-k2.6"])
def test_static_slot_engines_refuse_a_floor_above_pinned_slots(model_id: str) -> None:
    problem = only_problem(
        {
            "models": [model_id],
            "overrides": {model_id: {"concurrency": 2, "minConcurrentSequences": 4}},
        }
    )
    assert problem.rule == "override-refused"
    assert "allocates exactly that many" in problem.message
    assert f"overrides.{model_id}.concurrency to 4" in problem.fix


@pytest.mark.parametrize("key", ["context", "concurrency", "minConcurrentSequences"])
def test_comfyui_refuses_token_overrides(key: str) -> None:
    problem = only_problem({"models": ["sdxl-1.0"], "overrides": {"sdxl-1.0": {key: 2}}})
    assert problem.rule == "override-refused"
    assert f"overrides.sdxl-1.0.{key}" in problem.message and "ComfyUI" in problem.message


def test_comfyui_honours_a_pinned_gpu() -> None:
    config = {"models": ["sdxl-1.0"], "overrides": {"sdxl-1.0": {"gpu": "NVIDIA RTX A5000"}}}
    model = plan_fleet(real_registry(), settings(**config), stack="t").model("sdxl-1.0")
    assert model is not None and model.placement is not None
    assert model.placement.gpu.id == "NVIDIA RTX A5000"


@pytest.mark.parametrize(("tier", "usd"), [("STANDARD", 0.07), ("HIGH_PERFORMANCE", 0.14)])
def test_the_volume_tier_is_explicit_and_priced(tier: str, usd: float) -> None:
    plan = plan_fleet(real_registry(), settings(models=["qwen3-8b"], volumeType=tier), stack="d")
    assert plan.volume.tier == tier
    assert plan.volume.usd_per_month == pytest.approx(plan.volume.size_gb * usd, abs=0.01)
    assert volume_request(plan).type == tier


@pytest.mark.parametrize(
    ("armed", "installs"),
    [
        pytest.param(["qwen3-8b"], 0, id="ollama-installs-nothing"),
        pytest.param(["sdxl-1.0"], 1, id="one-comfyui-model"),
        pytest.param(["sdxl-1.0", "ace-step-v1-3.5b"], 1, id="two-comfyui-models-one-install"),
    ],
)
def test_an_engine_installed_onto_the_volume_is_sized_once(armed: list[str], installs: int) -> None:
    real = real_registry()
    fleet = plan_fleet(real, settings(models=armed, budgetUsdPerHour=100), stack="test")
    comfy_gb = next(i for i in real.images.values() if i.volume_install_gb).volume_install_gb
    assert fleet.volume.engines_gb == pytest.approx(installs * comfy_gb)
    assert fleet.volume.size_gb >= math.ceil(fleet.volume.weights_gb + installs * comfy_gb)


# ---- every launch checked against its engine (launch_problems) ----------------------------------

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


def vllm_model(model_id: str, **fields: Any) -> Model:
    return sglang_model(model_id, vram_gb=10, runtimes=["vllm"], **fields)


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
    data = REAL_FACTS[Runtime.VLLM].model_dump()
    for f in data["flags"]:
        if "--kv-cache-dtype" in f["names"]:
            f["choices"] = [c for c in f["choices"] if c != "fp8"]
    facts = {**REAL_FACTS, Runtime.VLLM: EngineOptions.model_validate(data)}
    fleet = checked_plan([vllm_model("m")], (ampere, hopper), facts=facts)
    assert fleet.models[0].placement is not None and fleet.models[0].placement.gpu.id == "AMPERE"
    (problem,) = [p for p in fleet.problems if p.rule == "launch-rejected"]
    assert "1x HOPPER" in problem.message and "--kv-cache-dtype fp8" in problem.message
    alone = checked_plan([vllm_model("m")], (ampere,), facts=facts)
    assert "launch-rejected" not in rules(alone)


def test_a_shared_pods_launch_is_checked_with_all_its_members() -> None:
    images = dict(real_registry().images)
    ollama = images[Runtime.OLLAMA]
    images[Runtime.OLLAMA] = ollama.model_copy(update={"cache_env": {"OLLAMA_MODELZ": "/w"}})
    small = [ollama_model("aa", vram_gb=1.0), ollama_model("bb", vram_gb=1.5)]
    fleet = checked_plan(small, (P100,), images=images, colocate=True)
    assert fleet.pods[0].model_ids == ("bb", "aa")
    (problem,) = [p for p in fleet.problems if p.rule == "launch-rejected"]
    assert problem.message.startswith("bb, aa: ollama/ollama:0.35.1 would refuse")
    assert "OLLAMA_MODELZ" in problem.message and "OLLAMA_MODELS" in problem.message
    assert "launch-rejected" not in rules(checked_plan(small, (P100,), colocate=True))


def test_a_registry_without_engine_facts_plans_unchecked() -> None:
    # A registry at a git ref from before the facts existed: the diff still plans it.
    bad = vllm_model("bad", engine_args={"vllm": ["--tokenizer-mod", "mistral"]})
    fleet = checked_plan([bad], facts={})
    assert "launch-rejected" not in rules(fleet) and fleet.models[0].placement is not None


def test_facts_read_for_another_tag_are_a_warning_to_refresh() -> None:
    images = dict(real_registry().images)
    images[Runtime.VLLM] = images[Runtime.VLLM].model_copy(update={"tag": "v0.32.0-cu129"})
    fleet = checked_plan([vllm_model("m")], images=images)
    assert any(
        "read for vllm/vllm-openai:v0.31.0-cu129" in w
        and "v0.32.0-cu129" in w
        and "tools/engine-options" in w
        for w in fleet.warnings
    )
    assert not any("tools/engine-options" in w for w in checked_plan([vllm_model("m")]).warnings)
