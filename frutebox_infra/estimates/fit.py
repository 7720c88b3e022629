"""Will a model run on a placement: weights + KV cache + engine reserve, per GPU."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property, lru_cache

from frutebox_infra.catalog.schema import Architecture, Gpu

GB = 10**9
"""Weights are published in GB (10^9 bytes)."""
GIB = 2**30
MIB = 2**20
"""GPU memory is reported in MiB/GiB; the two units are never mixed without converting."""

HEADROOM = 1.15
"""The coarse rule used only when a model's architecture is unknown: weights x 1.15."""


class MemoryModel(StrEnum):
    """How an engine carves GPU memory; each engine names its own."""

    SGLANG = "sglang"
    VLLM = "vllm"
    LLAMACPP = "llamacpp"
    DIFFUSION = "diffusion"


VLLM_GPU_MEMORY_UTILIZATION = 0.9
"""vLLM's default --gpu-memory-utilization: the share of the card it ever uses."""
VLLM_ACTIVATIONS_GIB_DENSE = 5.0
VLLM_ACTIVATIONS_GIB_MOE = 7.5
"""Peak activations vLLM's profiling reserves inside its cap (MoE routing buffers are larger)."""
VLLM_NON_TORCH_GIB = 1.0
"""CUDA context, NCCL buffers and allocator slack outside torch's accounting."""
LLAMACPP_RESERVE_GIB_PER_GPU = 1.5
"""CUDA context plus llama.cpp's compute buffers, per device (the split is by layer)."""
SGLANG_EAGLE_RESERVE_MIB = 2048
SGLANG_STARTUP_USED_GIB = 1.0
"""What is already taken when SGLang measures free memory (CUDA context, NCCL): its static
fraction applies to the memory free at start, not to the card's total."""
SGLANG_MAMBA_FULL_MEMORY_RATIO = 0.9
"""SGLang's default --mamba-full-memory-ratio: for hybrid (linear-attention) models the pool
is split recurrent state : full-attention KV = 0.9 : 1."""


@dataclass(frozen=True, kw_only=True)
class FitRequest:
    """What must fit: weights at the served precision and the serving targets."""

    engine: MemoryModel
    weights_gb: float
    context_tokens: int
    configured_sequences: int
    """Concurrency the engine is launched with (SGLang max-running-requests, llama.cpp slots)."""
    min_sequences: int
    """Full-context sequences the placement must hold to count as fitting."""
    kv_dtype_bytes: int
    architecture: Architecture | None
    static_allocation: bool = False
    """True when the engine allocates every configured slot at start (llama.cpp, Ollama)."""
    speculative: bool = False

    @property
    def required_sequences(self) -> int:
        """Full-context sequences a placement must hold: every configured slot where the
        engine allocates them all at start, else the floor."""
        return self.configured_sequences if self.static_allocation else self.min_sequences

    @cached_property
    def unsharded_cache_bytes(self) -> tuple[int, int]:
        """KV bytes per token and recurrent-state bytes per sequence of the whole model: what
        a layer split divides by layers, the same for every GPU type and count."""
        arch = self.architecture
        assert arch is not None
        return kv_bytes_per_token(arch, 1, self.kv_dtype_bytes), _state_per_rank(arch, 1)

    shares: dict[int, CountShare] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )
    """Per GPU count, what every GPU type shares at that count (`count_share`), kept as
    worked out."""


@dataclass(frozen=True, kw_only=True)
class Fit:
    """The estimate for one placement. Byte counts are per GPU unless named `total`."""

    fits: bool
    exact: bool
    gpu_count: int
    weights_gb_per_gpu: float
    memory_budget_gb_per_gpu: float
    kv_bytes_per_token: int | None
    kv_tokens: int | None
    full_context_sequences: float | None
    configured_sequences: int
    needed_gb: float
    available_gb: float
    reason: str | None = None
    layers_on_worst_gpu: int | None = None
    """Layer-split engines: layers on the most loaded GPU (its figures are the ones shown)."""


def kv_bytes_per_token(arch: Architecture, tp: int, dtype_bytes: int) -> int:
    """KV bytes one token costs on one tensor-parallel rank.

    GQA shards kv heads across ranks but copies them when there are fewer heads than ranks;
    MLA keeps one compressed latent per layer that every rank holds whole; hybrid models
    cache only their full-attention layers per token.
    """
    if arch.attention == "mla":
        assert arch.kv_lora_rank is not None and arch.qk_rope_head_dim is not None
        return arch.layers * (arch.kv_lora_rank + arch.qk_rope_head_dim) * dtype_bytes
    assert arch.kv_heads is not None and arch.head_dim is not None
    layers = arch.full_attention_layers if arch.attention == "hybrid" else arch.layers
    assert layers is not None
    kv_heads_per_rank = max(1, arch.kv_heads // tp)
    return 2 * layers * kv_heads_per_rank * arch.head_dim * dtype_bytes


def sglang_static_fraction(gpu_memory_mib: int, tp: int, *, speculative: bool = False) -> float:
    """SGLang's default --mem-fraction-static, derived as its server_args does (MiB units).

    Reserve = 512 + 1.5 x chunked-prefill + 2 x cuda-graph batch + tp/8 GiB, at least 10 GiB
    on cards above 60 GiB; chunked prefill and graph batch grow with the card.
    """
    if gpu_memory_mib < 20 * 1024:
        chunked, graph_bs = 2048, (8 if tp < 4 else 80)
    elif gpu_memory_mib < 35 * 1024:
        chunked, graph_bs = 2048, (24 if tp < 4 else 80)
    elif gpu_memory_mib < 60 * 1024:
        chunked, graph_bs = 4096, (32 if tp < 4 else 160)
    elif gpu_memory_mib < 160 * 1024:
        chunked, graph_bs = 8192, (256 if tp < 4 else 512)
    else:
        chunked, graph_bs = 16384, 512
    reserved = 512 + max(chunked, 2048) * 1.5 + graph_bs * 2 + tp / 8 * 1024
    if gpu_memory_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    if speculative:
        reserved += SGLANG_EAGLE_RESERVE_MIB
    return round((gpu_memory_mib - reserved) / gpu_memory_mib, 3)


def engine_cap_bytes(req: FitRequest, gpu: Gpu, count: int) -> float:
    """Per GPU, the memory the engine lets weights and KV cache use, by its own rule.

    SGLang: its static fraction of the memory free at start. vLLM: its utilization cap minus
    the activations and non-torch memory it reserves (the MoE figure when the architecture is
    unknown: never claim room that may not be there). llama.cpp/Ollama: the card minus the
    per-device context and compute buffers. Diffusion: the card (its VRAM figure includes its
    working memory).
    """
    return _engine_cap(req.engine, _cap_moe(req), req.speculative, gpu.memory_mib, count)


def _cap_moe(req: FitRequest) -> bool:
    """Whether vLLM reserves MoE activations: the larger figure when the architecture is
    unknown (the other engines' caps ignore it)."""
    return req.architecture.moe if req.architecture is not None else True


@lru_cache(maxsize=4096)
def _engine_cap(
    engine: MemoryModel, moe: bool, speculative: bool, memory_mib: int, count: int
) -> float:
    """`engine_cap_bytes` from the facts it depends on: the engine's rule and the card's
    memory, which every model planned on that card shares (so each is worked out once)."""
    memory = memory_mib * MIB
    if engine is MemoryModel.SGLANG:
        fraction = sglang_static_fraction(memory_mib, count, speculative=speculative)
        return fraction * (memory - SGLANG_STARTUP_USED_GIB * GIB)
    if engine is MemoryModel.VLLM:
        activations = VLLM_ACTIVATIONS_GIB_MOE if moe else VLLM_ACTIVATIONS_GIB_DENSE
        return memory * VLLM_GPU_MEMORY_UTILIZATION - (activations + VLLM_NON_TORCH_GIB) * GIB
    if engine is MemoryModel.LLAMACPP:
        return memory - LLAMACPP_RESERVE_GIB_PER_GPU * GIB
    return float(memory)


def estimate(request: FitRequest, gpu: Gpu, count: int) -> Fit:
    """The fit of `request` on `count` x `gpu`; pure arithmetic, no I/O."""
    if request.engine is MemoryModel.DIFFUSION:
        return _diffusion(request, gpu, count)
    arch = request.architecture
    if arch is None:
        return _coarse(request, gpu, count)
    if request.engine is MemoryModel.LLAMACPP:
        return _layer_split(request, arch, gpu, count)
    return _verdict(request, count, _tensor_parallel(request, arch, gpu, count))


def fewest_gpus(request: FitRequest, gpu: Gpu) -> int:
    """A count of this GPU type below which nothing fits, whatever the engine: every engine
    keeps within the card's memory and every GPU holds at least 1/count of the weights (a
    layer split's most loaded one more), so the weights over the card's memory is a floor.
    Rounded down (`int` of a positive figure), so that float rounding never excludes a count
    that fits."""
    return int(request.weights_gb * GB / (gpu.memory_mib * MIB)) or 1


def fits(request: FitRequest, gpu: Gpu, count: int) -> bool:
    """`estimate(request, gpu, count).fits`, without building the estimate or its reason:
    what a search over GPU counts asks of every count it passes. The same arithmetic as the
    estimate, its per-count and per-card parts each worked out once."""
    arch = request.architecture
    if request.engine is MemoryModel.DIFFUSION:
        needed, available = _diffusion_sizes(request, gpu)
        return count == 1 and needed <= available
    if arch is None:
        needed, available = _coarse_sizes(request, gpu, count)
        return needed <= available
    share = count_share(request, arch, count)
    pool = (
        _engine_cap(request.engine, _cap_moe(request), request.speculative, gpu.memory_mib, count)
        - share.weights_per_gpu
    )
    return max(pool, 0.0) / share.per_sequence >= request.required_sequences


def cap_key(req: FitRequest) -> tuple[MemoryModel, bool, bool]:
    """What the engine's cap on a card depends on besides the card and the count."""
    return req.engine, _cap_moe(req), req.speculative


def card_caps(key: tuple[MemoryModel, bool, bool], memory_mib: int, top: int) -> tuple[float, ...]:
    """`engine_cap_bytes` at every count from 1 to `top` on a card (index = count; 0 unused)."""
    return (0.0, *(_engine_cap(*key, memory_mib, count) for count in range(1, top + 1)))


@dataclass(frozen=True, kw_only=True)
class CountShare:
    """Per GPU at one count, in bytes, what is the same on every GPU type: the weights and
    cache of a rank (a layer split's most loaded GPU), for the search and the estimate alike
    (kept in `FitRequest.shares`)."""

    weights_per_gpu: float
    per_sequence: float
    """Pool bytes one full-context sequence uses up (KV, state, or their share)."""
    per_token: int
    kv_divisor: float
    """The pool over this is the KV cache's part of it."""
    worst_layers: int | None = None
    """Layer-split engines: the layers on the most loaded GPU."""


def count_share(req: FitRequest, arch: Architecture, count: int) -> CountShare:
    """`req`'s share per GPU at `count`, worked out on first use and kept in `req.shares`."""
    shares = req.shares
    share = shares.get(count)
    if share is None:
        share = shares[count] = share_rule(req)(req, arch, count)
    return share


def share_rule(req: FitRequest) -> Callable[[FitRequest, Architecture, int], CountShare]:
    """How `req`'s engine splits a model over GPUs (`count_share` without its cache): by
    layers (llama.cpp, Ollama) or by heads."""
    return _layer_share if req.engine is MemoryModel.LLAMACPP else _tp_share


@dataclass(frozen=True, kw_only=True)
class _Sizes:
    """Per GPU, in bytes: what an exact estimate weighs before its verdict."""

    weights_per_gpu: float
    budget: float
    per_token: int
    pool: float
    per_sequence: float
    """Pool bytes one full-context sequence uses up (KV, state, or their share)."""
    kv_pool: float


def _tp_share(req: FitRequest, arch: Architecture, tp: int) -> CountShare:
    weights_per_gpu = req.weights_gb * GB / tp
    per_token = kv_bytes_per_token(arch, tp, req.kv_dtype_bytes)
    kv_sequence = per_token * req.context_tokens
    if arch.attention != "hybrid":  # no recurrent state (`_state_per_rank`): most models
        return CountShare(
            weights_per_gpu=weights_per_gpu,
            per_sequence=kv_sequence,
            per_token=per_token,
            kv_divisor=1.0,
        )
    state = _state_per_rank(arch, tp)
    if req.engine is MemoryModel.SGLANG and state:
        # SGLang gives the recurrent state a fixed share of the pool and KV the rest, so a
        # sequence costs whichever share it runs out of first, scaled to the whole pool.
        r = SGLANG_MAMBA_FULL_MEMORY_RATIO
        per_sequence = max(kv_sequence * (1 + r), state * (1 + r) / r)
        return CountShare(
            weights_per_gpu=weights_per_gpu,
            per_sequence=per_sequence,
            per_token=per_token,
            kv_divisor=1 + r,
        )
    return CountShare(
        weights_per_gpu=weights_per_gpu,
        per_sequence=kv_sequence + state,
        per_token=per_token,
        kv_divisor=1.0,
    )


def _tensor_parallel(req: FitRequest, arch: Architecture, gpu: Gpu, tp: int) -> _Sizes:
    share = count_share(req, arch, tp)
    weights_per_gpu = share.weights_per_gpu
    pool = engine_cap_bytes(req, gpu, tp) - weights_per_gpu
    # The budget shown is what the engine sizes from: SGLang's fraction of free memory,
    # vLLM's utilization cap (its activation reserve then comes out of the pool).
    if req.engine is MemoryModel.VLLM:
        budget = gpu.memory_mib * MIB * VLLM_GPU_MEMORY_UTILIZATION
    else:
        budget = pool + weights_per_gpu
    kv_pool = pool / share.kv_divisor
    return _Sizes(
        weights_per_gpu=weights_per_gpu,
        budget=budget,
        per_token=share.per_token,
        pool=pool,
        per_sequence=share.per_sequence,
        kv_pool=kv_pool,
    )


def _layer_share(req: FitRequest, arch: Architecture, count: int) -> CountShare:
    """llama.cpp and Ollama place whole layers per GPU, each layer's KV with it.

    The most loaded GPU holds ceil(layers / count) layers; it alone decides the fit, since
    nothing spills to another card.
    """
    worst_layers = math.ceil(arch.layers / count)
    share = worst_layers / arch.layers
    weights = req.weights_gb * GB * share
    per_token_all, state_all = req.unsharded_cache_bytes
    per_token = math.ceil(per_token_all * share)
    per_sequence = per_token * req.context_tokens + math.ceil(state_all * share)
    return CountShare(
        weights_per_gpu=weights,
        per_sequence=per_sequence,
        per_token=per_token,
        kv_divisor=1.0,
        worst_layers=worst_layers,
    )


def _layer_sizes(req: FitRequest, arch: Architecture, gpu: Gpu, count: int) -> tuple[_Sizes, int]:
    """The most loaded GPU's sizes and its number of layers."""
    share = count_share(req, arch, count)
    budget = engine_cap_bytes(req, gpu, count)
    pool = budget - share.weights_per_gpu
    sizes = _Sizes(
        weights_per_gpu=share.weights_per_gpu,
        budget=budget,
        per_token=share.per_token,
        pool=pool,
        per_sequence=share.per_sequence,
        kv_pool=pool,
    )
    assert share.worst_layers is not None
    return sizes, share.worst_layers


def _layer_split(req: FitRequest, arch: Architecture, gpu: Gpu, count: int) -> Fit:
    sizes, worst_layers = _layer_sizes(req, arch, gpu, count)
    sequences = max(sizes.pool, 0.0) / sizes.per_sequence
    if sequences >= req.required_sequences:
        return _verdict(req, count, sizes, layers_on_worst_gpu=worst_layers)
    needed = (sizes.budget - sizes.pool) + req.required_sequences * sizes.per_sequence
    reason = (
        f"the most loaded of {count} GPUs holds {worst_layers} of {arch.layers} layers"
        f" ({sizes.weights_per_gpu / GB:.1f} GB of weights) and room for"
        f" {sequences or 0.0:.2f} of the {req.required_sequences} full-context sequences"
        f" it needs: {needed / GB:.1f} GB needed vs {sizes.budget / GB:.1f} GB on that GPU"
    )
    return _verdict(req, count, sizes, layers_on_worst_gpu=worst_layers, reason=reason)


def _verdict(
    req: FitRequest,
    gpu_count: int,
    sizes: _Sizes,
    *,
    layers_on_worst_gpu: int | None = None,
    reason: str | None = None,
) -> Fit:
    """The estimate from its sizes; `reason` replaces the generic one when it does not fit."""
    budget, pool, per_sequence = sizes.budget, sizes.pool, sizes.per_sequence
    sequences = max(pool, 0.0) / per_sequence
    required = req.required_sequences
    fits = sequences >= required
    # Whatever the engine keeps outside its KV pool (weights, and for vLLM activations) plus
    # the pool the required sequences take: the same test `fits` applies, stated in GB.
    needed = (budget - pool) + required * per_sequence
    if not fits and reason is None:
        reason = (
            f"holds {sequences:.2f} full-context sequences of {req.context_tokens} tokens, "
            f"needs {required}: {needed / GB:.1f} GB needed vs {budget / GB:.1f} GB available"
            " per GPU"
        )
    return Fit(
        fits=fits,
        exact=True,
        gpu_count=gpu_count,
        weights_gb_per_gpu=sizes.weights_per_gpu / GB,
        memory_budget_gb_per_gpu=budget / GB,
        kv_bytes_per_token=sizes.per_token,
        kv_tokens=max(0, int(sizes.kv_pool // sizes.per_token)),
        full_context_sequences=sequences,
        configured_sequences=req.configured_sequences,
        needed_gb=needed / GB,
        available_gb=budget / GB,
        reason=None if fits else reason,
        layers_on_worst_gpu=layers_on_worst_gpu,
    )


def _state_per_rank(arch: Architecture, tp: int) -> int:
    if arch.attention != "hybrid" or arch.state_bytes_per_sequence is None:
        return 0
    return math.ceil(arch.state_bytes_per_sequence / tp)


def _coarse_sizes(req: FitRequest, gpu: Gpu, count: int) -> tuple[float, float]:
    """Bytes per GPU: weights x 1.15 needed, and what the engine uses of the card."""
    return req.weights_gb * GB / count * HEADROOM, engine_cap_bytes(req, gpu, count)


def _coarse(req: FitRequest, gpu: Gpu, count: int) -> Fit:
    """Architecture unknown: weights per GPU x 1.15 against the engine's own cap, said coarse."""
    needed, available = _coarse_sizes(req, gpu, count)
    fits = needed <= available
    return Fit(
        fits=fits,
        exact=False,
        gpu_count=count,
        weights_gb_per_gpu=req.weights_gb / count,
        memory_budget_gb_per_gpu=available / GB,
        kv_bytes_per_token=None,
        kv_tokens=None,
        full_context_sequences=None,
        configured_sequences=req.configured_sequences,
        needed_gb=needed / GB,
        available_gb=available / GB,
        reason=None
        if fits
        else f"coarse rule (architecture unknown): weights per GPU x {HEADROOM} ="
        f" {needed / GB:.1f} GB exceeds the {available / GB:.1f} GB the engine uses of one GPU",
    )


def _diffusion_sizes(req: FitRequest, gpu: Gpu) -> tuple[float, float]:
    """Bytes on the one GPU: the weights (working memory included), and the card."""
    return req.weights_gb * GB, gpu.memory_mib * MIB


def _diffusion(req: FitRequest, gpu: Gpu, count: int) -> Fit:
    """Diffusion pipelines run on one GPU; the registry's VRAM figure includes working memory."""
    needed, available = _diffusion_sizes(req, gpu)
    fits = count == 1 and needed <= available
    return Fit(
        fits=fits,
        exact=False,
        gpu_count=count,
        weights_gb_per_gpu=req.weights_gb,
        memory_budget_gb_per_gpu=available / GB,
        kv_bytes_per_token=None,
        kv_tokens=None,
        full_context_sequences=None,
        configured_sequences=1,
        needed_gb=needed / GB,
        available_gb=available / GB,
        reason=None
        if fits
        else f"needs {needed / GB:.1f} GB of VRAM on one GPU, {available / GB:.1f} GB available",
    )
