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
from frutebox_infra.speed import ModelTerms, Placement, SpeedEstimate, SpeedUnknown, Workload
from frutebox_infra.speed_facts import SpeedFacts

Speed = SpeedEstimate | SpeedUnknown | None
"""A placement's estimate; None where the model emits no tokens (a diffusion pipeline)."""


class ModelSpeeds:
    """One model's estimates as a recipe serves it, on any GPU type and count: what those
    share (the recipe's engine, precisions and speculation, the workload, the model's
    `ModelTerms`) is worked out once, on the first estimate. It is the `Served` its terms
    are made of."""

    def __init__(self, recipe: Recipe, model: Model, serving: Serving, facts: SpeedFacts | None):
        self.recipe, self.model, self.serving, self.facts = recipe, model, serving, facts
        self.tokens = serving.memory_model is not MemoryModel.DIFFUSION
        self.engine = recipe.runtime
        self.weights_gb = serving.weights_vram_gb
        spec = model.speed
        self.speculative = spec.spec_decode if serving.speculative else SpecDecode.NONE
        self.speculative_steps = spec.K if self.speculative is not SpecDecode.NONE else 0
        self.speculative_acceptance = spec.acceptance
        self.precision = recipe.weight_format(model)
        self.non_expert_bytes_per_weight = recipe.non_expert_bytes_per_weight(model)
        self.workload = workload(serving)
        self.terms: ModelTerms | None = None

    def placement(self, gpu: Gpu, count: int, usd_per_hour: float) -> Placement:
        return Placement(
            engine=self.engine,
            gpu=gpu,
            gpu_count=count,
            weights_gb=self.weights_gb,
            precision=self.precision,
            kv_dtype_bytes=self.recipe.kv_dtype_bytes(gpu),
            expert_parallel=self.recipe.expert_parallel(self.model, count),
            speculative=self.speculative,
            speculative_steps=self.speculative_steps,
            speculative_acceptance=self.speculative_acceptance,
            non_expert_bytes_per_weight=self.non_expert_bytes_per_weight,
            usd_per_hour=usd_per_hour,
        )

    def at(self, gpu: Gpu, count: int, usd_per_hour: float) -> Speed:
        """The estimate for `count` x `gpu`, or None for a model that decodes no tokens."""
        if not self.tokens:
            return None
        terms = self.terms
        if terms is None:
            terms = self.terms = ModelTerms(self.model, self, self.facts)
        kv, split = self.recipe.kv_dtype_bytes(gpu), self.recipe.expert_parallel(self.model, count)
        return terms.at(gpu, count, kv, split, usd_per_hour, self.workload)


def speed_inputs(
    recipe: Recipe, model: Model, serving: Serving, gpu: Gpu, count: int, usd_per_hour: float
) -> tuple[Placement, Workload]:
    """What the speed model is asked for `count` x `gpu` serving `model` as `recipe` runs it."""
    speeds = ModelSpeeds(recipe, model, serving, None)
    return speeds.placement(gpu, count, usd_per_hour), speeds.workload


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
    return ModelSpeeds(recipe, model, serving, facts).at(gpu, count, usd_per_hour)
