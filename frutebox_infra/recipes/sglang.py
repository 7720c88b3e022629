"""SGLang: the primary engine for safetensors/FP8 checkpoints, with RadixAttention reuse."""

from __future__ import annotations

from frutebox_infra.fit import MemoryModel
from frutebox_infra.recipes.base import PodSpec, Recipe, ServeOptions, Serving, env_with_cache
from frutebox_infra.recipes.speculative import join_args, speculation
from frutebox_infra.recipes.tensor_parallel import tp_problem
from frutebox_infra.registry import Gpu, Image, Model, Runtime


class SGLang(Recipe):
    runtime = Runtime.SGLANG
    default_concurrency = 16

    def missing(self, model: Model) -> str | None:
        return hf_weights_missing(model, "sglang")

    def serving(self, model: Model, options: ServeOptions) -> Serving:
        spec = speculation(
            model,
            self.runtime,
            enabled=options.spec_decode_enabled,
            eagle3_head=options.eagle3_head,
        )
        assert model.weights.vram_gb is not None and model.context is not None
        return Serving(
            weights_vram_gb=model.weights.vram_gb,
            weights_disk_gb=model.weights.disk_gb,
            context_tokens=options.context_tokens or model.context,
            concurrency=options.concurrency or self.default_concurrency,
            require_fp8=model.weights.format == "fp8",
            memory_model=MemoryModel.SGLANG,
            speculative=spec.active,
            warnings=(spec.note,) if spec.note else (),
        )

    def count_problem(self, model: Model, count: int) -> str | None:
        return super().count_problem(model, count) or tp_problem(model, count)

    def kv_dtype_bytes(self, gpu: Gpu) -> int:
        return 1  # launched with --kv-cache-dtype fp8_e5m2

    def pod(
        self, model: Model, image: Image, gpu: Gpu, count: int, options: ServeOptions
    ) -> PodSpec:
        serving = self.serving(model, options)
        assert model.source is not None and model.source.hf_repo is not None
        words = ["python3", "-m", "sglang.launch_server", "--model-path", model.source.hf_repo]
        if model.source.revision:
            words += ["--revision", model.source.revision]
        words += [
            "--host",
            "0.0.0.0",
            "--port",
            str(image.port),
            "--tp",
            str(count),
            "--context-length",
            str(serving.context_tokens),
        ]
        if model.reasoning_parser:
            words += ["--reasoning-parser", model.reasoning_parser]
        words += [
            "--max-running-requests",
            str(serving.concurrency),
            "--kv-cache-dtype",
            "fp8_e5m2",
            "--enable-hierarchical-cache",
        ]
        spec = speculation(
            model,
            self.runtime,
            enabled=options.spec_decode_enabled,
            eagle3_head=options.eagle3_head,
        )
        words += spec.flags
        return PodSpec(
            image=image.reference,
            args=join_args(words),
            env=env_with_cache(image),
            port=image.port,
            health_path=image.health_path,
            secret_env=("HF_TOKEN",) if self.gated_pull(model) else (),
        )


def hf_weights_missing(model: Model, engine: str) -> str | None:
    """Safetensors engines need a Hugging Face repo, a known weight size and a context."""
    gaps = []
    if model.source is None or model.source.hf_repo is None:
        gaps.append("source.hf_repo")
    if model.weights.vram_gb is None:
        gaps.append("weights.vram_gb")
    if model.context is None:
        gaps.append("context")
    if not gaps:
        return None
    return f"the registry lacks {', '.join(gaps)} for serving it with {engine}"
