"""Tensor parallelism: a power of two that divides the heads, KV heads divided or copied; and FP8
block sharding: TP degrees that split a block get expert parallelism or are refused."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pytest

from frutebox_infra.catalog.schema import Architecture, Model, Runtime
from frutebox_infra.recipes import RECIPES, ServeOptions
from frutebox_infra.recipes.base import is_power_of_two
from frutebox_infra.recipes.parallelism import Sharding, sharding
from frutebox_infra.recipes.tensor_parallel import tp_problem
from tests.factories import (
    flag,
    gqa,
    kimi_k2_mla,
    real_gpu,
    real_registry,
    sglang_model,
    words,
)

RTX_PRO = "NVIDIA RTX PRO 6000 Blackwell Server Edition"


# ---- tensor parallelism ----------------------------------------------------------------------

MLA = kimi_k2_mla(moe=False)


@pytest.mark.parametrize(
    ("n", "expected"),
    [pytest.param(n, n in (1, 2, 4, 8, 16), id=str(n)) for n in range(0, 17)],
)
def test_is_power_of_two(n: int, expected: bool) -> None:
    assert is_power_of_two(n) is expected


@pytest.mark.parametrize(
    ("arch", "tp", "ok"),
    [
        pytest.param(None, 3, False, id="unknown-arch-3"),
        pytest.param(None, 4, True, id="unknown-arch-4"),
        pytest.param(gqa(heads=48, kv_heads=48), 3, False, id="3-divides-heads-but-is-not-2^n"),
        pytest.param(gqa(heads=48, kv_heads=48), 6, False, id="6-divides-heads-but-is-not-2^n"),
        pytest.param(gqa(heads=12, kv_heads=4), 4, True, id="4-divides-12-heads"),
        pytest.param(gqa(heads=12, kv_heads=4), 8, False, id="8-does-not-divide-12-heads"),
        pytest.param(gqa(heads=32, kv_heads=8), 8, True, id="kv-divided"),
        pytest.param(gqa(heads=32, kv_heads=4), 8, True, id="kv-copied"),
        pytest.param(gqa(heads=24, kv_heads=6), 2, True, id="kv-6-over-2"),
        pytest.param(gqa(heads=24, kv_heads=6), 4, False, id="kv-6-neither-divides-nor-copies-4"),
        pytest.param(MLA, 8, True, id="mla-latent-copied"),
    ],
)
def test_tp_problem(arch: Architecture | None, tp: int, ok: bool) -> None:
    m = sglang_model("tp", architecture=asdict(arch) if arch else None)
    problem = tp_problem(m, tp)
    assert (problem is None) is ok
    if not ok:
        assert problem and str(tp) in problem


# ---- FP8 block sharding ----------------------------------------------------------------------


def moe(*, width: int, experts: int | None, block: int | None = 128, fmt: str = "fp8") -> Model:
    arch: dict[str, Any] = {
        "attention": "gqa",
        "layers": 8,
        "attention_heads": 64,
        "kv_heads": 8,
        "head_dim": 128,
        "moe": True,
        "moe_intermediate_size": width,
        "source": "test",
    }
    if experts is not None:
        arch["experts"] = experts
    weights = {"format": fmt, "disk_gb": 100, "vram_gb": 100, "fp8_block_size": block}
    return sglang_model("moe", architecture=arch, weights=weights)


@pytest.mark.parametrize(
    ("m", "tp", "expected"),
    [
        pytest.param(moe(width=2560, experts=160), 4, Sharding(), id="2560/4=640-whole-blocks"),
        pytest.param(
            moe(width=2560, experts=160), 8, Sharding(expert_parallel=True), id="2560/8=320-ep"
        ),
        pytest.param(
            moe(width=1536, experts=128), 8, Sharding(expert_parallel=True), id="1536/8=192-ep"
        ),
        pytest.param(moe(width=1536, experts=128), 4, Sharding(), id="1536/4=384-whole-blocks"),
        pytest.param(moe(width=2560, experts=160, block=None), 8, Sharding(), id="no-block-scales"),
        pytest.param(moe(width=2560, experts=160, fmt="bf16"), 8, Sharding(), id="not-fp8"),
        pytest.param(moe(width=2560, experts=160), 1, Sharding(), id="tp1-never-splits"),
    ],
)
def test_sharding(m: Model, tp: int, expected: Sharding) -> None:
    assert sharding(m, tp) == expected


@pytest.mark.parametrize(
    ("experts", "refused"),
    [pytest.param(160, False, id="160-over-8"), pytest.param(100, True, id="100-over-8")],
)
def test_expert_parallelism_needs_experts_that_divide_over_the_gpus(
    experts: int, refused: bool
) -> None:
    result = sharding(moe(width=2560, experts=experts), 8)
    assert (result.problem is not None) is refused
    assert result.expert_parallel is not refused


def test_without_an_expert_count_the_split_is_refused_not_guessed() -> None:
    problem = sharding(moe(width=2560, experts=None), 8).problem
    assert problem is not None and "expert count" in problem


@pytest.mark.parametrize(
    ("width", "tp", "refused"),
    [
        pytest.param(17408, 8, False, id="17408/8=2176=17x128"),
        pytest.param(17408, 4, False, id="17408/4"),
        pytest.param(12800, 8, True, id="12800/8=1600-not-whole"),
    ],
)
def test_a_dense_fp8_model_has_no_way_out(width: int, tp: int, refused: bool) -> None:
    arch = {
        "attention": "gqa",
        "layers": 8,
        "attention_heads": 64,
        "kv_heads": 8,
        "head_dim": 128,
        "intermediate_size": width,
        "source": "test",
    }
    weights = {"format": "fp8", "disk_gb": 10, "vram_gb": 10, "fp8_block_size": 128}
    m = sglang_model("dense", architecture=arch, weights=weights)
    result = sharding(m, tp)
    assert (result.problem is not None) is refused
    assert not result.expert_parallel
    assert (RECIPES[Runtime.SGLANG].count_problem(m, tp) is not None) is refused


@pytest.mark.parametrize("model_id", ["qwen3-coder", "qwen3-235b-a22b"])
@pytest.mark.parametrize(
    ("runtime", "ep_flag"),
    [(Runtime.SGLANG, "--ep-size"), (Runtime.VLLM, "--enable-expert-parallel")],
)
def test_real_fp8_moe_at_tp8_gets_expert_parallelism_and_at_tp4_does_not(
    model_id: str, runtime: Runtime, ep_flag: str
) -> None:
    m = real_registry().model(model_id)
    assert m is not None
    recipe = RECIPES[runtime]
    image = real_registry().images[runtime]
    serving = recipe.serving(m, ServeOptions())
    assert recipe.count_problem(m, 8) is None
    at8 = words(recipe.pod(m, image, real_gpu(RTX_PRO), 8, serving).args)
    at4 = words(recipe.pod(m, image, real_gpu(RTX_PRO), 4, serving).args)
    assert ep_flag in at8 and ep_flag not in at4
    if runtime is Runtime.SGLANG:
        assert flag(at8, "--ep-size") == "8" == flag(at8, "--tp-size")
