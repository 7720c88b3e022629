"""One placement of a recipe as the speed model's inputs, and its estimate at the stack's workload.

The engine, the precision it serves the weights at, its KV precision on the GPU, whether the
count splits experts, and the speculative decoding the launch runs are the recipe's; the
workload is the configured streams at the configured context, or, when the stack states prompt
and output lengths, the KV a stream holds on average (the prompt and half the output).
"""

from __future__ import annotations

from frutebox_infra.fit import MemoryModel
from frutebox_infra.recipes.base import Recipe, Serving
from frutebox_infra.registry import Gpu, Model, SpecDecode
from frutebox_infra.speed import Placement, SpeedEstimate, SpeedUnknown, Workload, estimate_speed
from frutebox_infra.speed_facts import SpeedFacts

Speed = SpeedEstimate | SpeedUnknown | None
"""A placement's estimate; None where the model emits no tokens (a diffusion pipeline)."""


def speed_inputs(
    recipe: Recipe, model: Model, serving: Serving, gpu: Gpu, count: int, usd_per_hour: float
) -> tuple[Placement, Workload]:
    """What the speed model is asked for `count` x `gpu` serving `model` as `recipe` runs it."""
    precision = recipe.weight_format(model)
    spec = model.speed
    speculative = spec.spec_decode if serving.speculative else SpecDecode.NONE
    placement = Placement(
        engine=recipe.runtime,
        gpu=gpu,
        gpu_count=count,
        weights_gb=serving.weights_vram_gb,
        precision=precision,
        kv_dtype_bytes=recipe.kv_dtype_bytes(gpu),
        expert_parallel=recipe.expert_parallel(model, count),
        speculative=speculative,
        speculative_steps=spec.K if speculative is not SpecDecode.NONE else 0,
        speculative_acceptance=spec.acceptance,
        non_expert_bytes_per_weight=recipe.non_expert_bytes_per_weight(model),
        usd_per_hour=usd_per_hour,
    )
    return placement, workload(serving)


def workload(serving: Serving) -> Workload:
    """The configured streams; each holds the full context unless the stack states lengths."""
    prompt, output = serving.prompt_tokens, serving.output_tokens
    context = serving.context_tokens
    if prompt is not None and output is not None:
        context = min(context, prompt + output // 2)
    return Workload(serving.concurrency, context, prompt, output)


def placement_speed(
    recipe: Recipe,
    model: Model,
    serving: Serving,
    gpu: Gpu,
    count: int,
    usd_per_hour: float,
    facts: SpeedFacts | None,
) -> Speed:
    """The estimate for one placement, or None for a model that decodes no tokens."""
    if serving.memory_model is MemoryModel.DIFFUSION:
        return None
    placement, load = speed_inputs(recipe, model, serving, gpu, count, usd_per_hour)
    return estimate_speed(model, placement, load, facts)
