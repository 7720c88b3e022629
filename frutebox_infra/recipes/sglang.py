"""SGLang: the primary engine for safetensors/FP8 checkpoints, with RadixAttention reuse."""

from __future__ import annotations

import shlex
from collections.abc import Hashable
from dataclasses import replace

from frutebox_infra.catalog.schema import Gpu, Image, Model, Runtime
from frutebox_infra.estimates.fit import MemoryModel
from frutebox_infra.recipes.base import (
    COUNTERS_ENV,
    PodSpec,
    Serving,
    counters_dir,
    engine_address,
)
from frutebox_infra.recipes.tensor_parallel import TensorParallelRecipe


class SGLang(TensorParallelRecipe):
    runtime = Runtime.SGLANG
    entrypoint = "none"
    memory_model = MemoryModel.SGLANG

    def kv_dtype_bytes(self, gpu: Gpu) -> int:
        return 1  # launched with --kv-cache-dtype fp8_e4m3

    def launch_variant(self, gpu: Gpu, count: int) -> Hashable:
        # The count sets its parallelism.
        return count

    def render_pod(
        self, model: Model, image: Image, gpu: Gpu, count: int, serving: Serving, seeded: bool
    ) -> PodSpec:
        assert model.source is not None and model.source.hf_repo is not None
        # The image has no ENTRYPOINT and no server CMD: args is the whole command line, so
        # it can start the gateway first and exec the server on loopback behind it.
        host, port = engine_address(image.port, serving.gateway)
        words = ["python3", "-m", "sglang.launch_server", "--model-path", model.source.hf_repo]
        if model.source.revision:
            words += ["--revision", model.source.revision]
        words += [
            "--host", host, "--port", str(port),
            "--tp-size", str(count),
        ]  # fmt: skip
        if self.expert_parallel(model, count):
            words += ["--ep-size", str(count)]
        words += ["--context-length", str(serving.context_tokens)]
        parser = model.reasoning_parser.get(self.runtime)
        if parser:
            words += ["--reasoning-parser", parser]
        words += [
            "--max-running-requests", str(serving.concurrency),
            # e4m3, not e5m2: FlashAttention 3 (SGLang's Hopper default) reads only e4m3
            # KV, and e5m2 would drop it for the slower Triton backend.
            "--kv-cache-dtype", "fp8_e4m3",
            "--enable-hierarchical-cache",
        ]  # fmt: skip
        words += serving.spec_flags
        env = None
        if serving.metrics:
            # sglang:generation_tokens_total on /metrics, kept in prometheus_client's
            # multiprocess files in a directory of the volume, so the count carries on across
            # restarts: SGLang keeps a directory set in the environment (it only makes a
            # temporary directory inside it) and fails at start when it is missing, so the
            # launch makes it first.
            words.append("--enable-metrics")
            env = {COUNTERS_ENV: counters_dir(model.id, self.runtime, image)}
        script = f"exec {shlex.join(words)}"
        if env is not None:
            script = f'mkdir -p "${COUNTERS_ENV}"\n{script}'
        spec = self.pod_spec(model, image, words, seeded=seeded, env=env)
        if serving.gateway is not None:
            return self.behind_gateway(
                spec, serving.gateway, script, python="python3", seeded=seeded
            )
        if env is None:
            return spec  # the server's own command line
        whole = ("bash", "-c", f"set -eo pipefail\n{script}")
        return replace(spec, args=shlex.join(whole), words=whole)
