"""Co-location: cheapest grouping (checked against brute force), never overfilled, stable."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from frutebox_infra.catalog.schema import Model, Registry
from frutebox_infra.estimates.fit import estimate
from frutebox_infra.estimates.speed import SpeedEstimate
from frutebox_infra.planner import colocate
from frutebox_infra.planner.colocate import all_partitions, group_placements, members_of, shares
from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.planner.ranking import fit_request
from frutebox_infra.recipes.base import ServeOptions
from frutebox_infra.stack.environment import Environment
from tests.factories import gpu, gqa, ollama_model, real_registry, registry, settings

SMALL = gpu("SMALL 16", vram_gb=16, secure=0.17, fp8=False)
MEDIUM = gpu("MEDIUM 24", vram_gb=24, secure=0.26, fp8=False)
LARGE = gpu("LARGE 48", vram_gb=48, secure=0.44, fp8=False)
GPUS = (SMALL, MEDIUM, LARGE)


def small_ollama(model_id: str, vram_gb: float, layers: int = 16, **fields: object) -> Model:
    return ollama_model(model_id, vram_gb=vram_gb, architecture=gqa(layers, 32, 8, 64), **fields)


def plan(reg: Registry, models: Sequence[str], **config: object) -> FleetPlan:
    stack = settings(models=list(models), colocate=True, **config)
    return plan_fleet(reg, stack, stack="test")


def grouping(fleet: FleetPlan) -> set[frozenset[str]]:
    return {frozenset(p.model_ids) for p in fleet.pods}


def brute_force(
    reg: Registry, model_ids: Sequence[str], *, worst_first: bool = False, **config: object
) -> tuple[int, int, int]:
    """The least (best cents, worst cents, shared models) over every partition that fits
    (compared worst cents first with `worst_first`)."""
    stack = settings(models=list(model_ids), colocate=True, **config)
    alone = plan_fleet(reg, settings(models=list(model_ids), **config), stack="test")
    members = {
        m.model_id: m
        for m in members_of(((p.model_id, p.candidates, True) for p in alone.models), stack)
    }
    best: tuple[int, int, int] | None = None
    for part in all_partitions(list(model_ids)):
        total = (0, 0, 0)
        for group in part:
            if len(group) == 1:
                prices = [p.usd_per_hour for p in members[group[0]].alone]
                cost = (round(prices[0] * 100), round(max(prices) * 100), 0)
            else:
                found = group_placements(reg, stack, [members[g] for g in group])
                if not found:
                    break
                worst = max(p.usd_per_hour for p in found)
                cost = (round(found[0].usd_per_hour * 100), round(worst * 100), len(group))
            total = (total[0] + cost[0], total[1] + cost[1], total[2] + cost[2])
        else:
            key = (total[1], total[0], total[2]) if worst_first else total
            if best is None or key < ((best[1], best[0], best[2]) if worst_first else best):
                best = total
    assert best is not None
    return best


def chosen_cost(fleet: FleetPlan) -> tuple[int, int, int]:
    return (
        sum(round(p.usd_per_hour_best * 100) for p in fleet.pods),
        sum(round(p.usd_per_hour_worst * 100) for p in fleet.pods),
        sum(len(p.model_ids) for p in fleet.pods if p.shared),
    )


def random_fleet(seed: int, size: int) -> tuple[Registry, list[str]]:
    rng = random.Random(seed)
    models = [
        small_ollama(f"m{i}", round(rng.uniform(0.5, 9.0), 1), layers=rng.choice((16, 24, 32)))
        for i in range(size)
    ]
    return registry(models, GPUS), [m.id for m in models]


@pytest.mark.parametrize("seed", range(12))
def test_grouping_is_as_cheap_as_brute_force(seed: int) -> None:
    reg, ids = random_fleet(seed, 2 + seed % 5)
    fleet = plan(reg, ids)
    assert fleet.ok, fleet.problems
    assert chosen_cost(fleet) == brute_force(reg, ids)


@pytest.mark.parametrize("seed", range(12))
def test_over_budget_the_grouping_with_the_least_worst_case_is_taken(seed: int) -> None:
    reg, ids = random_fleet(seed, 2 + seed % 5)
    wide = {"maxFallbackPremium": 2}
    cheapest = brute_force(reg, ids, **wide)
    least_worst = brute_force(reg, ids, worst_first=True, **wide)
    # A budget at the least worst case any grouping has: only such a grouping passes.
    fleet = plan(reg, ids, budgetUsdPerHour=least_worst[1] / 100, **wide)
    assert fleet.within_budget, fleet.problems
    expected = cheapest if cheapest[1] <= least_worst[1] else least_worst
    assert chosen_cost(fleet) == expected


@pytest.mark.parametrize("seed", range(12))
def test_no_shared_pod_is_overfilled(seed: int) -> None:
    reg, ids = random_fleet(seed, 6)
    stack = settings(models=ids, colocate=True)
    fleet = plan_fleet(reg, stack, stack="test")
    for pod in fleet.pods:
        chosen = pod.placement
        needed = 0.0
        for mid in pod.model_ids:
            found = reg.model(mid)
            assert found is not None
            m = fleet.model(mid)
            assert m is not None and m.placement is not None
            request = fit_request(
                found, m.placement.recipe, m.placement.serving, ServeOptions(), chosen.gpu
            )
            fit = estimate(request, chosen.gpu, chosen.count)
            assert fit.fits
            needed += fit.needed_gb
        assert needed <= chosen.available_gb + 0.01


def test_two_that_fit_alone_but_not_together_move_to_a_larger_card() -> None:
    # 7.5 + 7.5 GB of weights plus their KV exceed a 16 GB card, and fit a 24 GB one: $0.26 < $0.34.
    reg = registry([small_ollama("a", 7.5), small_ollama("b", 7.5)], GPUS)
    fleet = plan(reg, ["a", "b"])
    (pod,) = fleet.pods
    assert pod.placement.gpu.id == MEDIUM.id
    assert pod.placement.needed_gb > SMALL.vram_gb
    assert pod.saving_usd_per_hour == pytest.approx(0.08)
    assert fleet.usd_per_hour_best == pytest.approx(0.26)


def test_a_model_stays_alone_when_sharing_is_not_cheaper() -> None:
    # Together they need the 48 GB card ($0.44), apart two 24 GB ones ($0.52)... unless the
    # large card costs more than both: then each keeps its own pod.
    dear = gpu("LARGE 48", vram_gb=48, secure=0.60, fp8=False)
    reg = registry([small_ollama("a", 12.0), small_ollama("b", 12.0)], (SMALL, MEDIUM, dear))
    fleet = plan(reg, ["a", "b"])
    assert grouping(fleet) == {frozenset({"a"}), frozenset({"b"})}
    assert fleet.colocation_saving_usd_per_hour == 0


def test_equal_cost_keeps_models_apart() -> None:
    # Same price either way (a card twice the price): no reason to share a failure domain.
    double = gpu("DOUBLE 32", vram_gb=32, secure=0.34, fp8=False)
    reg = registry([small_ollama("a", 7.5), small_ollama("b", 7.5)], (SMALL, double))
    fleet = plan(reg, ["a", "b"])
    assert len(fleet.pods) == 2


def test_grouping_is_stable_and_ignores_arming_order() -> None:
    reg, ids = random_fleet(7, 7)
    first = plan(reg, ids)
    assert grouping(first) == grouping(plan(reg, ids))
    assert grouping(first) == grouping(plan(reg, list(reversed(ids))))
    assert [p.model_ids for p in first.pods] == [p.model_ids for p in plan(reg, ids).pods]


def test_off_by_default_one_pod_per_model() -> None:
    reg, ids = random_fleet(3, 4)
    fleet = plan_fleet(reg, settings(models=ids), stack="test")
    assert [p.model_ids for p in fleet.pods] == [(i,) for i in ids]


def test_a_pod_of_one_model_has_that_model_s_placements_as_its_own() -> None:
    # Its placements are made from the model's when asked: the same GPU, count, price and
    # fit, rounded as a shared pod's are, and its $/h read from them.
    reg, ids = random_fleet(3, 4)
    fleet = plan_fleet(reg, settings(models=ids, maxFallbackPremium=3.0), stack="test")
    assert any(len(m.candidates) > 1 for m in fleet.models)
    for m in fleet.models:
        pod = fleet.pod_of(m.model_id)
        assert pod is not None and not pod.shared
        assert [(g.gpu, g.count, g.usd_per_hour, g.member_fits) for g in pod.placements] == [
            (p.gpu, p.count, p.usd_per_hour, (p.fit,)) for p in m.candidates
        ]
        assert [(g.needed_gb, g.available_gb) for g in pod.placements] == [
            (round(p.fit.needed_gb, 2), round(p.fit.available_gb, 2)) for p in m.candidates
        ]
        assert pod.placement is pod.placements[0]
        assert (pod.usd_per_hour_best, pod.usd_per_hour_worst) == (
            m.usd_per_hour_best,
            m.usd_per_hour_worst,
        )


@pytest.mark.parametrize(
    "override",
    [{"ownPod": True}, {"gpu": "MEDIUM 24"}, {"gpuCount": 1}],
    ids=["own-pod", "pinned-gpu", "pinned-count"],
)
def test_an_override_keeps_a_model_on_its_own_pod(override: dict[str, object]) -> None:
    reg = registry([small_ollama("a", 1.0), small_ollama("b", 1.0), small_ollama("c", 1.0)], GPUS)
    fleet = plan(reg, ["a", "b", "c"], overrides={"b": override})
    assert frozenset({"b"}) in grouping(fleet)
    assert frozenset({"a", "c"}) in grouping(fleet)


def test_server_wide_settings_must_agree_to_share() -> None:
    # OLLAMA_CONTEXT_LENGTH and OLLAMA_NUM_PARALLEL are one value per server.
    reg = registry([small_ollama("a", 1.0), small_ollama("b", 1.0)], GPUS)
    assert len(plan(reg, ["a", "b"]).pods) == 1
    assert len(plan(reg, ["a", "b"], overrides={"b": {"context": 2048}}).pods) == 2
    assert len(plan(reg, ["a", "b"], overrides={"b": {"concurrency": 2}}).pods) == 2


def test_anchor_is_the_largest_member_and_names_the_pod() -> None:
    reg = registry([small_ollama("a", 1.0), small_ollama("z", 3.0)], GPUS)
    (pod,) = plan(reg, ["a", "z"]).pods
    assert pod.model_ids == ("z", "a")


def test_members_pay_shares_that_add_up_to_the_pod() -> None:
    reg, ids = random_fleet(5, 6)
    fleet = plan(reg, ids)
    assert any(p.shared for p in fleet.pods)
    for pod in fleet.pods:
        members = [fleet.model(i) for i in pod.model_ids]
        best = sum(m.usd_per_hour_best for m in members if m is not None)
        assert best == pytest.approx(pod.usd_per_hour_best)
    assert fleet.usd_per_hour_best == pytest.approx(
        round(sum(p.usd_per_hour_best for p in fleet.pods), 2)
    )


def test_comfyui_members_take_turns_so_the_largest_decides() -> None:
    # sdxl (10 GB) and stable audio (6 GB) add to 16 GB, over a 16 GB card's 15.99 GB; ComfyUI
    # swaps checkpoints, so the pair shares one 16 GB card.
    stack = settings(models=["sdxl-1.0", "stable-audio-open-1.5"], colocate=True)
    fleet = plan_fleet(real_registry(), stack, stack="test", environment=Environment(hf_token=True))
    (pod,) = fleet.pods
    assert pod.placement.gpu.vram_gb == 16
    assert pod.placement.needed_gb == pytest.approx(10.0)


def test_engines_never_mix() -> None:
    stack = settings(models=["qwen3-8b", "llama-3.2-1b", "sdxl-1.0"], colocate=True)
    fleet = plan_fleet(real_registry(), stack, stack="dev")
    assert grouping(fleet) == {frozenset({"qwen3-8b", "llama-3.2-1b"}), frozenset({"sdxl-1.0"})}
    assert fleet.colocation_saving_usd_per_hour > 0


def test_beyond_the_exact_bound_the_heuristic_never_costs_more_than_alone() -> None:
    reg, ids = random_fleet(11, colocate.EXACT_LIMIT + 4)
    fleet = plan(reg, ids)
    alone = plan_fleet(reg, settings(models=ids), stack="test")
    assert fleet.ok
    assert fleet.usd_per_hour_best < alone.usd_per_hour_best
    assert sorted(i for p in fleet.pods for i in p.model_ids) == sorted(ids)


@pytest.mark.parametrize(
    ("total", "weights", "expected"),
    [
        pytest.param(0.26, [3.0, 1.0], (0.2, 0.06), id="proportional"),
        pytest.param(0.10, [1.0, 1.0, 1.0], (0.04, 0.03, 0.03), id="remainder-to-first"),
        pytest.param(0.17, [0.0, 0.0], (0.09, 0.08), id="no-weights-equal"),
    ],
)
def test_shares_add_up_in_cents(
    total: float, weights: list[float], expected: tuple[float, ...]
) -> None:
    assert shares(total, weights) == expected
    assert round(sum(shares(total, weights)), 2) == total


@pytest.mark.parametrize(
    ("floor", "two_a4000"),
    [
        # qwen3-8b on 2x RTX A4000 (a layer split) decodes 22.6 tok/s per stream at 4 streams.
        pytest.param("22.5", True, id="just-under-its-speed"),
        pytest.param("22.7", False, id="just-over-its-speed"),
    ],
)
def test_a_shared_pod_s_gpus_meet_every_member_s_floor(floor: str, two_a4000: bool) -> None:
    fleet = plan_fleet(
        real_registry(),
        settings(models=["qwen3-8b", "llama-3.2-1b"], colocate=True, maxFallbackPremium="2",
                 minDecodeTokensPerSecond=floor),
        stack="t",
    )
    (pod,) = fleet.pods
    assert pod.shared
    assert ("2x RTX A4000" in [p.label for p in pod.placements]) is two_a4000
    for mid in pod.model_ids:
        m = fleet.model(mid)
        assert m is not None
        for view in m.candidates:
            speed = view.speed
            assert isinstance(speed, SpeedEstimate)
            assert speed.decode_tok_s_per_stream >= float(floor)
