"""vLLM: the fallback for models that declare only vLLM (the EU models among them)."""

from __future__ import annotations

from collections.abc import Hashable

from frutebox_infra.catalog.schema import Gpu, Image, Model, Runtime
from frutebox_infra.estimates.fit import VLLM_GPU_MEMORY_UTILIZATION, MemoryModel
from frutebox_infra.recipes.base import COUNTERS_ENV, PodSpec, Serving, counters_dir, engine_address
from frutebox_infra.recipes.gateway import ENGINE_CONFIG_DIR
from frutebox_infra.recipes.tensor_parallel import TensorParallelRecipe

ENGINE_CONFIG = f"{ENGINE_CONFIG_DIR}/vllm.yaml"
"""The config file (`vllm serve --config`) only the start hook writes, once the gateway serves:
vLLM reads it while parsing its arguments and exits there when it is missing (its
FlexibleArgumentParser.load_config_file re-raises the open error), before any weight is read."""

ENGINE_CONFIG_TEXT = "disable-fastapi-docs: true\n"
"""What the file says: a flag of the pinned vLLM (registry/engine_options/vllm.json) that also
takes the unguarded /docs and /openapi.json off the engine behind the gateway."""


class VLLM(TensorParallelRecipe):
    runtime = Runtime.VLLM
    entrypoint = "fixed-binary"
    gateway_needs_seeding = True
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
        # Behind the gateway it listens on loopback, and names the config file only the start
        # hook writes once the gateway serves.
        gateway = serving.gateway
        host, port = engine_address(image.port, gateway)
        words = [model.source.hf_repo]
        if model.source.revision:
            words += ["--revision", model.source.revision]
        if gateway is not None:
            words += ["--config", ENGINE_CONFIG]
        words += [
            "--host", host, "--port", str(port),
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
        kept = serving.metrics and seeded
        env = {COUNTERS_ENV: counters_dir(model.id, self.runtime, image)} if kept else None
        spec = self.pod_spec(model, image, words, seeded=seeded, env=env)
        if gateway is None:
            return spec
        return self.behind_hook(spec, gateway, seeded=seeded, engine_config=ENGINE_CONFIG,
                                engine_config_text=ENGINE_CONFIG_TEXT)  # fmt: skip
