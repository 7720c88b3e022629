"""One placement of a recipe as the speed model's inputs, and its estimate at the stack's workload.

The engine, the precision it serves the weights at, its KV precision on the GPU, whether the
count splits experts, and the speculative decoding the launch runs are the recipe's; the
workload is the configured streams at the configured context, or, when the stack states prompt
and output lengths, the KV a stream holds on average (the prompt and half the output).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

from frutebox_infra.catalog.schema import Gpu, Model, Runtime, SpecDecode, WeightFormat
from frutebox_infra.catalog.speed_facts import MeasuredSpeed, SpeedFacts
from frutebox_infra.estimates.fit import MemoryModel
from frutebox_infra.estimates.speed import (
    Decode,
    ModelTerms,
    Placement,
    SpeedEstimate,
    SpeedUnknown,
    Workload,
)
from frutebox_infra.recipes.base import Recipe, Serving

Speed = SpeedEstimate | SpeedUnknown | None
"""A placement's estimate; None where the model emits no tokens (a diffusion pipeline)."""


@dataclass(frozen=True, kw_only=True)
class ServedModel:
    """How a recipe serves a model, whatever the GPUs: the `Served` its terms are made of."""

    engine: Runtime
    weights_gb: float
    precision: WeightFormat
    non_expert_bytes_per_weight: float | None
    speculative: SpecDecode
    speculative_steps: int
    speculative_acceptance: float | None


class ModelSpeeds:
    """One model's estimates as a recipe serves it, on any GPU type and count: what those
    share (how the recipe serves it, the workload, the model's `ModelTerms`) is worked out on
    the first estimate, and each GPU type and count's decode once, for the floor's walk and the
    estimate a report asks for alike."""

    def __init__(self, recipe: Recipe, model: Model, serving: Serving, facts: SpeedFacts | None):
        self.recipe, self.model, self.serving, self.facts = recipe, model, serving, facts
        self.tokens = serving.memory_model is not MemoryModel.DIFFUSION
        self.decodes: dict[tuple[str, int], Decode | SpeedUnknown] = {}
        """By GPU type id and count: the decodes whole estimates were asked of so far."""

    @cached_property
    def served(self) -> ServedModel:
        recipe, model = self.recipe, self.model
        spec = model.speed
        speculative = spec.spec_decode if self.serving.speculative else SpecDecode.NONE
        return ServedModel(
            engine=recipe.runtime,
            weights_gb=self.serving.weights_vram_gb,
            precision=recipe.weight_format(model),
            non_expert_bytes_per_weight=recipe.non_expert_bytes_per_weight(model),
            speculative=speculative,
            speculative_steps=spec.K if speculative is not SpecDecode.NONE else 0,
            speculative_acceptance=spec.acceptance,
        )

    @cached_property
    def terms(self) -> ModelTerms:
        """The model's terms at its workload."""
        return ModelTerms(self.model, self.served, self.facts, workload(self.serving))

    def placement(self, gpu: Gpu, count: int, usd_per_hour: float) -> Placement:
        served = self.served
        return Placement(
            engine=served.engine,
            gpu=gpu,
            gpu_count=count,
            weights_gb=served.weights_gb,
            precision=served.precision,
            kv_dtype_bytes=self.recipe.kv_dtype_bytes(gpu),
            expert_parallel=self.recipe.expert_parallel(self.model, count),
            speculative=served.speculative,
            speculative_steps=served.speculative_steps,
            speculative_acceptance=served.speculative_acceptance,
            non_expert_bytes_per_weight=served.non_expert_bytes_per_weight,
            usd_per_hour=usd_per_hour,
        )

    def decode_rate(self, gpu: Gpu, count: int) -> float | SpeedUnknown | None:
        """Tokens per second a stream decodes on `count` x `gpu`, all the floor's walk asks
        (nothing else of the estimate is made); or None for a model that decodes no tokens."""
        if not self.tokens:
            return None
        measured = self._measured(gpu, count)
        if measured is not None:
            return measured.decode_tok_s_per_stream
        recipe = self.recipe
        kv, split = recipe.kv_dtype_bytes(gpu), recipe.expert_parallel(self.model, count)
        return self.terms.decode_rate(gpu, count, kv, split)

    def decode(self, gpu: Gpu, count: int) -> Decode | SpeedUnknown | None:
        """The decode for `count` x `gpu`, the rest of its estimate to follow; or None for a
        model that decodes no tokens."""
        if not self.tokens:
            return None
        key = gpu.id, count
        decode = self.decodes.get(key)
        if decode is None:
            recipe = self.recipe
            kv, split = recipe.kv_dtype_bytes(gpu), recipe.expert_parallel(self.model, count)
            decode = self.terms.decode(gpu, count, kv, split)
            measured = self._measured(gpu, count)
            if measured is not None and isinstance(decode, Decode):
                # The fleet's own measurement wins: the step lasts what the rate says.
                rate = measured.decode_tok_s_per_stream
                timed = decode.timed
                decode = replace(
                    decode,
                    timed=replace(
                        timed, step_s=timed.tokens_per_step / rate, tok_s_per_stream=rate
                    ),
                )
            self.decodes[key] = decode
        return decode

    def _measured(self, gpu: Gpu, count: int) -> MeasuredSpeed | None:
        if self.facts is None or not self.facts.measured:
            return None
        return self.facts.measured_on(self.model.id, self.recipe.runtime, gpu.id, count)

    def at(self, gpu: Gpu, count: int, usd_per_hour: float) -> Speed:
        """The estimate for `count` x `gpu`, or None for a model that decodes no tokens."""
        decode = self.decode(gpu, count)
        if not isinstance(decode, Decode):
            return decode
        estimate = decode.estimate(usd_per_hour)
        measured = self._measured(gpu, count)
        if measured is None:
            return estimate
        note = (
            f"decode measured by our fleet: {measured.decode_tok_s_per_stream:g} tok/s per"
            f" stream on pod {measured.pod} ({measured.engine} {measured.engine_version},"
            f" {measured.date})"
        )
        return replace(estimate, assumptions=(*estimate.assumptions, note))


def speed_inputs(
    recipe: Recipe, model: Model, serving: Serving, gpu: Gpu, count: int, usd_per_hour: float
) -> tuple[Placement, Workload]:
    """What the speed model is asked for `count` x `gpu` serving `model` as `recipe` runs it."""
    speeds = ModelSpeeds(recipe, model, serving, None)
    return speeds.placement(gpu, count, usd_per_hour), workload(serving)


def workload(serving: Serving) -> Workload:
    """The configured streams; each holds the full context unless the stack states lengths."""
    prompt, output = serving.prompt_tokens, serving.output_tokens
    context = serving.context_tokens
    if prompt is not None and output is not None:
        context = min(context, prompt + output // 2)
    return Workload(
        concurrency=serving.concurrency,
        context_tokens=context,
        prompt_tokens=prompt,
        output_tokens=output,
    )


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
