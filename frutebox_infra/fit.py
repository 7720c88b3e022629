"""Will a model run on a placement: weights + KV cache + engine reserve, per GPU."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from frutebox_infra.registry import Architecture, Gpu

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
VLLM_ACTIVATIONS_GIB_DENSE = 5.0
VLLM_ACTIVATIONS_GIB_MOE = 7.5
VLLM_NON_TORCH_GIB = 1.0
"""CUDA context, NCCL buffers and allocator slack outside torch's accounting."""
LLAMACPP_RESERVE_GIB_PER_GPU = 1.5
"""CUDA context plus llama.cpp's compute buffers, per device (the split is by layer)."""
SGLANG_EAGLE_RESERVE_MIB = 2048


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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

    @property
    def summary(self) -> str:
        if self.full_context_sequences is None:
            return "coarse-fit" if self.fits else "no fit (coarse)"
        return sequences_label(self.full_context_sequences, self.configured_sequences)


def sequences_label(held: float, configured: int) -> str:
    """`held/configured seq`, held floored to one decimal: never claims a sequence it lacks."""
    return f"{math.floor(held * 10) / 10:g}/{configured} seq"


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


def estimate(request: FitRequest, gpu: Gpu, count: int) -> Fit:
    """The fit of `request` on `count` x `gpu`; pure arithmetic, no I/O."""
    if request.engine is MemoryModel.DIFFUSION:
        return _diffusion(request, gpu, count)
    if request.architecture is None:
        return _coarse(request, gpu, count)
    if request.engine is MemoryModel.LLAMACPP:
        return _layer_split(request, request.architecture, gpu, count)
    return _tensor_parallel(request, request.architecture, gpu, count)


def _tensor_parallel(req: FitRequest, arch: Architecture, gpu: Gpu, tp: int) -> Fit:
    memory = gpu.memory_mib * MIB
    weights_per_gpu = req.weights_gb * GB / tp
    if req.engine is MemoryModel.SGLANG:
        fraction = sglang_static_fraction(gpu.memory_mib, tp, speculative=req.speculative)
        budget = memory * fraction
        pool = budget - weights_per_gpu
    else:
        activations = VLLM_ACTIVATIONS_GIB_MOE if arch.moe else VLLM_ACTIVATIONS_GIB_DENSE
        budget = memory * VLLM_GPU_MEMORY_UTILIZATION
        pool = budget - weights_per_gpu - (activations + VLLM_NON_TORCH_GIB) * GIB
    per_token = kv_bytes_per_token(arch, tp, req.kv_dtype_bytes)
    state = _state_per_rank(arch, tp)
    return _verdict(req, tp, weights_per_gpu, budget, per_token, pool, state)


def _layer_split(req: FitRequest, arch: Architecture, gpu: Gpu, count: int) -> Fit:
    """llama.cpp and Ollama split layers across GPUs: pools and caches add up across devices."""
    budget = count * (gpu.memory_mib * MIB - LLAMACPP_RESERVE_GIB_PER_GPU * GIB)
    weights = req.weights_gb * GB
    per_token = kv_bytes_per_token(arch, 1, req.kv_dtype_bytes)
    fit = _verdict(req, 1, weights, budget, per_token, budget - weights, _state_per_rank(arch, 1))
    return _per_gpu(fit, count)


def _verdict(
    req: FitRequest,
    tp: int,
    weights_per_gpu: float,
    budget: float,
    per_token: int,
    pool: float,
    state_per_sequence: int,
) -> Fit:
    per_sequence = per_token * req.context_tokens + state_per_sequence
    sequences = max(pool, 0.0) / per_sequence
    required = req.configured_sequences if req.static_allocation else req.min_sequences
    fits = sequences >= required
    # Whatever the engine keeps outside its KV pool (weights, and for vLLM activations) plus
    # the KV the required sequences take: the same test `fits` applies, stated in GB.
    needed = (budget - pool) + required * per_sequence
    reason = None
    if not fits:
        reason = (
            f"holds {sequences:.2f} full-context sequences of {req.context_tokens} tokens, "
            f"needs {required}: {needed / GB:.1f} GB needed vs {budget / GB:.1f} GB available"
            " per GPU"
        )
    return Fit(
        fits=fits,
        exact=True,
        gpu_count=tp,
        weights_gb_per_gpu=weights_per_gpu / GB,
        memory_budget_gb_per_gpu=budget / GB,
        kv_bytes_per_token=per_token,
        kv_tokens=max(0, int(pool // per_token)),
        full_context_sequences=sequences,
        configured_sequences=req.configured_sequences,
        needed_gb=needed / GB,
        available_gb=budget / GB,
        reason=reason,
    )


def _per_gpu(fit: Fit, count: int) -> Fit:
    """Restate a whole-pod layer-split estimate per GPU, as the report shows every engine."""
    return Fit(
        fits=fit.fits,
        exact=fit.exact,
        gpu_count=count,
        weights_gb_per_gpu=fit.weights_gb_per_gpu / count,
        memory_budget_gb_per_gpu=fit.memory_budget_gb_per_gpu / count,
        kv_bytes_per_token=fit.kv_bytes_per_token,
        kv_tokens=fit.kv_tokens,
        full_context_sequences=fit.full_context_sequences,
        configured_sequences=fit.configured_sequences,
        needed_gb=fit.needed_gb / count,
        available_gb=fit.available_gb / count,
        reason=fit.reason,
    )


def _state_per_rank(arch: Architecture, tp: int) -> int:
    if arch.attention != "hybrid" or arch.state_bytes_per_sequence is None:
        return 0
    return math.ceil(arch.state_bytes_per_sequence / tp)


def _coarse(req: FitRequest, gpu: Gpu, count: int) -> Fit:
    """Architecture unknown: fall back to the headroom rule and say the estimate is coarse."""
    available = count * gpu.memory_mib * MIB
    needed = req.weights_gb * GB * HEADROOM
    fits = needed <= available
    return Fit(
        fits=fits,
        exact=False,
        gpu_count=count,
        weights_gb_per_gpu=req.weights_gb / count,
        memory_budget_gb_per_gpu=available / count / GB,
        kv_bytes_per_token=None,
        kv_tokens=None,
        full_context_sequences=None,
        configured_sequences=req.configured_sequences,
        needed_gb=needed / count / GB,
        available_gb=available / count / GB,
        reason=None
        if fits
        else f"coarse rule: weights x {HEADROOM} = {needed / GB:.1f} GB exceeds"
        f" {available / GB:.1f} GB",
    )


def _diffusion(req: FitRequest, gpu: Gpu, count: int) -> Fit:
    """Diffusion pipelines run on one GPU; the registry's VRAM figure includes working memory."""
    available = gpu.memory_mib * MIB
    needed = req.weights_gb * GB
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
