"""How fast a placement decodes and prefills, and what an output token costs, from first principles.

A forward step reads the weights it needs once (for a MoE the shared weights plus every expert
its batch touches) and each stream's KV cache, at the GPU's memory bandwidth times the engine's
efficiency; it is compute-bound instead when its FLOPs (2 x active weights per token, plus
attention) take longer at the engine's share of the tensor cores. Each step also pays a fixed
and a per-layer overhead, and under tensor or expert parallelism two collectives per layer over
NVLink or PCIe. Tensor parallelism splits the reads over the GPUs; llama.cpp's layer split
makes the GPUs take turns, so one stream sees one GPU's bandwidth. A decode step advances every
stream by one token, or by the accepted length of a speculative draft. Engine efficiencies and
link costs are registry facts fitted on published measurements (bench/speed_calibration.py).
"""

from __future__ import annotations

import math
from dataclasses import field
from typing import Literal

from frutebox_infra.fit import GB, kv_bytes_per_token
from frutebox_infra.record import mutable_record, positional_record
from frutebox_infra.registry import (
    Architecture,
    ExpertSplit,
    Gpu,
    Model,
    Runtime,
    SpecDecode,
    WeightFormat,
)
from frutebox_infra.speed_facts import EngineFigures, GpuSpeed, LinkSpeed, SpeedFacts

LAYER_SPLIT_ENGINES = frozenset({Runtime.LLAMACPP, Runtime.OLLAMA})
"""Engines that place whole layers on each GPU: every token passes through the GPUs in turn."""
PREFILL_REFERENCE_TOKENS = 512
"""The prompt the prefill figure is quoted for when the workload names none (llama-bench pp512)."""
COLLECTIVES_PER_LAYER = 2
"""Tensor parallelism all-reduces after attention and after the MLP; expert parallelism's
dispatch and combine take the second one's place."""
ACTIVATION_BYTES = 2
"""Activations cross the links in BF16."""


@positional_record
class Placement:
    """What serves the model: the engine, `gpu_count` x `gpu`, and the weights they hold."""

    engine: Runtime
    gpu: Gpu
    gpu_count: int
    weights_gb: float
    """GB (10^9 bytes) of weights at the served precision, all GPUs together."""
    precision: WeightFormat
    kv_dtype_bytes: int = 2
    expert_parallel: bool = False
    """Whole experts per GPU (SGLang --ep-size, vLLM --enable-expert-parallel)."""
    speculative: SpecDecode = SpecDecode.NONE
    """The drafting method when the engine runs it (configured and with its pieces present)."""
    speculative_steps: int = 0
    """Tokens drafted per step (registry `speed.K`)."""
    speculative_acceptance: float | None = None
    """The model's measured acceptance (registry `speed.acceptance`); None: the method's."""
    non_expert_bytes_per_weight: float | None = None
    usd_per_hour: float | None = None
    """The placement's price, for the cost per output token; None leaves that unknown."""


@positional_record
class Workload:
    """How the placement is loaded: streams decoding at once, and their lengths in tokens."""

    concurrency: int
    context_tokens: int
    """Tokens of KV each stream holds while it decodes (the configured context: the worst case)."""
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    """With both set, every request's prefill is paid for: the other streams stall meanwhile."""


@positional_record
class SpeedEstimate:
    """One placement's speed at its workload, and the cost of an output token at full load."""

    decode_tok_s_per_stream: float
    decode_tok_s_aggregate: float
    prefill_tok_s: float
    decode_step_ms: float
    """One decode step of every stream (with speculation: its drafts and the verify)."""
    bound: Literal["memory", "compute"]
    """What limits a decode step beyond its fixed overheads."""
    usd_per_million_output_tokens: float | None
    assumptions: tuple[str, ...] = ()


@positional_record
class SpeedUnknown:
    """No estimate: a fact the model needs is not in the registry (never a made-up one)."""

    reason: str


@positional_record
class _Shape:
    """The weights a step reads, in counts and bytes per weight, from the registry's facts."""

    arch: Architecture
    active: float
    shared: float
    """Weights every token reads: attention, dense MLPs, shared experts, the LM head."""
    per_expert: float
    experts: int
    used: int
    shared_bytes_per_weight: float
    expert_bytes_per_weight: float


@mutable_record
class _Context:
    """One placement's estimate inputs, and what every step of it shares: worked out once
    per estimate, not per step (a decode, a prefill, a speculative verify). Made for every
    estimate and never changed, so not frozen (freezing costs a call per field)."""

    placement: Placement
    shape: _Shape
    gpu: GpuSpeed
    engine: EngineFigures
    link: LinkSpeed | None
    parallel: int = field(init=False)
    """GPUs that read a step's weights at once: under a layer split they read in turn."""
    shared_bytes: float = field(init=False)
    kv_per_token: int = field(init=False)
    state_share: float = field(init=False)
    bandwidth: float = field(init=False)
    compute_rate: float = field(init=False)
    attention: int = field(init=False)
    """A step's attention FLOPs per token and cached position (scores and weighted values)."""
    overhead_s: float = field(init=False)
    expert_bytes: float = field(init=False)
    """One routed expert's bytes in one layer (0 for a dense model)."""
    links: bool = field(init=False)
    """Whether a step crosses links between the pod's GPUs, with these figures:"""
    link_bandwidth: float = field(init=False)
    link_latency_s: float = field(init=False)
    ring_share: float = field(init=False)
    """The share of the activations each GPU sends in a ring all-reduce: 2 (n - 1) / n."""

    def __post_init__(self) -> None:
        p, shape, engine, arch = self.placement, self.shape, self.engine, self.shape.arch
        parallel = self.parallel = 1 if p.engine in LAYER_SPLIT_ENGINES else p.gpu_count
        self.shared_bytes = shape.shared * shape.shared_bytes_per_weight / parallel
        self.kv_per_token = kv_bytes_per_token(arch, parallel, p.kv_dtype_bytes)
        self.state_share = 2 * (arch.state_bytes_per_sequence or 0) / parallel
        self.bandwidth = self.gpu.memory_bandwidth_gb_s * GB
        self.compute_rate = _tensor_tflops(self.gpu, p.precision) * 1e12 * engine.compute_efficiency
        layers = arch.full_attention_layers or arch.layers
        self.attention = 2 * layers * arch.attention_heads * _attention_width(arch)
        self.overhead_s = (engine.step_overhead_us + engine.layer_overhead_us * arch.layers) / 1e6
        self.expert_bytes = (
            shape.per_expert * shape.expert_bytes_per_weight if shape.experts else 0.0
        )
        # Worked out here, not per step: each estimate takes two or three steps.
        link = self.link
        self.links = p.gpu_count > 1 and link is not None
        if link is not None:
            self.link_bandwidth = (
                self.gpu.interconnect.gb_s_per_direction * GB * link.link_efficiency
            )
            self.link_latency_s = link.collective_latency_us / 1e6
            self.ring_share = 2 * (p.gpu_count - 1) / p.gpu_count


@positional_record
class ModelBasis:
    """What every estimate of one model served by one engine at one weights size shares,
    whatever the GPU type and count: the engine's figures, the expert split, and the weights
    a step reads (None where the registry lacks the facts)."""

    engine: EngineFigures | None
    split: ExpertSplit | None
    shape: _Shape | None


def model_basis(model: Model, placement: Placement, facts: SpeedFacts | None) -> ModelBasis:
    """The shared part of `model`'s estimates, for placements with `placement`'s engine,
    weights size and precisions."""
    split = model.expert_split
    known = model.architecture is not None and model.parameters is not None
    return ModelBasis(
        facts.engine(placement.engine) if facts is not None else None,
        split,
        _shape(model, placement, split) if known else None,
    )


def estimate_speed(
    model: Model,
    placement: Placement,
    workload: Workload,
    facts: SpeedFacts | None,
    basis: ModelBasis | None = None,
) -> SpeedEstimate | SpeedUnknown:
    """The decode and prefill speed of `model` on `placement` under `workload`; `basis`, when
    given, is `model_basis` of a placement of the same engine and weights (the planner
    estimates several GPU types and counts of every model)."""
    basis = basis or model_basis(model, placement, facts)
    engine = basis.engine
    problem = _missing(model, placement, facts, engine, basis.split)
    if problem is not None:
        return SpeedUnknown(problem)
    assert facts is not None and placement.gpu.speed is not None and engine is not None
    assert basis.shape is not None  # _missing refuses a model without its shape's facts
    ctx = _Context(
        placement,
        basis.shape,
        placement.gpu.speed,
        engine,
        facts.links.get(placement.gpu.speed.interconnect.kind),
    )
    notes: list[str] = []
    streams = workload.concurrency
    step, per_step, compute_bound = _decode(ctx, workload, facts, notes)
    if placement.engine in LAYER_SPLIT_ENGINES and placement.gpu_count > 1:
        notes.append(f"layer split: the {placement.gpu_count} GPUs take turns on every token")
    prompt = workload.prompt_tokens or PREFILL_REFERENCE_TOKENS
    prefill, _ = _step(ctx, prompt, 1, prompt / 2)
    per_stream = per_step / step
    aggregate = streams * per_stream
    output = workload.output_tokens
    if workload.prompt_tokens and output:
        # Each stream waits out the other streams' prefills once per request it serves.
        per_stream = 1 / (step / per_step + (streams - 1) * prefill / output)
        aggregate = streams * output / (output * step / per_step + streams * prefill)
    return SpeedEstimate(
        decode_tok_s_per_stream=per_stream,
        decode_tok_s_aggregate=aggregate,
        prefill_tok_s=prompt / prefill,
        decode_step_ms=step * 1000,
        bound="compute" if compute_bound else "memory",
        usd_per_million_output_tokens=usd_per_million_tokens(placement.usd_per_hour, aggregate),
        assumptions=tuple(notes),
    )


def _decode(
    ctx: _Context, workload: Workload, facts: SpeedFacts, notes: list[str]
) -> tuple[float, float, bool]:
    """Seconds per decode step, tokens each stream gains per step, and whether compute bounds
    it: one token per plain step; with speculation, `K` drafts and a verify of `K + 1`."""
    p, streams, context = ctx.placement, workload.concurrency, workload.context_tokens
    step, compute_bound = _step(ctx, streams, streams, context)
    if p.speculative is SpecDecode.NONE or p.speculative_steps == 0:
        return step, 1.0, compute_bound
    assumption = facts.speculative.get(p.speculative)
    if assumption is None:
        notes.append(
            f"no acceptance assumption for {p.speculative} in registry/speed.yaml: estimated"
            " without speculative decoding"
        )
        return step, 1.0, compute_bound
    k = p.speculative_steps
    accept = p.speculative_acceptance or assumption.token_acceptance
    verify, compute_bound = _step(ctx, streams * (k + 1), streams, context)
    tokens = accepted_tokens(accept, k)
    notes.append(
        f"{p.speculative} drafting {k} tokens at {accept:.0%} acceptance each:"
        f" {tokens:.2f} tokens per step"
    )
    return verify + k * assumption.draft_step_cost * step, tokens, compute_bound


def usd_per_million_tokens(usd_per_hour: float | None, tok_s: float) -> float | None:
    """What a million tokens cost at `tok_s`, the placement busy all hour."""
    if usd_per_hour is None or tok_s <= 0:
        return None
    return usd_per_hour / (tok_s * 3600) * 1e6


def accepted_tokens(acceptance: float, drafted: int) -> float:
    """Tokens one verify step yields: the accepted draft prefix plus the target's own token."""
    return (1 - acceptance ** (drafted + 1)) / (1 - acceptance)


def distinct_experts(experts: int, used: int, tokens: int) -> float:
    """Experts a step of `tokens` tokens touches per layer, each token routing to `used` of
    `experts` independently and uniformly."""
    return experts * (1 - (1 - used / experts) ** tokens)


def _missing(
    model: Model,
    p: Placement,
    facts: SpeedFacts | None,
    engine: EngineFigures | None,
    split: ExpertSplit | None,
) -> str | None:
    arch, params = model.architecture, model.parameters
    if facts is None:
        return "registry/speed.yaml is missing: no engine figures to estimate with"
    if engine is None:
        return f"registry/speed.yaml has no figures for {p.engine} (no token speed to model)"
    if p.gpu.speed is None:
        return f"registry/gpus.yaml has no speed facts for {p.gpu.name}"
    if arch is None or params is None:
        return f"registry/models.yaml lacks {model.id}'s architecture or parameter counts"
    if arch.hidden_size is None:
        return f"registry/models.yaml lacks {model.id}'s architecture.hidden_size"
    if arch.moe and split is None:
        return (
            f"registry/models.yaml lacks {model.id}'s expert structure (experts,"
            " experts_per_token, moe_intermediate_size)"
        )
    if p.gpu_count > 1 and p.gpu.speed.interconnect.kind not in facts.links:
        return f"registry/speed.yaml has no link figures for {p.gpu.speed.interconnect.kind}"
    return None


def _shape(model: Model, p: Placement, split: ExpertSplit | None) -> _Shape:
    arch, params = model.architecture, model.parameters
    assert arch is not None and params is not None
    weight_bytes = p.weights_gb * GB
    uniform = weight_bytes / params.total
    if split is None:
        return _Shape(arch, params.active, params.active, 0.0, 0, 0, uniform, uniform)
    assert arch.experts and arch.experts_per_token
    shared_bpw = expert_bpw = uniform
    if p.non_expert_bytes_per_weight is not None:
        stored_shared = max(params.total - split.routed, split.shared)
        shared_bpw = p.non_expert_bytes_per_weight
        expert_bpw = max(weight_bytes - stored_shared * shared_bpw, 0.0) / split.routed
    return _Shape(
        arch, params.active, split.shared, split.per_expert, arch.experts, arch.experts_per_token,
        shared_bpw, expert_bpw,
    )  # fmt: skip


def _step(ctx: _Context, tokens: int, streams: int, context: float) -> tuple[float, bool]:
    """Seconds one forward step of `tokens` tokens takes, `streams` streams each holding
    `context` tokens of KV; and whether compute rather than memory bounds it."""
    shape, parallel = ctx.shape, ctx.parallel
    # Under a layer split the GPUs read in turn, so the step reads everything at one GPU's pace.
    weight_bytes = ctx.shared_bytes + (_expert_bytes(ctx, tokens) if shape.experts else 0.0)
    kv_bytes = streams * (context * ctx.kv_per_token + ctx.state_share)
    memory_s = (weight_bytes + kv_bytes) / ctx.bandwidth
    memory_s /= ctx.engine.bandwidth_efficiency
    # Scores and weighted values over `context` cached positions, for every token.
    attention = ctx.attention * context * tokens
    flops = (2 * shape.active * tokens + attention) / parallel
    compute_s = flops / ctx.compute_rate
    links = _links(ctx, tokens) if ctx.links else 0.0
    return max(memory_s, compute_s) + ctx.overhead_s + links, compute_s > memory_s


def _expert_bytes(ctx: _Context, tokens: int) -> float:
    """Expert bytes the busiest GPU reads in a step: a tensor-parallel share of every touched
    expert, or under expert parallelism the touched experts it owns (the most loaded GPU)."""
    shape, parallel = ctx.shape, ctx.parallel
    touched = distinct_experts(shape.experts, shape.used, tokens)
    if ctx.placement.expert_parallel and parallel > 1:
        owned = shape.experts / parallel
        mean = touched / parallel
        busiest = min(owned, touched, mean + math.sqrt(2 * mean * math.log(parallel)))
        return shape.arch.moe_layers * busiest * ctx.expert_bytes
    return shape.arch.moe_layers * touched * ctx.expert_bytes / parallel


def _attention_width(arch: Architecture) -> int:
    """Per head, the widths a score and a weighted value multiply across."""
    if arch.attention == "mla":
        assert arch.kv_lora_rank is not None and arch.qk_rope_head_dim is not None
        return 2 * arch.kv_lora_rank + arch.qk_rope_head_dim
    assert arch.head_dim is not None
    return 2 * arch.head_dim


def _tensor_tflops(gpu: GpuSpeed, precision: WeightFormat) -> float:
    if precision == "fp8" and gpu.fp8_dense_tflops is not None:
        return gpu.fp8_dense_tflops
    return gpu.bf16_dense_tflops


def _links(ctx: _Context, tokens: int) -> float:
    """Seconds a step spends on the links between the pod's GPUs."""
    p = ctx.placement
    activations = tokens * (ctx.shape.arch.hidden_size or 0) * ACTIVATION_BYTES
    if p.engine in LAYER_SPLIT_ENGINES:
        # One hand-off of the activations at each boundary between consecutive GPUs.
        return (p.gpu_count - 1) * (ctx.link_latency_s + activations / ctx.link_bandwidth)
    ring = ctx.ring_share * activations / ctx.link_bandwidth
    return COLLECTIVES_PER_LAYER * ctx.shape.arch.layers * (ctx.link_latency_s + ring)
