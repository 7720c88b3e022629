"""vLLM: the fallback for models that declare only vLLM (the EU models among them)."""

from __future__ import annotations

from collections.abc import Hashable

from frutebox_infra.catalog.schema import Gpu, Image, Model, Runtime
from frutebox_infra.estimates.fit import VLLM_GPU_MEMORY_UTILIZATION, MemoryModel
from frutebox_infra.recipes.base import COUNTERS_ENV, PodSpec, Serving, counters_dir
from frutebox_infra.recipes.tensor_parallel import TensorParallelRecipe


class VLLM(TensorParallelRecipe):
    runtime = Runtime.VLLM
    entrypoint = "fixed-binary"
    memory_model = MemoryModel.VLLM

    def kv_dtype_bytes(self, gpu: Gpu) -> int:
        # fp8 KV only where the tensor cores run it natively; Ampere keeps the bf16 cache.
        return 1 if gpu.fp8 else 2

    def launch_variant(self, gpu: Gpu, count: int) -> Hashable:
        # The count sets its parallelism, the GPU's FP8 its KV cache's precision.
        return count, gpu.fp8

    def render_pod(
        self, model: Model, image: Image, gpu: Gpu, count: int, serving: Serving, seeded: bool
    ) -> PodSpec:
        assert model.source is not None and model.source.hf_repo is not None
        # The image's ENTRYPOINT is `vllm serve`, which takes the model as its first argument.
        words = [model.source.hf_repo]
        if model.source.revision:
            words += ["--revision", model.source.revision]
        words += [
            "--host", "0.0.0.0", "--port", str(image.port),
            "--tensor-parallel-size", str(count),
        ]  # fmt: skip
        if self.expert_parallel(model, count):
            words += ["--enable-expert-parallel"]
        words += [
            "--max-model-len", str(serving.context_tokens),
            "--max-num-seqs", str(serving.concurrency),
            # Stated, not defaulted: the fit sizes the KV pool from this same cap.
            "--gpu-memory-utilization", f"{VLLM_GPU_MEMORY_UTILIZATION:g}",
        ]  # fmt: skip
        if self.kv_dtype_bytes(gpu) == 1:
            words += ["--kv-cache-dtype", "fp8"]
        parser = model.reasoning_parser.get(self.runtime)
        if parser:
            words += ["--reasoning-parser", parser]
        words += model.engine_args.get(self.runtime, ())
        words += serving.spec_flags
        # vLLM counts by default, in prometheus_client's multiprocess files where the
        # environment names a directory: one on the volume keeps the counters across restarts
        # (vLLM keeps a directory set so and never wipes it, vllm `v1/metrics/prometheus.py`).
        # It fails at start without it, and its fixed ENTRYPOINT runs no command of ours to
        # make it, so only a measured pod of seeded weights names it: the seeding pod makes it.
        env = {COUNTERS_ENV: counters_dir(model.id, self.runtime, image)}
        kept = serving.metrics and seeded
        return self.pod_spec(model, image, words, seeded=seeded, env=env if kept else None)
