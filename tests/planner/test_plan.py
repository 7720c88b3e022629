"""The planner: fallbacks, worst case, volume, cost, budget, stack-level problems, overrides."""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict
from typing import Any

import pytest

from frutebox_infra.catalog.schema import Model, Runtime
from frutebox_infra.planner.plan import FleetPlan, VolumePlan, plan_fleet
from frutebox_infra.planner.resolver import PlanProblem
from frutebox_infra.stack.environment import Environment
from tests.factories import (
    flag,
    gpu,
    model,
    real_registry,
    registry,
    rules,
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
    """A model of `disk_gb` weights whose engine installs nothing onto the volume."""
    return sglang_model(model_id, vram_gb=1, weights={"format": "bf16", "disk_gb": disk_gb,
                                                      "vram_gb": 1})  # fmt: skip


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
    assert VolumePlan(
        size_gb=size, weights_gb=0.0, data_center="EU-RO-1", facts=facts
    ).usd_per_month == pytest.approx(usd_per_month)
    fleet = plan([], models=[], minVolumeGb=size)
    assert fleet.volume.usd_per_month == pytest.approx(usd_per_month)


# ---- cost and budget -------------------------------------------------------------------------


def test_fleet_month_is_730_hours_of_pods_plus_the_volume() -> None:
    fleet = plan([TEN_GB], maxFallbackPremium=1.5)
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
    before = (asdict(reg), asdict(s), dict(env.eagle3_heads))
    first = plan_fleet(reg, s, stack="t", environment=env)
    assert (asdict(reg), asdict(s), dict(env.eagle3_heads)) == before
    second = plan_fleet(reg, s, stack="t", environment=env)
    assert first == second


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


@pytest.mark.parametrize(
    ("armed", "engines"),
    [
        pytest.param(["qwen-3.6-27b"], [], id="sglang-installs-nothing"),
        pytest.param(["qwen3-8b"], ["ollama"], id="ollama-keeps-its-release-archive"),
        pytest.param(["sdxl-1.0"], ["comfyui"], id="one-comfyui-model"),
        pytest.param(["sdxl-1.0", "ace-step-v1-3.5b"], ["comfyui"], id="two-comfyui-one-install"),
        pytest.param(["qwen3-8b", "llama-3.2-1b", "sdxl-1.0"], ["ollama", "comfyui"], id="dev"),
    ],
)  # fmt: skip
def test_an_engine_installed_onto_the_volume_is_sized_once(
    armed: list[str], engines: list[str]
) -> None:
    real = real_registry()
    fleet = plan_fleet(real, settings(models=armed, budgetUsdPerHour=100), stack="test",
                       environment=Environment(hf_token=True))  # fmt: skip
    installs = sum(real.images[Runtime(e)].volume_install_gb for e in engines)
    assert all(real.images[Runtime(e)].volume_install_gb > 0 for e in engines)
    assert fleet.volume.engines_gb == pytest.approx(installs)
    assert fleet.volume.size_gb >= math.ceil(fleet.volume.weights_gb + installs)


# ---- the stream-rate floor, ranking and pins --------------------------------------------------


def real(models: list[str], **config: Any) -> FleetPlan:
    return plan_fleet(real_registry(), settings(models=models, **config), stack="test",
                      environment=Environment(hf_token=True))  # fmt: skip


def taken(fleet: FleetPlan, model_id: str) -> list[str]:
    m = fleet.model(model_id)
    assert m is not None
    return [p.label for p in m.candidates]


KIMI = {"kimi-k2.6": {"context": 16384}}


def test_the_prod_stack_meets_the_default_floor_within_its_budget() -> None:
    from frutebox_infra.stack.stack_file import load_settings
    from tests.factories import ROOT

    prod = load_settings(ROOT / "stacks" / "Pulumi.prod.yaml")
    fleet = plan_fleet(real_registry(), prod, stack="prod", environment=Environment())
    assert fleet.ok and fleet.within_budget
    # 4x RTX PRO 6000 (18.5 tok/s per stream at 16) and 8x A100 (13.4 at 8) are refused.
    assert taken(fleet, "qwen3-235b-a22b") == ["2x H200 SXM"]
    assert taken(fleet, "kimi-k2.6") == ["5x H200 SXM", "8x H100 SXM"]
    assert taken(fleet, "qwen-3.6-27b") == ["1x RTX PRO 6000"]
    refused = {(m.model_id, b.placement.label) for m in fleet.models for b in m.below_floor}
    assert ("qwen3-235b-a22b", "4x RTX PRO 6000") in refused
    assert ("kimi-k2.6", "8x A100 PCIe") in refused


@pytest.mark.parametrize(
    ("config", "placements"),
    [
        pytest.param(
            {"minDecodeTokensPerSecond": "0"}, ["8x A100 PCIe", "8x A100 SXM"], id="no-floor"
        ),
        pytest.param(
            {"minDecodeTokensPerSecond": "13.3"},
            ["8x A100 PCIe", "8x A100 SXM"],
            id="just-under-13.4",
        ),
        pytest.param({"minDecodeTokensPerSecond": "13.5"}, ["8x A100 SXM"], id="just-over-13.4"),
        pytest.param({}, ["5x H200 SXM", "8x H100 SXM"], id="default-20"),
        pytest.param(
            {"overrides": {"kimi-k2.6": {"context": 16384, "minDecodeTokensPerSecond": 13}}},
            ["8x A100 PCIe", "8x A100 SXM"],
            id="model-override-wins",
        ),
        pytest.param(
            {"overrides": {"kimi-k2.6": {"context": 16384, "concurrency": 4}}},
            ["8x A100 PCIe", "8x A100 SXM"],
            id="fewer-streams-meet-it",
        ),
    ],
)
def test_placements_and_fallbacks_below_the_floor_are_refused(
    config: dict[str, Any], placements: list[str]
) -> None:
    config.setdefault("overrides", KIMI)
    fleet = real(["kimi-k2.6"], **config)
    assert fleet.ok, fleet.problems
    assert taken(fleet, "kimi-k2.6") == placements


def test_no_placement_meeting_the_floor_fails_the_plan_with_the_figures_and_the_fixes() -> None:
    fleet = real(["kimi-k2.6"], minDecodeTokensPerSecond="50", overrides=KIMI)
    assert rules(fleet) == ["below-speed-floor"]
    (problem,) = fleet.problems
    assert "kimi-k2.6: no placement decodes 50 tok/s per stream" in problem.message
    assert "8x A100 PCIe: 13.4 tok/s per stream at 8 streams < 50" in problem.message
    assert "frutebox-infra:minDecodeTokensPerSecond" in problem.fix
    assert "overrides.kimi-k2.6.gpu" in problem.fix
    m = fleet.model("kimi-k2.6")
    assert m is not None and m.placement is None and m.below_floor


def test_the_fix_offers_the_streams_that_meet_the_floor() -> None:
    fleet = real(["kimi-k2.6"], minDecodeTokensPerSecond="20", overrides={
        "kimi-k2.6": {"context": 16384, "gpu": "NVIDIA A100 80GB PCIe"}})  # fmt: skip
    (problem,) = fleet.problems
    assert "lower frutebox-infra:overrides.kimi-k2.6.concurrency to 4" in problem.fix
    assert "8x A100 PCIe then decodes 22.9 tok/s per stream" in problem.fix


def test_a_model_without_an_estimate_is_warned_about_not_refused() -> None:
    fleet = real(["mistral-large-3"])
    assert fleet.ok
    (warning,) = [w for w in fleet.warnings if "speed estimate" in w]
    assert warning.startswith("mistral-large-3: no speed estimate for 8x H200 SXM")
    assert "hidden_size" in warning and "floor of 20 tok/s per stream is not checked" in warning


def test_a_diffusion_model_has_no_floor() -> None:
    fleet = real(["sdxl-1.0"], minDecodeTokensPerSecond="1000")
    assert fleet.ok and taken(fleet, "sdxl-1.0")[0] == "1x RTX A4000"
    m = fleet.model("sdxl-1.0")
    assert m is not None and m.min_decode_tok_s == 0 and m.below_floor == ()


@pytest.mark.parametrize(
    ("rank_by", "chosen"),
    [
        pytest.param("usdPerHour", "1x RTX PRO 6000", id="per-hour"),  # $2.09/h, $1.48 per 1M
        pytest.param("usdPerMillionTokens", "1x H200 SXM", id="per-token"),  # $4.59/h, $1.39
    ],
)
def test_rank_by_orders_the_placements(rank_by: str, chosen: str) -> None:
    fleet = real(["qwen-3.6-27b"], rankBy=rank_by, maxFallbackPremium="1.2")
    assert taken(fleet, "qwen-3.6-27b")[0] == chosen


RTX_PRO = "NVIDIA RTX PRO 6000 Blackwell Server Edition"


@pytest.mark.parametrize(
    ("override", "placements", "problem"),
    [
        # qwen-3.6-27b on RTX PRO 6000: 24.6 tok/s per stream on one, 31.7 on two (TP 2).
        pytest.param({"gpu": RTX_PRO}, ["2x RTX PRO 6000"], None, id="more-gpus-meet-it"),
        pytest.param(
            {"gpu": RTX_PRO, "gpuCount": 1},
            [],
            "below-speed-floor",
            id="a-pinned-count-does-not-grow",
        ),
        pytest.param(
            {"gpu": RTX_PRO, "gpuCount": 4}, ["4x RTX PRO 6000"], None, id="a-pinned-count-is-taken"
        ),
    ],
)
def test_more_gpus_of_a_type_are_taken_where_fewer_are_too_slow(
    override: dict[str, Any], placements: list[str], problem: str | None
) -> None:
    fleet = real(["qwen-3.6-27b"], minDecodeTokensPerSecond="30",
                 overrides={"qwen-3.6-27b": override})  # fmt: skip
    assert rules(fleet) == ([problem] if problem else [])
    assert taken(fleet, "qwen-3.6-27b") == placements


@pytest.mark.parametrize(
    ("override", "rule", "says"),
    [
        pytest.param(
            {"engine": "vllm"},
            "override-refused",
            "not among the runtimes registry/models.yaml gives it (sglang, llamacpp)",
            id="an-engine-it-does-not-declare",
        ),
        pytest.param({"gpuCount": 3}, "no-placement", "at 3 GPUs", id="a-count-tp-cannot-take"),
        pytest.param({"gpuCount": 1}, "no-placement", "at 1 GPUs", id="a-count-too-small"),
    ],
)
def test_a_pin_that_cannot_be_served_is_refused_with_the_reason(
    override: dict[str, Any], rule: str, says: str
) -> None:
    fleet = real(["qwen3-235b-a22b"], overrides={"qwen3-235b-a22b": override})
    (problem,) = fleet.problems
    assert problem.rule == rule and says in problem.message
    assert "overrides.qwen3-235b-a22b" in problem.fix


def test_a_pinned_engine_serves_the_model() -> None:
    pinned = {"qwen3-235b-a22b": {"engine": "llamacpp", "context": 16384}}
    fleet = real(["qwen3-235b-a22b"], minDecodeTokensPerSecond="0", overrides=pinned)
    m = fleet.model("qwen3-235b-a22b")
    assert fleet.ok and m is not None and m.placement is not None
    assert m.resolution.engine == "llamacpp" and "--parallel" in m.placement.pod.args


@pytest.mark.parametrize(
    ("lengths", "rule"),
    [
        pytest.param({"promptTokens": 30_000, "outputTokens": 2768}, None, id="fits-the-context"),
        pytest.param(
            {"promptTokens": 30_000, "outputTokens": 2769},
            "workload-too-long",
            id="one-token-too-long",
        ),
    ],
)
def test_stated_lengths_must_fit_the_context(lengths: dict[str, int], rule: str | None) -> None:
    fleet = real(["qwen-3.6-27b"], **lengths)
    assert rules(fleet) == ([rule] if rule else [])
    if rule:
        assert "30000 + outputTokens 2769 is longer than the 32768 tokens" in str(fleet.problems)


def test_a_pods_notes_are_warnings_of_the_placement_taken() -> None:
    pinned = model(
        "pinned-gguf",
        runtimes=["llamacpp"],
        source={"gguf": {"repo": "org/m-GGUF", "quant": "Q4_K_M", "revision": "b" * 40,
                         "vram_gb": 5, "context": 4096}},
    )  # fmt: skip
    fleet = plan([pinned])
    chosen = fleet.model("pinned-gguf").placement
    assert chosen is not None and chosen.pod.notes
    assert [w for w in fleet.warnings if "b" * 40 in w] == [
        f"pinned-gguf: {note}" for note in chosen.pod.notes
    ]


@pytest.mark.parametrize(
    ("env", "coder_head"),
    [
        pytest.param({}, None, id="no-head-one-set-of-options"),
        pytest.param({"FRUTEBOX_EAGLE3_HEAD_QWEN3_CODER": "org/head"}, "org/head", id="a-head"),
    ],
)
def test_each_model_is_served_with_its_own_override_and_head_the_rest_with_the_stacks(
    env: dict[str, str], coder_head: str | None
) -> None:
    s = settings(
        models=["qwen3-coder", "qwen3-8b", "llama-3.2-1b", "kimi-k2.6"],
        overrides={"kimi-k2.6": {"context": 8192}},
        hfToken={"secure": "configured"},
    )
    fleet = plan_fleet(real_registry(), s, stack="t", environment=Environment.from_env(env))
    options = {}
    for m in fleet.models:
        assert m.resolution.ranking is not None, m.model_id
        options[m.model_id] = m.resolution.ranking.options
    assert options["qwen3-coder"].eagle3_head == coder_head
    coder = fleet.model("qwen3-coder")
    assert coder is not None and coder.resolution.serving is not None
    assert ("org/head" in coder.resolution.serving.spec_flags) is (coder_head is not None)
    assert options["kimi-k2.6"].context_tokens == 8192
    assert options["qwen3-8b"] == options["llama-3.2-1b"]
    assert options["qwen3-8b"].context_tokens is None and options["qwen3-8b"].hf_token_configured
