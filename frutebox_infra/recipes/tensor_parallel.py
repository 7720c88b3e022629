"""Tensor-parallel engines (SGLang, vLLM): safetensors weights split head-wise across GPUs."""

from __future__ import annotations

from typing import ClassVar

from frutebox_infra.catalog.schema import Architecture, Model
from frutebox_infra.estimates.fit import MemoryModel
from frutebox_infra.recipes.base import Recipe, ServeOptions, Serving, is_power_of_two
from frutebox_infra.recipes.parallelism import sharding
from frutebox_infra.recipes.speculative import speculation


def tp_problem(model: Model, tp: int) -> str | None:
    """Why tensor-parallel degree `tp` cannot serve `model`, or None.

    The degree must be a power of two and divide the attention heads; GQA kv heads are
    either divided evenly or replicated whole (tp a multiple of the kv head count).
    """
    if not is_power_of_two(tp):
        return f"tensor parallelism {tp} is not a power of two"
    arch = model.architecture
    return None if arch is None else _heads_problem(arch, tp)


def _heads_problem(arch: Architecture, tp: int) -> str | None:
    """`tp_problem` of a power of two: the heads it must divide."""
    if arch.attention_heads % tp:
        return f"tensor parallelism {tp} does not divide {arch.attention_heads} attention heads"
    kv = arch.kv_heads
    if arch.attention != "mla" and kv is not None and kv % tp and tp % kv:
        return f"tensor parallelism {tp} neither divides nor is a multiple of {kv} kv heads"
    return None


class TensorParallelRecipe(Recipe):
    """What SGLang and vLLM share: a Hugging Face repo, TP = GPU count, speculative flags."""

    memory_model: ClassVar[MemoryModel]
    default_concurrency = 16
    # huggingface_hub then resolves the revision from the cache's refs/ and snapshots/ (the
    # seeder writes both) and never contacts the Hub; --revision stays, naming the snapshot.
    offline_env = {"HF_HUB_OFFLINE": "1"}

    def missing(self, model: Model) -> str | None:
        gaps = []
        if model.source is None or model.source.hf_repo is None:
            gaps.append("source.hf_repo")
        if model.weights.vram_gb is None:
            gaps.append("weights.vram_gb")
        if model.context is None:
            gaps.append("context")
        if not gaps:
            return None
        return f"the registry lacks {', '.join(gaps)} for serving it with {self.runtime}"

    def serving(self, model: Model, options: ServeOptions) -> Serving:
        spec = speculation(
            model,
            self.runtime,
            enabled=options.spec_decode_enabled,
            eagle3_head=options.eagle3_head,
        )
        weights = model.weights
        assert weights.vram_gb is not None and model.context is not None
        return Serving(
            weights_vram_gb=weights.vram_gb,
            weights_disk_gb=weights.disk_gb,
            context_tokens=options.context_tokens or model.context,
            concurrency=options.concurrency or self.default_concurrency,
            require_fp8=weights.format == "fp8",
            memory_model=self.memory_model,
            static_allocation=False,
            speculative=bool(spec.flags),
            spec_flags=spec.flags,
            warnings=(spec.note,) if spec.note else (),
            metrics=options.metrics,
        )

    def expert_parallel(self, model: Model, count: int) -> bool:
        return sharding(model, count).expert_parallel

    def count_problem(self, model: Model, count: int) -> str | None:
        return (
            super().count_problem(model, count)
            or tp_problem(model, count)
            or sharding(model, count).problem
        )
