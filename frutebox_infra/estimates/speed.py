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
from dataclasses import dataclass, field
from typing import Literal, Protocol

from frutebox_infra.catalog.schema import (
    Architecture,
    ExpertSplit,
    Gpu,
    Model,
    Runtime,
    SpecDecode,
    WeightFormat,
)
from frutebox_infra.catalog.speed_facts import EngineFigures, GpuSpeed, LinkSpeed, SpeedFacts
from frutebox_infra.estimates.fit import GB, kv_bytes_per_token

LAYER_SPLIT_ENGINES = frozenset({Runtime.LLAMACPP, Runtime.OLLAMA})
"""Engines that place whole layers on each GPU: every token passes through the GPUs in turn."""
PREFILL_REFERENCE_TOKENS = 512
"""The prompt the prefill figure is quoted for when the workload names none (llama-bench pp512)."""
COLLECTIVES_PER_LAYER = 2
"""Tensor parallelism all-reduces after attention and after the MLP; expert parallelism's
dispatch and combine take the second one's place."""
ACTIVATION_BYTES = 2
"""Activations cross the links in BF16."""


@dataclass(frozen=True, kw_only=True)
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


@dataclass(frozen=True, kw_only=True)
class Workload:
    """How the placement is loaded: streams decoding at once, and their lengths in tokens."""

    concurrency: int
    context_tokens: int
    """Tokens of KV each stream holds while it decodes (the configured context: the worst case)."""
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    """With both set, every request's prefill is paid for: the other streams stall meanwhile."""


@dataclass(frozen=True, kw_only=True)
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


@dataclass(frozen=True, kw_only=True)
class SpeedUnknown:
    """No estimate: a fact the model needs is not in the registry (never a made-up one)."""

    reason: str


class Served(Protocol):
    """How a placement serves its model, whatever its GPUs: what `ModelTerms` are made of
    (a `Placement` is one; so is the planner's per-model view of a recipe)."""

    @property
    def engine(self) -> Runtime: ...
    @property
    def weights_gb(self) -> float: ...
    @property
    def precision(self) -> WeightFormat: ...
    @property
    def non_expert_bytes_per_weight(self) -> float | None: ...
    @property
    def speculative(self) -> SpecDecode: ...
    @property
    def speculative_steps(self) -> int: ...
    @property
    def speculative_acceptance(self) -> float | None: ...


class ModelTerms:
    """What every estimate of one model served as `Served` at one `Workload` shares, whatever
    the GPU type and count: the engine's figures, the weights, state and FLOPs a step costs, and
    the speculation's yield; or what the registry lacks to estimate at all. The planner
    estimates several GPU types and counts of every model, all from one model's terms."""

    def __init__(self, model: Model, served: Served, facts: SpeedFacts | None, workload: Workload):
        p = served
        self.workload = workload
        engine = facts.engine(p.engine) if facts is not None else None
        split = model.expert_split
        self.no_engine = _no_engine(p, facts, engine)
        self.no_model_facts = _no_model_facts(model, split)
        self.estimable = engine is not None and self.no_model_facts is None
        if not self.estimable:
            return
        assert facts is not None and engine is not None and model.architecture is not None
        arch = self.arch = model.architecture
        shared, shared_bpw, experts, per_expert, expert_bpw = _weights(model, p, split)
        self.layer_split = p.engine in LAYER_SPLIT_ENGINES
        self.links = facts.links
        self.precision = p.precision
        self.bandwidth_efficiency = engine.bandwidth_efficiency
        self.compute_efficiency = engine.compute_efficiency
        self.overhead_s = (engine.step_overhead_us + engine.layer_overhead_us * arch.layers) / 1e6
        assert model.parameters is not None
        self.two_active = 2 * model.parameters.active
        self.shared_weight_bytes = shared * shared_bpw
        self.state_bytes = 2 * (arch.state_bytes_per_sequence or 0)
        layers = arch.full_attention_layers or arch.layers
        # A step's attention FLOPs per token and cached position (scores and weighted values).
        self.attention = 2 * layers * arch.attention_heads * _attention_width(arch)
        self.experts, self.used = experts, arch.experts_per_token or 0
        self.moe_layers = arch.moe_layers
        # One routed expert's bytes in one layer (0 for a dense model).
        self.expert_bytes = per_expert * expert_bpw if experts else 0.0
        self.hidden = arch.hidden_size or 0
        self.collectives = COLLECTIVES_PER_LAYER * arch.layers
        self.counts: dict[tuple[int, int, bool], _OnEachGpu] = {}
        """Each GPU's side of a step made so far, by count, KV element bytes and expert split:
        the same on every GPU type."""
        self._speculation(p, facts)

    def _speculation(self, p: Served, facts: SpeedFacts) -> None:
        """`K` drafts and a verify of `K + 1` per step where the placement drafts and the
        registry states the method's acceptance; one token per plain step otherwise."""
        self.spec_steps, self.spec_note = 0, None
        if p.speculative is SpecDecode.NONE or p.speculative_steps == 0:
            return
        assumption = facts.speculative.get(p.speculative)
        if assumption is None:
            self.spec_note = (
                f"no acceptance assumption for {p.speculative} in registry/speed.yaml: estimated"
                " without speculative decoding"
            )
            return
        k = self.spec_steps = p.speculative_steps
        accept = p.speculative_acceptance or assumption.token_acceptance
        self.draft_cost = k * assumption.draft_step_cost
        self.spec_tokens = accepted_tokens(accept, k)
        self.spec_note = (
            f"{p.speculative} drafting {k} tokens at {accept:.0%} acceptance each:"
            f" {self.spec_tokens:.2f} tokens per step"
        )

    def decode_rate(
        self, gpu: Gpu, count: int, kv_dtype_bytes: int, expert_parallel: bool
    ) -> float | SpeedUnknown:
        """Tokens per second a stream decodes on `count` x `gpu` (the placement's other inputs
        as given): all a floor asks of a placement, so nothing else of its estimate is made;
        or why there is no estimate."""
        found = self._on_each_gpu(gpu, count, kv_dtype_bytes, expert_parallel)
        if isinstance(found, SpeedUnknown):
            return found
        each, figures, link = found
        return each.timed(figures, link).tok_s_per_stream

    def decode(
        self, gpu: Gpu, count: int, kv_dtype_bytes: int, expert_parallel: bool
    ) -> Decode | SpeedUnknown:
        """The decode on `count` x `gpu` (the placement's other inputs as given), the rest of
        its estimate to follow (`Decode.estimate`); or why there is none."""
        found = self._on_each_gpu(gpu, count, kv_dtype_bytes, expert_parallel)
        if isinstance(found, SpeedUnknown):
            return found
        each, figures, link = found
        return Decode(each=each, gpu=figures, link=link, timed=each.timed(figures, link))

    def _on_each_gpu(
        self, gpu: Gpu, count: int, kv_dtype_bytes: int, expert_parallel: bool
    ) -> tuple[_OnEachGpu, GpuSpeed, LinkSpeed | None] | SpeedUnknown:
        """What each GPU of the placement does, the GPU's figures and its link; or why there
        is no estimate."""
        figures = gpu.speed
        link = None
        if count > 1 and figures is not None and self.estimable:
            link = self.links.get(figures.interconnect.kind)
            if link is None:
                return SpeedUnknown(
                    reason="registry/speed.yaml has no link figures for "
                    f"{figures.interconnect.kind}"
                )
        if figures is None or not self.estimable:
            return SpeedUnknown(reason=self._missing(gpu))
        each = self.counts.get((count, kv_dtype_bytes, expert_parallel))
        if each is None:
            each = self.counts[count, kv_dtype_bytes, expert_parallel] = _OnEachGpu(
                self, count, kv_dtype_bytes, expert_parallel
            )
        return each, figures, link

    def at(
        self,
        gpu: Gpu,
        count: int,
        kv_dtype_bytes: int,
        expert_parallel: bool,
        usd_per_hour: float | None,
    ) -> SpeedEstimate | SpeedUnknown:
        """The estimate on `count` x `gpu` (the placement's other inputs as given)."""
        decode = self.decode(gpu, count, kv_dtype_bytes, expert_parallel)
        return decode if isinstance(decode, SpeedUnknown) else decode.estimate(usd_per_hour)

    def _missing(self, gpu: Gpu) -> str:
        """The first fact the registry lacks to estimate on `gpu`: the engine's figures, the
        GPU's datasheet figures, then the model's."""
        if self.no_engine is not None:
            return self.no_engine
        if gpu.speed is None:
            return f"registry/gpus.yaml has no speed facts for {gpu.name}"
        assert self.no_model_facts is not None
        return self.no_model_facts


@dataclass(frozen=True, kw_only=True)
class Demand:
    """What each GPU does in one forward step."""

    read_bytes: float
    flops: float
    sent_bytes: float
    """What one link hop sends."""


@dataclass(frozen=True, kw_only=True)
class Timed:
    """The workload's decode on one GPU type."""

    step_s: float
    """One decode step of every stream (with speculation: its drafts and the verify)."""
    tokens_per_step: float
    """The tokens a stream gets per step."""
    compute_bound: bool
    """Compute rather than memory bounds the step."""
    prefill_s: float | None
    """A request's prefill, where the workload states request lengths."""
    tok_s_per_stream: float
    """The tokens per second a stream decodes."""


@dataclass(frozen=True, kw_only=True)
class Rates:
    """What a step's demand is timed at on one GPU type."""

    bandwidth_bytes_s: float
    """The GPU's memory bandwidth."""
    bandwidth_efficiency: float
    """The engine's share of the memory bandwidth."""
    flops_s: float
    """The engine's tensor FLOP/s."""
    collective_latency_s: float
    """A collective's latency (0 on one GPU)."""
    link_bytes_s: float
    """What a link carries per second (0 on one GPU)."""
    overhead_s: float
    """The engine's fixed overhead per step."""


class _OnEachGpu:
    """What each GPU of `count` reads, computes and sends in a step, whatever the GPU type:
    one model's side of its estimates at one count, KV precision and expert split, shared by
    every GPU type estimated at them, with the steps its workload's decode takes (a decode
    step, a speculative verify, a request's prefill). Never changed once made."""

    def __init__(self, terms: ModelTerms, count: int, kv_dtype_bytes: int, expert_parallel: bool):
        self.terms, self.count, self.expert_parallel = terms, count, expert_parallel
        # Under a layer split the GPUs read in turn, so a step reads at one GPU's pace.
        parallel = self.parallel = 1 if terms.layer_split else count
        self.shared_bytes = terms.shared_weight_bytes / parallel
        self.kv_per_token = kv_bytes_per_token(terms.arch, parallel, kv_dtype_bytes)
        self.state_share = terms.state_bytes / parallel
        # Whether a step crosses links between the pod's GPUs, and how often: a layer split
        # hands the activations on at each boundary between consecutive GPUs; tensor or
        # expert parallelism runs its collectives, a ring all-reduce having each GPU send
        # 2 (n - 1) / n of the activations.
        self.links = count > 1
        self.hops = count - 1 if terms.layer_split else terms.collectives
        self.ring_share = 2 * (count - 1) / count
        # The workload's steps: every stream's decode step, with speculation the verify of
        # its drafts, and where the stack states lengths a request's prefill.
        load = terms.workload
        streams, context, k = load.concurrency, load.context_tokens, terms.spec_steps
        self.decode_demand = self.step(streams, streams, context)
        self.verify_demand = self.step(streams * (k + 1), streams, context) if k else None
        prompt = load.prompt_tokens
        self.prefill_demand = (
            self.step(prompt, 1, prompt / 2) if prompt and load.output_tokens else None
        )

    def step(self, tokens: int, streams: int, context: float) -> Demand:
        """Per GPU in a step of `tokens` tokens, `streams` streams each holding `context`
        tokens of KV: the bytes it reads, the FLOPs it computes and the bytes one link hop
        sends."""
        t = self.terms
        weight_bytes = self.shared_bytes + (self._expert_bytes(tokens) if t.experts else 0.0)
        kv_bytes = streams * (context * self.kv_per_token + self.state_share)
        # Scores and weighted values over `context` cached positions, for every token.
        attention = t.attention * context * tokens
        flops = (t.two_active * tokens + attention) / self.parallel
        activations = tokens * t.hidden * ACTIVATION_BYTES
        sent = activations if t.layer_split else self.ring_share * activations
        return Demand(read_bytes=weight_bytes + kv_bytes, flops=flops, sent_bytes=sent)

    def timed(self, gpu: GpuSpeed, link: LinkSpeed | None) -> Timed:
        """The workload's decode on `gpu` (`link` between its GPUs): a decode step of every
        stream (with speculation: its drafts and the verify), and the tokens a stream gets per
        second: between its steps, where the stack states request lengths, it waits out the
        other streams' prefills once per request."""
        t = self.terms
        rates = _rates(t, gpu, link)
        step, compute_bound = self.seconds(self.decode_demand, rates)
        per_step = 1.0
        if self.verify_demand is not None:
            verify, compute_bound = self.seconds(self.verify_demand, rates)
            step, per_step = verify + t.draft_cost * step, t.spec_tokens
        prefill = None
        if self.prefill_demand is None:
            rate = per_step / step
        else:
            load = t.workload
            output = load.output_tokens
            assert output is not None
            prefill = self.seconds(self.prefill_demand, rates)[0]
            rate = 1 / (step / per_step + (load.concurrency - 1) * prefill / output)
        return Timed(
            step_s=step,
            tokens_per_step=per_step,
            compute_bound=compute_bound,
            prefill_s=prefill,
            tok_s_per_stream=rate,
        )

    def seconds(self, demand: Demand, rates: Rates) -> tuple[float, bool]:
        """Seconds one forward step of `demand` takes at a GPU type's `rates`; and whether
        compute rather than memory bounds it."""
        memory_s = demand.read_bytes / rates.bandwidth_bytes_s
        memory_s /= rates.bandwidth_efficiency
        compute_s = demand.flops / rates.flops_s
        links = 0.0
        if self.links:
            links = self.hops * (
                rates.collective_latency_s + demand.sent_bytes / rates.link_bytes_s
            )
        compute_bound = compute_s > memory_s
        return (compute_s if compute_bound else memory_s) + rates.overhead_s + links, compute_bound

    def _expert_bytes(self, tokens: int) -> float:
        """Expert bytes the busiest GPU reads in a step: a tensor-parallel share of every
        touched expert, or under expert parallelism the touched experts it owns (the most
        loaded GPU)."""
        t, parallel = self.terms, self.parallel
        touched = distinct_experts(t.experts, t.used, tokens)
        if self.expert_parallel and parallel > 1:
            owned = t.experts / parallel
            mean = touched / parallel
            busiest = min(owned, touched, mean + math.sqrt(2 * mean * math.log(parallel)))
            return t.moe_layers * busiest * t.expert_bytes
        return t.moe_layers * touched * t.expert_bytes / parallel


def _rates(terms: ModelTerms, gpu: GpuSpeed, link: LinkSpeed | None) -> Rates:
    compute_rate = _tensor_tflops(gpu, terms.precision) * 1e12 * terms.compute_efficiency
    latency = link_bandwidth = 0.0
    if link is not None:
        latency = link.collective_latency_us / 1e6
        link_bandwidth = gpu.interconnect.gb_s_per_direction * GB * link.link_efficiency
    return Rates(
        bandwidth_bytes_s=gpu.memory_bandwidth_gb_s * GB,
        bandwidth_efficiency=terms.bandwidth_efficiency,
        flops_s=compute_rate,
        collective_latency_s=latency,
        link_bytes_s=link_bandwidth,
        overhead_s=terms.overhead_s,
    )


@dataclass(frozen=True, kw_only=True)
class Decode:
    """One placement's decode on its GPU type (`_OnEachGpu.timed`), and the rest of its
    estimate (prefill, the aggregate, a token's cost) worked out when asked (`estimate`), for
    the placements taken or reported."""

    each: _OnEachGpu
    gpu: GpuSpeed
    link: LinkSpeed | None
    timed: Timed
    estimates: dict[float | None, SpeedEstimate] = field(
        default_factory=dict, compare=False, repr=False
    )
    """The whole estimates made so far, by the placement's USD per hour."""

    @property
    def decode_tok_s_per_stream(self) -> float:
        return self.timed.tok_s_per_stream

    def estimate(self, usd_per_hour: float | None) -> SpeedEstimate:
        """The whole estimate, at the placement's `usd_per_hour`, made once per price."""
        made = self.estimates.get(usd_per_hour)
        if made is not None:
            return made
        each, timed = self.each, self.timed
        t = each.terms
        load = t.workload
        streams, step, per_step = load.concurrency, timed.step_s, timed.tokens_per_step
        notes: tuple[str, ...] = () if t.spec_note is None else (t.spec_note,)
        if t.layer_split and each.count > 1:
            notes += (f"layer split: the {each.count} GPUs take turns on every token",)
        prompt = load.prompt_tokens or PREFILL_REFERENCE_TOKENS
        prefill = timed.prefill_s
        if prefill is None:
            demand = each.step(prompt, 1, prompt / 2)
            prefill = each.seconds(demand, _rates(t, self.gpu, self.link))[0]
        per_stream = timed.tok_s_per_stream
        output = load.output_tokens
        if load.prompt_tokens and output:
            aggregate = streams * output / (output * step / per_step + streams * prefill)
        else:
            aggregate = streams * per_stream
        estimate = self.estimates[usd_per_hour] = SpeedEstimate(
            decode_tok_s_per_stream=per_stream,
            decode_tok_s_aggregate=aggregate,
            prefill_tok_s=prompt / prefill,
            decode_step_ms=step * 1000,
            bound="compute" if timed.compute_bound else "memory",
            usd_per_million_output_tokens=usd_per_million_tokens(usd_per_hour, aggregate),
            assumptions=notes,
        )
        return estimate


def estimate_speed(
    model: Model, placement: Placement, workload: Workload, facts: SpeedFacts | None
) -> SpeedEstimate | SpeedUnknown:
    """The decode and prefill speed of `model` on `placement` under `workload`."""
    p = placement
    terms = ModelTerms(model, p, facts, workload)
    return terms.at(p.gpu, p.gpu_count, p.kv_dtype_bytes, p.expert_parallel, p.usd_per_hour)


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


def _no_engine(p: Served, facts: SpeedFacts | None, engine: EngineFigures | None) -> str | None:
    if facts is None:
        return "registry/speed.yaml is missing: no engine figures to estimate with"
    if engine is None:
        return f"registry/speed.yaml has no figures for {p.engine} (no token speed to model)"
    return None


def _no_model_facts(model: Model, split: ExpertSplit | None) -> str | None:
    arch, params = model.architecture, model.parameters
    if arch is None or params is None:
        return f"registry/models.yaml lacks {model.id}'s architecture or parameter counts"
    if arch.hidden_size is None:
        return f"registry/models.yaml lacks {model.id}'s architecture.hidden_size"
    if arch.moe and split is None:
        return (
            f"registry/models.yaml lacks {model.id}'s expert structure (experts,"
            " experts_per_token, moe_intermediate_size)"
        )
    return None


def _weights(
    model: Model, p: Served, split: ExpertSplit | None
) -> tuple[float, float, int, float, float]:
    """The weights every token reads (attention, dense MLPs, shared experts, the LM head) and
    their bytes per weight; the routed experts per layer, one's weights and its bytes per weight."""
    arch, params = model.architecture, model.parameters
    assert arch is not None and params is not None
    weight_bytes = p.weights_gb * GB
    uniform = weight_bytes / params.total
    if split is None:
        return params.active, uniform, 0, 0.0, uniform
    assert arch.experts and arch.experts_per_token
    shared_bpw = expert_bpw = uniform
    if p.non_expert_bytes_per_weight is not None:
        stored_shared = max(params.total - split.routed, split.shared)
        shared_bpw = p.non_expert_bytes_per_weight
        expert_bpw = max(weight_bytes - stored_shared * shared_bpw, 0.0) / split.routed
    return split.shared, shared_bpw, arch.experts, split.per_expert, expert_bpw


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
