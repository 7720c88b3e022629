"""The count search: the smallest fitting count per GPU type, ranked cheapest first."""

from __future__ import annotations

import pytest

from frutebox_infra.catalog.schema import Cloud
from frutebox_infra.estimates.fit import estimate
from frutebox_infra.planner.ranking import Ranking, fit_request, gpu_price, image_gpu_problem, rank
from frutebox_infra.planner.resolver import resolve
from frutebox_infra.recipes.base import ServeOptions
from tests.factories import real_registry

TOKEN = ServeOptions(hf_token_configured=True)
SERVABLE = [m.id for m in real_registry().models if resolve(real_registry(), m.id, TOKEN).servable]


def ranking_of(model_id: str, cloud: Cloud = Cloud.SECURE) -> Ranking:
    r = resolve(real_registry(), model_id, TOKEN, cloud=cloud)
    assert r.ranking is not None
    return r.ranking


def brute_force(model_id: str, cloud: Cloud = Cloud.SECURE) -> list[tuple[str, int, float]]:
    """Every GPU type's smallest count that fits, estimating every count in full."""
    reg = real_registry()
    r = resolve(reg, model_id, TOKEN, cloud=cloud)
    assert r.model and r.recipe and r.image and r.serving
    found = []
    for gpu in reg.gpus:
        price = gpu_price(gpu, cloud)
        if price is None or (r.serving.require_fp8 and not gpu.fp8):
            continue
        if image_gpu_problem(r.image, gpu) is not None:
            continue
        request = fit_request(r.model, r.recipe, r.serving, TOKEN, gpu)
        for count in range(1, min(gpu.max_count, reg.max_gpus_per_pod) + 1):
            allowed = r.recipe.count_problem(r.model, count) is None
            if allowed and estimate(request, gpu, count).fits:
                found.append((gpu.id, count, round(price * count, 2)))
                break
    vram = {g.id: g.vram_gb for g in reg.gpus}
    return sorted(found, key=lambda f: (f[2], vram[f[0]] * f[1]))


def test_the_catalog_has_models_to_rank() -> None:
    assert len(SERVABLE) >= 10


@pytest.mark.parametrize("cloud", [Cloud.SECURE, Cloud.COMMUNITY])
@pytest.mark.parametrize("model_id", SERVABLE)
def test_the_search_finds_what_estimating_every_count_finds(model_id: str, cloud: Cloud) -> None:
    ranking = ranking_of(model_id, cloud=cloud)
    gpus = real_registry().gpus
    found = [(gpus[r.position].id, r.count, r.usd_per_hour) for r in ranking.ranked]
    assert found == brute_force(model_id, cloud)


def test_placements_are_the_ranked_gpu_types_counts_and_prices_in_order() -> None:
    ranking = rank_fresh("qwen3-8b")
    gpus = real_registry().gpus
    every = ranking.placements()
    assert len(every) == len(ranking.ranked) > 2
    assert [(p.gpu, p.count, p.usd_per_hour) for p in every] == [
        (gpus[r.position], r.count, r.usd_per_hour) for r in ranking.ranked
    ]
    assert ranking.placements(1) == every[:1] and all(p.fit.fits for p in every)


@pytest.mark.parametrize(
    ("premium", "kept"),
    [pytest.param(1.0, "cheapest-price-only", id="1.0"), pytest.param(100.0, "all", id="100")],
)
def test_within_a_premium_is_the_cheapest_and_those_close_to_it(premium: float, kept: str) -> None:
    ranking = rank_fresh("qwen3-8b")
    chosen = ranking.within(premium)
    cheapest = ranking.ranked[0].usd_per_hour
    expected = [r for r in ranking.ranked if r.usd_per_hour <= cheapest * premium + 1e-9]
    assert [p.usd_per_hour for p in chosen] == [r.usd_per_hour for r in expected]
    if kept == "all":
        assert len(chosen) == len(ranking.ranked)
    else:
        assert {p.usd_per_hour for p in chosen} == {cheapest}


def test_a_refused_gpu_type_shows_its_largest_count_estimated() -> None:
    refused = ranking_of("kimi-k2.6").refused
    assert refused, "kimi-k2.6 fits no small card"
    for c in refused:
        assert c.fit is not None and not c.fit.fits and c.count == c.gpu.max_count
        assert c.rejected == c.fit.reason


def test_a_gpu_type_refused_before_any_fit_says_why() -> None:
    refused = {c.gpu.id: c for c in ranking_of("qwen3-235b-a22b").refused}
    non_fp8 = [g.id for g in real_registry().gpus if not g.fp8]
    assert non_fp8 and all(refused[g].rejected == "FP8 checkpoint needs a native-FP8 GPU"
                           for g in non_fp8)  # fmt: skip
    assert all(refused[g].fit is None and refused[g].count is None for g in non_fp8)


def test_rankings_are_equal_when_they_rank_the_same() -> None:
    assert rank_fresh("qwen3-8b") == rank_fresh("qwen3-8b")
    assert rank_fresh("qwen3-8b") != rank_fresh("kimi-k2.6")


def rank_fresh(model_id: str) -> Ranking:
    """The model's ranking on the real registry, made by `rank` itself."""
    reg = real_registry()
    r = resolve(reg, model_id, TOKEN)
    assert r.model and r.recipe and r.image and r.serving
    return rank(reg, r.model, r.recipe, r.image, r.serving, TOKEN, Cloud.SECURE, None)


@pytest.mark.parametrize(
    ("start", "larger"),
    [
        pytest.param(1, 2, id="one-to-two"),
        pytest.param(2, 4, id="tp-skips-three"),
        pytest.param(8, None, id="none-above-the-most-per-pod"),
    ],
)
def test_the_next_larger_count_of_a_gpu_type(start: int, larger: int | None) -> None:
    reg = real_registry()
    ranking = resolve(reg, "qwen-3.6-27b", gpu_id="NVIDIA H100 80GB HBM3").ranking
    assert ranking is not None
    (ranked,) = ranking.ranked
    while ranked.count < start:
        bigger = ranking.larger(ranked)
        assert bigger is not None
        ranked = bigger
    found = ranking.larger(ranked)
    assert (found.count if found else None) == larger
    if found is not None:
        p = ranking.option(found)
        assert p.gpu.id == "NVIDIA H100 80GB HBM3"
        assert p.usd_per_hour == round(found.count * 3.49, 2)
        assert p.fit.fits and p.speeds.facts is reg.speed
