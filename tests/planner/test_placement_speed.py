"""A placement's speed inputs are the recipe's launch (engine, precision, KV, experts,
speculation), and a published measurement stated as a stack is estimated as the bench does."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import asdict, is_dataclass
from types import ModuleType
from typing import Any

import pytest

from frutebox_infra.catalog.schema import Model, Registry, Runtime, SpecDecode
from frutebox_infra.estimates.speed import SpeedEstimate
from frutebox_infra.planner.placement_speed import placement_speed, speed_inputs, workload
from frutebox_infra.planner.plan import plan_fleet
from frutebox_infra.planner.resolver import PlacementOption, resolve
from frutebox_infra.plumbing.validation import validate
from frutebox_infra.recipes import RECIPES
from frutebox_infra.recipes.base import ServeOptions
from frutebox_infra.stack.environment import Environment
from tests.factories import ROOT, real_registry, registry, settings


def placement(model_id: str, gpu: str | None = None, **options: Any) -> PlacementOption:
    r = resolve(real_registry(), model_id, ServeOptions(hf_token_configured=True, **options))
    return next(p for p in r.placements if gpu is None or p.gpu.name == gpu)


@pytest.mark.parametrize(
    ("model_id", "gpu", "engine", "precision", "kv"),
    [
        pytest.param("qwen3-235b-a22b", None, Runtime.SGLANG, "fp8", 1, id="sglang-fp8-kv"),
        pytest.param("kimi-k2.6", None, Runtime.LLAMACPP, "gguf", 2, id="llamacpp-gguf"),
        pytest.param("qwen3-8b", None, Runtime.OLLAMA, "gguf", 2, id="ollama-gguf"),
        pytest.param("pixtral", "H100 SXM", Runtime.VLLM, "bf16", 1, id="vllm-fp8-kv-on-hopper"),
        pytest.param("pixtral", "A100 SXM", Runtime.VLLM, "bf16", 2, id="vllm-bf16-kv-on-ampere"),
    ],
)
def test_the_inputs_are_what_the_recipe_launches(
    model_id: str, gpu: str | None, engine: Runtime, precision: str, kv: int
) -> None:
    p = placement(model_id, gpu)
    inputs, load = speed_inputs(p.recipe, p.model, p.serving, p.gpu, p.count, p.usd_per_hour)
    assert (inputs.engine, inputs.precision, inputs.kv_dtype_bytes) == (engine, precision, kv)
    assert (inputs.gpu, inputs.gpu_count, inputs.usd_per_hour) == (p.gpu, p.count, p.usd_per_hour)
    assert inputs.weights_gb == p.serving.weights_vram_gb
    assert (load.concurrency, load.context_tokens) == (
        p.serving.concurrency,
        p.serving.context_tokens,
    )


@pytest.mark.parametrize(
    ("count", "expert_parallel"),
    [pytest.param(4, False, id="tp4-whole-blocks"), pytest.param(8, True, id="tp8-needs-ep")],
)
def test_expert_parallelism_follows_the_count_that_needs_it(
    count: int, expert_parallel: bool
) -> None:
    # Qwen3-Coder-480B's experts are 2560 wide: /8 is not a multiple of the FP8 block (128).
    p = placement("qwen3-coder")
    inputs, _ = speed_inputs(p.recipe, p.model, p.serving, p.gpu, count, p.usd_per_hour)
    assert inputs.expert_parallel is expert_parallel
    assert ("--ep-size" in p.recipe.pod(p.model, p.image, p.gpu, count, p.serving).args) is (
        expert_parallel
    )


@pytest.mark.parametrize(
    ("head", "method"),
    [
        pytest.param(None, SpecDecode.NONE, id="no-head-no-speculation"),
        pytest.param("org/eagle3-head", SpecDecode.EAGLE3, id="a-head-runs-eagle3"),
    ],
)
def test_speculation_is_estimated_only_where_the_launch_runs_it(
    head: str | None, method: SpecDecode
) -> None:
    p = placement("qwen3-coder", eagle3_head=head)
    inputs, _ = speed_inputs(p.recipe, p.model, p.serving, p.gpu, p.count, p.usd_per_hour)
    assert inputs.speculative is method
    assert inputs.speculative_steps == (p.model.speed.K if head else 0)
    assert p.serving.speculative is (head is not None)


@pytest.mark.parametrize(
    ("prompt", "output", "context"),
    [
        pytest.param(None, None, 32768, id="full-context"),
        pytest.param(1024, 1024, 1536, id="prompt-and-half-the-output"),
        pytest.param(30000, 2000, 31000, id="long-request"),
    ],
)
def test_a_stream_holds_the_prompt_and_half_its_output_when_lengths_are_stated(
    prompt: int | None, output: int | None, context: int
) -> None:
    p = placement("qwen-3.6-27b", prompt_tokens=prompt, output_tokens=output)
    load = workload(p.serving)
    assert (load.context_tokens, load.prompt_tokens, load.output_tokens) == (
        context,
        prompt,
        output,
    )


def test_a_diffusion_pipeline_decodes_no_tokens() -> None:
    p = placement("sdxl-1.0")
    assert p.speed is None
    facts = real_registry().speed
    assert placement_speed(p.recipe, p.model, p.serving, p.gpu, 1, 1.0, facts) is None


# --- a published measurement stated as a stack -------------------------------------------


def calibration() -> ModuleType:
    """bench/speed_calibration.py, which reads the published rows and estimates each one."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        spec = importlib.util.spec_from_file_location(
            "speed_calibration", ROOT / "bench" / "speed_calibration.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        # Registered first: pydantic resolves the module's annotations through sys.modules.
        sys.modules["speed_calibration"] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "bench"))


BENCH = calibration()
MODELS, ROWS = BENCH.load_rows(real_registry())


def servable(row: Any, m: Model) -> Model:
    """The measured model as the catalog would hold it for the row's engine: the row's
    checkpoint as its weights, a source the engine pulls, a context that takes the row's."""
    weights = row.weights or m.weights
    if row.engine in (Runtime.LLAMACPP, Runtime.OLLAMA):
        gguf = {"repo": f"org/{m.id}-GGUF", "quant": "Q", "vram_gb": weights.vram_gb,
                "non_expert_bytes_per_weight": weights.non_expert_bytes_per_weight}  # fmt: skip
        source: dict[str, Any] = {"gguf": gguf}
        if row.engine is Runtime.OLLAMA:
            source = {"ollama_tag": f"{m.id}:test"}
    else:
        source = {"hf_repo": f"org/{m.id}", "revision": "0" * 40}
    kept = {"speed", "source", "runtimes", "weights"}
    data = {k: v for k, v in asdict(m).items() if v is not None and k not in kept}
    # The row's own weights are the bench's (pydantic) record, the catalog's a dataclass.
    given = asdict(weights) if is_dataclass(weights) else weights.model_dump()
    weights_data = {k: v for k, v in given.items() if v is not None}
    return validate(Model, data | {"runtimes": [str(row.engine)], "source": source,
                                   "weights": weights_data | {"disk_gb": weights.vram_gb},
                                   "context": max(row.context_tokens, stated(row), 1024)})


def stated(row: Any) -> int:
    """The tokens of one request the row states (0 where it states no lengths)."""
    return (row.prompt_tokens or 0) + (row.output_tokens or 0)


def stack_states(row: Any) -> bool:
    """Can a stack state this row? Its engine launches the row's KV precision, expert split
    and speculation on its GPUs, and its workload is decoding at a context or with lengths."""
    recipe = RECIPES.get(row.engine)
    gpu = real_registry().gpu(row.gpu)
    model = MODELS[row.model]
    return (
        recipe is not None
        and gpu is not None
        and row.speculative is None
        and row.metric != "prefill_tok_s"
        and (row.prompt_tokens is None) == (row.output_tokens is None)
        and recipe.kv_dtype_bytes(gpu) == row.kv_dtype_bytes
        and recipe.expert_parallel(model, row.gpu_count) == row.expert_parallel
    )


STATED = [r for r in ROWS if stack_states(r)]


def stack_for(row: Any) -> dict[str, Any]:
    """The row's configuration as stack keys: engine, GPU, count, streams, context, lengths."""
    gpu = real_registry().gpu(row.gpu)
    assert gpu is not None
    override: dict[str, Any] = {
        "engine": str(row.engine),
        "gpu": gpu.id,
        "gpuCount": row.gpu_count,
        "concurrency": row.concurrency,
        "context": max(row.context_tokens, 1),
    }
    config: dict[str, Any] = {"models": [row.model], "overrides": {row.model: override},
                              "minDecodeTokensPerSecond": "0"}  # fmt: skip
    if row.prompt_tokens is not None:
        config |= {"promptTokens": row.prompt_tokens, "outputTokens": row.output_tokens}
        # The context only bounds the request; the KV held is the prompt and half the output.
        override["context"] = stated(row)
    return config


def test_published_rows_can_be_stated_as_a_stack() -> None:
    # The SGLang rows were measured with a BF16 KV cache (or speculation), and our SGLang
    # launch always caches KV in FP8: no stack can state them.
    assert len(STATED) >= 10
    assert {r.engine for r in STATED} == {Runtime.VLLM, Runtime.LLAMACPP}
    assert any(r.gpu_count > 1 for r in STATED) and any(r.concurrency > 1 for r in STATED)


@pytest.mark.parametrize("row", STATED, ids=[r.id for r in STATED])
def test_a_published_row_stated_as_a_stack_is_estimated_as_the_bench_does(row: Any) -> None:
    m = servable(row, MODELS[row.model])
    facts = real_registry()
    reg: Registry = registry([m], facts.gpus, speed=facts.speed)
    plan = plan_fleet(reg, settings(**stack_for(row)), stack="bench", environment=Environment())
    (planned,) = plan.models
    assert planned.problems == (), planned.problems
    p = planned.placement
    assert p is not None and (p.gpu.name, p.count) == (row.gpu, row.gpu_count)
    speed = p.speed
    assert isinstance(speed, SpeedEstimate)
    bench = BENCH.estimate(row, MODELS, facts, facts.speed)
    assert getattr(speed, row.metric) == pytest.approx(bench, rel=1e-9)

