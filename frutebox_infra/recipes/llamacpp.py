"""llama.cpp server: the only engine for GGUF-only quants such as the sharded Kimi files."""

from __future__ import annotations

from collections.abc import Hashable

from frutebox_infra.catalog.schema import GgufSource, Gpu, Image, Model, Runtime, WeightFormat
from frutebox_infra.estimates.fit import MemoryModel
from frutebox_infra.recipes.base import (
    PodSpec,
    Recipe,
    ServeOptions,
    Serving,
    counters_dir,
    engine_address,
    slots_problem,
    static_slots,
)
from frutebox_infra.recipes.counts import CountsKeeper, keeper_port


class LlamaCpp(Recipe):
    runtime = Runtime.LLAMACPP
    entrypoint = "fixed-binary"
    # Its gateway starts from the start hook, which the image's Python reads off the volume.
    gateway_needs_seeding = True
    default_concurrency = 8
    # --offline as its variable: -hf REPO:QUANT then loads the snapshot refs/main names in
    # LLAMA_CACHE (the seeder writes it) instead of asking the Hub for the files.
    offline_env = {"LLAMA_ARG_OFFLINE": "1"}

    def missing(self, model: Model) -> str | None:
        gguf = _gguf(model)
        if gguf is None:
            return "the registry has no source.gguf (repo and quant) for it"
        if (gguf.vram_gb or model.weights.vram_gb) is None:
            return "the registry lacks the GGUF quant's VRAM size (source.gguf.vram_gb)"
        if (gguf.context or model.context) is None:
            return "the registry lacks a context length for it"
        return None

    def serving(self, model: Model, options: ServeOptions) -> Serving:
        gguf = _gguf(model)
        assert gguf is not None
        vram = gguf.vram_gb or model.weights.vram_gb
        context = options.context_tokens or gguf.context or model.context
        assert vram is not None and context is not None
        slots = static_slots(self, options)
        disk = gguf.disk_gb or model.weights.disk_gb
        return Serving(
            weights_vram_gb=vram,
            weights_disk_gb=disk,
            context_tokens=context,
            concurrency=slots,
            require_fp8=False,
            memory_model=MemoryModel.LLAMACPP,
            static_allocation=True,
            metrics=options.metrics,
        )

    def max_context(self, model: Model) -> int | None:
        gguf = _gguf(model)
        return (gguf.context if gguf else None) or model.context

    def options_problem(self, model: Model, options: ServeOptions) -> tuple[str, str] | None:
        return super().options_problem(model, options) or slots_problem(self, model, options)

    def weight_format(self, model: Model) -> WeightFormat:
        return "gguf"

    def non_expert_bytes_per_weight(self, model: Model) -> float | None:
        gguf = _gguf(model)  # the quant is served, not the checkpoint `weights` describes
        return gguf.non_expert_bytes_per_weight if gguf else None

    def gated_pull(self, model: Model) -> bool:
        return False  # GGUF re-publications are open repos

    def launch_variant(self, gpu: Gpu, count: int) -> Hashable:
        # The pod is the same on every GPU type and count.
        return ()

    def render_pod(
        self, model: Model, image: Image, gpu: Gpu, count: int, serving: Serving, seeded: bool
    ) -> PodSpec:
        gguf = _gguf(model)
        assert gguf is not None and image.dispatch is not None
        slots = serving.concurrency
        gateway = serving.gateway
        host, port = engine_address(image.port, gateway)
        # -c is the total KV size split across the slots (the cache is not unified when
        # --parallel is given), so every slot gets the model's full context only at slots x ctx.
        words = [
            "-hf",
            f"{gguf.repo}:{gguf.quant}",
            "--host",
            host,
            "--port",
            str(port),
            "-ngl",
            "999",
            "-c",
            str(slots * serving.context_tokens),
            "--parallel",
            str(slots),
            "--cont-batching",
            "--jinja",
        ]
        if serving.metrics:
            words.append("--metrics")  # llamacpp:tokens_predicted_total on /metrics
        dispatch = image.dispatch
        notes = self.pod_notes(model)
        if gateway is None:
            launch = [dispatch.server_word, *words]
            return self.pod_spec(model, image, launch, seeded=seeded, notes=notes)
        # The dispatcher starts the image's Python (on a program of its own, which never runs:
        # the hook execs the server in its place, with these words as its flags).
        launch = [dispatch.python_word, *words]
        # llama-server counts in its memory only, so a measured pod's hook execs the counts
        # keeper, which keeps them on the volume and answers the metrics route in its place.
        counts, path = None, gateway.routes.metrics_path
        if serving.metrics and path is not None:
            kept = counters_dir(model.id, self.runtime, image)
            counts = CountsKeeper(kind="prometheus", engine_port=port, read_path=path,
                                  port=keeper_port(image.port), path=path,
                                  directory=kept)  # fmt: skip
        spec = self.pod_spec(model, image, launch, seeded=seeded, notes=notes)
        return self.behind_hook(spec, gateway, seeded=seeded, execs=dispatch.server_path,
                                counts=counts)  # fmt: skip

    def image_problem(self, model: Model, image: Image) -> str | None:
        if image.dispatch is None:
            return (
                "needs an image whose ENTRYPOINT dispatches on its first word, but"
                f" registry/images.yaml gives {image.reference} no `dispatch`"
            )
        return super().image_problem(model, image)

    def pod_notes(self, model: Model) -> tuple[str, ...]:
        gguf = _gguf(model)
        if gguf is not None and gguf.revision:
            return (f"-hf takes no revision: {gguf.revision} documents what was tested",)
        return ()


def _gguf(model: Model) -> GgufSource | None:
    return model.source.gguf if model.source else None
