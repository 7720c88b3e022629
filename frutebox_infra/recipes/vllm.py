"""vLLM: the fallback for models that declare only vLLM (the EU models among them)."""

from __future__ import annotations

from frutebox_infra.fit import MemoryModel
from frutebox_infra.recipes.base import PodSpec, Recipe, ServeOptions, Serving, env_with_cache
from frutebox_infra.recipes.sglang import hf_weights_missing
from frutebox_infra.recipes.speculative import join_args, speculation
from frutebox_infra.recipes.tensor_parallel import tp_problem
from frutebox_infra.registry import Gpu, Image, Model, Runtime


class VLLM(Recipe):
    runtime = Runtime.VLLM
    default_concurrency = 16

    def missing(self, model: Model) -> str | None:
        return hf_weights_missing(model, "vllm")

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
            memory_model=MemoryModel.VLLM,
            speculative=spec.active,
            warnings=(spec.note,) if spec.note else (),
        )

    def count_problem(self, model: Model, count: int) -> str | None:
        return super().count_problem(model, count) or tp_problem(model, count)

    def kv_dtype_bytes(self, gpu: Gpu) -> int:
        # fp8 KV only where the tensor cores run it natively; Ampere keeps the bf16 cache.
        return 1 if gpu.fp8 else 2

    def pod(
        self, model: Model, image: Image, gpu: Gpu, count: int, options: ServeOptions
    ) -> PodSpec:
        serving = self.serving(model, options)
        assert model.source is not None and model.source.hf_repo is not None
        # The image's ENTRYPOINT is `vllm serve`, which takes the model as its first argument.
        words = [model.source.hf_repo]
        if model.source.revision:
            words += ["--revision", model.source.revision]
        words += [
            "--host",
            "0.0.0.0",
            "--port",
            str(image.port),
            "--tensor-parallel-size",
            str(count),
            "--max-model-len",
            str(serving.context_tokens),
            "--max-num-seqs",
            str(serving.concurrency),
        ]
        if self.kv_dtype_bytes(gpu) == 1:
            words += ["--kv-cache-dtype", "fp8"]
        if model.reasoning_parser:
            words += ["--reasoning-parser", model.reasoning_parser]
        words += model.engine_args.get(self.runtime, ())
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
