"""Ollama: simple single-file models pulled by their pinned library tag."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import replace

from frutebox_infra.catalog.schema import Gpu, Image, Model, Runtime, WeightFormat
from frutebox_infra.estimates.fit import MemoryModel
from frutebox_infra.recipes.base import (
    PodSpec,
    Recipe,
    ServeOptions,
    Serving,
    Sharing,
    slots_problem,
    static_slots,
)

DEFAULT_OLLAMA_CONTEXT = 4096
"""Ollama's own default context, used only when the registry records none."""


class Ollama(Recipe):
    runtime = Runtime.OLLAMA
    entrypoint = "fixed-binary"
    default_concurrency = 4
    # Each loaded model keeps its own runner (weights + KV for OLLAMA_NUM_PARALLEL slots);
    # with OLLAMA_MAX_LOADED_MODELS >= members and OLLAMA_KEEP_ALIVE=-1 they stay resident.
    sharing = Sharing.SUM
    # The server answers at once and loads a model into VRAM on its first request.
    loads_weights_at_start = False

    def missing(self, model: Model) -> str | None:
        if model.weights.vram_gb is None:
            return "the registry lacks weights.vram_gb for its Ollama tag"
        return None

    def serving(self, model: Model, options: ServeOptions) -> Serving:
        weights = model.weights
        assert weights.vram_gb is not None
        context = options.context_tokens or model.context or DEFAULT_OLLAMA_CONTEXT
        return Serving(
            weights_vram_gb=weights.vram_gb,
            weights_disk_gb=weights.disk_gb,
            context_tokens=context,
            concurrency=static_slots(self, options),
            require_fp8=False,
            memory_model=MemoryModel.LLAMACPP,
            static_allocation=True,
        )

    def options_problem(self, model: Model, options: ServeOptions) -> tuple[str, str] | None:
        return super().options_problem(model, options) or slots_problem(self, model, options)

    def weight_format(self, model: Model) -> WeightFormat:
        return "gguf"

    def gated_pull(self, model: Model) -> bool:
        return False  # the Ollama library serves its own copy; no Hugging Face token involved

    def launch_variant(self, gpu: Gpu, count: int) -> Hashable:
        # The pod is the same on every GPU type and count.
        return ()

    def render_pod(
        self, model: Model, image: Image, gpu: Gpu, count: int, serving: Serving, seeded: bool
    ) -> PodSpec:
        assert model.source is not None and model.source.ollama_tag is not None
        # ENTRYPOINT is /bin/ollama, so args can only name a sub-command: the server. The
        # model is pulled through the server's /api/pull once it answers (the deploy step).
        env = {
            "OLLAMA_HOST": f"0.0.0.0:{image.port}",
            "OLLAMA_CONTEXT_LENGTH": str(serving.context_tokens),
            "OLLAMA_NUM_PARALLEL": str(serving.concurrency),
            "OLLAMA_KEEP_ALIVE": "-1",
        }
        # One model store per pod on the shared volume: a co-located pod deletes the models it
        # no longer serves, and in a store shared with other pods that would delete a model
        # that moved to another pod mid-deploy. A pod's store is named after its anchor model,
        # which a shared pod keeps (it takes its anchor's env).
        store = image.cache_env.get("OLLAMA_MODELS")
        if store is not None:
            env["OLLAMA_MODELS"] = f"{store.rstrip('/')}/{model.id}"
        pulls = (model.source.ollama_tag,)
        return self.pod_spec(model, image, ("serve",), seeded=seeded, env=env, ollama_pulls=pulls)

    def shared_pod(self, pods: Sequence[PodSpec]) -> PodSpec:
        # Members agree on context and slots (the planner groups only those), so the anchor's
        # server settings hold for all; every member stays loaded, none is evicted.
        anchor = pods[0]
        env = {**anchor.env, "OLLAMA_MAX_LOADED_MODELS": str(len(pods))}
        tags = tuple(tag for pod in pods for tag in pod.ollama_pulls)
        return replace(anchor, env=env, ollama_pulls=tags)
