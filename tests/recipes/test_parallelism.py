"""FP8 block sharding: TP degrees that split a block get expert parallelism or are refused."""

from __future__ import annotations

from typing import Any

import pytest

from frutebox_infra.catalog.schema import Model, Runtime
from frutebox_infra.recipes import RECIPES, ServeOptions
from frutebox_infra.recipes.parallelism import Sharding, sharding
from tests.factories import flag, real_gpu, real_registry, sglang_model, words

RTX_PRO = "NVIDIA RTX PRO 6000 Blackwell Server Edition"


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
