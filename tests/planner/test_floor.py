"""The stream-rate floor: placements below it are refused with their figures, fallbacks obey it,
more GPUs are tried where they speed a stream, and ranking by $ per 1M output tokens."""

from __future__ import annotations

from typing import Any

import pytest

from frutebox_infra.catalog.schema import Gpu, Model, Registry
from frutebox_infra.estimates.speed import SpeedEstimate
from frutebox_infra.planner.floor import (
    SpeedChoice,
    choose,
    floor_key,
    floor_of,
    floor_problem,
    streams_meeting,
)
from frutebox_infra.planner.ranking import PlacementOption, Ranking
from frutebox_infra.planner.resolver import resolve
from frutebox_infra.recipes.base import ServeOptions
from frutebox_infra.stack.settings import RankBy
from tests.factories import gpu, model, real_registry, registry, settings, speedy_gpu

ARCH: dict[str, Any] = {
    "attention": "gqa",
    "layers": 32,
    "attention_heads": 32,
    "kv_heads": 8,
    "head_dim": 128,
    "hidden_size": 4096,
    "source": "test",
}
PARAMS = {"total_billions": 8, "source": "test"}


def dense(engine: str = "sglang") -> Model:
    """An 8B BF16 model SGLang serves (16 streams), or llama.cpp serves from a GGUF (8 slots)."""
    source: dict[str, Any] = {"hf_repo": "org/dense-8b", "revision": "0" * 40}
    if engine == "llamacpp":
        source = {"gguf": {"repo": "org/dense-8b-GGUF", "quant": "Q8_0", "vram_gb": 8.5}}
    return model(
        "dense-8b",
        runtimes=[engine],
        source=source,
        weights={"format": "bf16", "disk_gb": 16, "vram_gb": 16},
        context=8192,
        architecture=ARCH,
        parameters=PARAMS,
    )


SLOW = speedy_gpu("SLOW", 300, usd=0.40, link="pcie")
MID = speedy_gpu("MID", 900, usd=1.00)
FAST = speedy_gpu("FAST", 3000, usd=3.00)


def reg(*gpus: Gpu, engine: str = "sglang") -> Registry:
    return registry([dense(engine)], gpus or (SLOW, MID, FAST), speed=real_registry().speed)


OPTIONS = ServeOptions(hf_token_configured=True)


def ranking(r: Registry) -> Ranking:
    found = resolve(r, "dense-8b", OPTIONS).ranking
    assert found is not None
    return found


def ranked(r: Registry) -> tuple[PlacementOption, ...]:
    return ranking(r).placements()


def pick(
    r: Registry, floor: float, *, rank_by: RankBy = "usdPerHour", premium: float = 10.0
) -> SpeedChoice:
    return choose(ranking(r), floor=floor, rank_by=rank_by, premium=premium)


def tok_s(p: PlacementOption) -> float:
    speed = p.speed
    assert isinstance(speed, SpeedEstimate), speed
    return speed.decode_tok_s_per_stream


def on(r: Registry, gpu_id: str, count: int = 1) -> PlacementOption:
    found = ranking(r)
    at = next(x for x in found.ranked if r.gpus[x.position].id == gpu_id)
    while at.count < count:
        larger = found.larger(at)
        assert larger is not None
        at = larger
    return found.option(at)


def labels(placements: tuple[PlacementOption, ...]) -> list[str]:
    return [p.label for p in placements]


def test_the_test_gpus_differ_as_their_bandwidth_says() -> None:
    r = reg()
    assert tok_s(on(r, "SLOW")) < tok_s(on(r, "MID")) < tok_s(on(r, "FAST"))
    assert tok_s(on(r, "SLOW")) < tok_s(on(r, "SLOW", 2)) < tok_s(on(r, "MID"))


@pytest.mark.parametrize(
    ("margin", "chosen", "refused"),
    [
        pytest.param(-0.01, "1x SLOW", [], id="just-under-its-speed-takes-it"),
        pytest.param(0.0, "1x SLOW", [], id="exactly-its-speed-takes-it"),
        pytest.param(+0.01, "2x SLOW", ["1x SLOW"], id="just-over-its-speed-refuses-it"),
    ],
)
def test_a_floor_refuses_a_placement_below_it(
    margin: float, chosen: str, refused: list[str]
) -> None:
    r = reg()
    choice = pick(r, tok_s(on(r, "SLOW")) + margin)
    assert choice.taken[0].label == chosen
    assert [b.placement.label for b in choice.below_floor] == refused


def test_a_refusal_explains_itself_with_the_figures() -> None:
    r = reg()
    slow = tok_s(on(r, "SLOW"))
    (below, *_) = pick(r, 100).below_floor
    assert str(below) == f"1x SLOW: {slow:.1f} tok/s per stream at 16 streams < 100"
    assert below.estimate.decode_tok_s_per_stream == slow and below.floor == 100


def test_more_gpus_of_a_type_are_tried_where_tensor_parallelism_speeds_a_stream() -> None:
    r = reg()
    floor = (tok_s(on(r, "SLOW")) + tok_s(on(r, "SLOW", 2))) / 2
    choice = pick(r, floor)
    # 2x SLOW ($0.80) meets the floor and is cheaper than 1x MID ($1.00).
    assert choice.taken[0].label == "2x SLOW" and choice.taken[0].usd_per_hour == 0.80


def test_a_layer_split_never_adds_gpus_for_speed() -> None:
    r = reg(SLOW, MID, engine="llamacpp")
    floor = tok_s(on(r, "SLOW")) + 1
    assert floor < tok_s(on(r, "MID"))
    choice = pick(r, floor)
    # More GPUs take turns on every token: 2x SLOW is no faster, so it is not tried.
    assert labels(choice.taken) == ["1x MID"]
    assert [b.placement.label for b in choice.below_floor] == ["1x SLOW"]


@pytest.mark.parametrize(
    ("premium", "expected"),
    [
        # SLOW meets it only at 8 GPUs ($3.20): a fallback found by adding GPUs.
        pytest.param(10.0, ["2x MID", "1x FAST", "8x SLOW"], id="wide-premium"),
        pytest.param(1.4, ["2x MID"], id="fast-over-the-premium"),
    ],
)
def test_fallbacks_obey_the_floor_too(premium: float, expected: list[str]) -> None:
    r = reg()
    floor = (tok_s(on(r, "MID")) + tok_s(on(r, "MID", 2))) / 2
    assert floor < tok_s(on(r, "FAST"))
    choice = pick(r, floor, premium=premium)
    assert labels(choice.taken) == expected
    assert all(tok_s(p) >= floor for p in choice.taken)
    refused = [b.placement.label for b in choice.below_floor]
    assert "1x MID" in refused and "1x SLOW" in refused
    assert choice.taken[0].usd_per_hour * premium >= max(p.usd_per_hour for p in choice.taken)


def test_nothing_meeting_the_floor_is_a_problem_with_the_figures_and_the_fixes() -> None:
    r = reg()
    choice = pick(r, 1000)
    assert choice.taken == ()
    key = "frutebox-infra:minDecodeTokensPerSecond"
    problem = floor_problem("dense-8b", choice, 1000, key)
    assert problem.rule == "below-speed-floor"
    assert problem.message.startswith("dense-8b: no placement decodes 1000 tok/s per stream")
    assert str(choice.below_floor[0]) in problem.message
    assert key in problem.fix and "overrides.dense-8b.gpu" in problem.fix
    fastest = max(tok_s(b.placement) for b in choice.below_floor)
    assert f"to {int(fastest * 10) / 10:g} or less" in problem.fix


def test_the_fix_names_the_streams_at_which_the_cheapest_would_meet_the_floor() -> None:
    r = reg()
    slow = on(r, "SLOW")
    floor = tok_s(slow) + 2  # its 16 streams share the bandwidth; fewer get more each
    fewer = streams_meeting(slow, floor)
    assert fewer is not None
    streams, speed = fewer
    assert 1 <= streams < 16 and speed.decode_tok_s_per_stream >= floor
    more = streams_meeting(slow, 10_000)
    assert more is None
    choice = SpeedChoice(taken=(), below_floor=pick(r, 1000).below_floor)
    fix = floor_problem("dense-8b", choice, floor, "k").fix
    assert f"overrides.dense-8b.concurrency to {streams}" in fix


def test_a_placement_without_an_estimate_is_taken_unchecked() -> None:
    unsourced = gpu("UNSOURCED", secure=0.10)  # no datasheet figures: no estimate
    r = reg(unsourced, SLOW)
    choice = pick(r, 1000)
    assert labels(choice.taken) == ["1x UNSOURCED"]
    assert choice.unchecked == choice.taken


def test_ranking_by_cost_per_token_takes_the_cheapest_per_token() -> None:
    r = reg()
    per_hour = pick(r, 0)
    per_token = pick(r, 0, rank_by="usdPerMillionTokens")

    def usd_1m(p: PlacementOption) -> float:
        speed = p.speed
        assert isinstance(speed, SpeedEstimate) and speed.usd_per_million_output_tokens
        return speed.usd_per_million_output_tokens

    assert per_hour.taken[0].label == "1x SLOW"
    assert per_token.taken[0].label != "1x SLOW"
    costs = [usd_1m(p) for p in per_token.taken]
    assert costs == sorted(costs) and costs[0] == min(usd_1m(p) for p in ranked(r))


@pytest.mark.parametrize(
    ("premium", "count"),
    [pytest.param(1.0, 1, id="no-premium"), pytest.param(10.0, 3, id="all-within")],
)
def test_ranked_by_cost_per_token_fallbacks_are_within_the_premium_of_it(
    premium: float, count: int
) -> None:
    choice = pick(reg(), 0, rank_by="usdPerMillionTokens", premium=premium)
    assert len(choice.taken) == count


def test_without_a_floor_every_placement_within_the_premium_is_taken() -> None:
    choice = choose(ranking(reg()), floor=0, rank_by="usdPerHour", premium=10.0)
    assert labels(choice.taken) == ["1x SLOW", "1x MID", "1x FAST"]
    assert choice.below_floor == ()


def test_a_whole_estimate_asked_later_has_the_decode_rate_the_walk_judged() -> None:
    r = reg()
    slow = tok_s(on(r, "SLOW"))
    found = ranking(r)
    choice = choose(found, floor=slow + 0.01, rank_by="usdPerHour", premium=10.0)
    (below, *_) = choice.below_floor
    assert below.decode_tok_s_per_stream == slow
    assert below.estimate.decode_tok_s_per_stream == slow
    for p in choice.taken:
        assert tok_s(p) == found.speed_model.decode_rate(p.gpu, p.count)


@pytest.mark.parametrize(
    ("premium", "taken"),
    [
        # 1x SLOW and 2x SLOW are refused; 1x MID ($1.00) is taken, and 4x SLOW ($1.60), which
        # meets the floor, is a fallback only within the premium.
        pytest.param(1.0, ["1x MID"], id="over-the-premium"),
        pytest.param(2.0, ["1x MID", "4x SLOW"], id="within-the-premium"),
    ],
)
def test_a_refused_type_s_larger_count_is_a_fallback_within_the_premium(
    premium: float, taken: list[str]
) -> None:
    r = reg(SLOW, MID)
    floor = (tok_s(on(r, "SLOW", 2)) + tok_s(on(r, "MID"))) / 2
    choice = pick(r, floor, premium=premium)
    assert labels(choice.taken) == taken
    assert [b.placement.label for b in choice.below_floor] == ["1x SLOW", "2x SLOW"]


@pytest.mark.parametrize(
    ("config", "floor", "key"),
    [
        pytest.param({}, 20.0, "frutebox-infra:minDecodeTokensPerSecond", id="default"),
        pytest.param({"minDecodeTokensPerSecond": "35"}, 35.0, "minDecodeTokensPerSecond",
                     id="stack"),
        pytest.param(
            {"minDecodeTokensPerSecond": "35",
             "overrides": {"m": {"minDecodeTokensPerSecond": 12.5}}},
            12.5,
            "frutebox-infra:overrides.m.minDecodeTokensPerSecond",
            id="override-wins",
        ),
    ],
)
def test_the_floor_is_the_model_s_override_else_the_stack_s(
    config: dict[str, Any], floor: float, key: str
) -> None:
    s = settings(**config)
    override = s.overrides.get("m")
    got, named = floor_of(s, override), floor_key(override, "m")
    assert got == floor and key in named
