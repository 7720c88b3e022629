"""Ollama: simple single-file models pulled by their pinned library tag, run from Ollama's
release archive in an image whose command we control, behind the gateway."""

from __future__ import annotations

import shlex
from collections.abc import Hashable, Sequence
from dataclasses import replace

from frutebox_infra.catalog.schema import Gpu, Image, Model, Runtime, WeightFormat
from frutebox_infra.estimates.fit import MemoryModel
from frutebox_infra.recipes.archives import ArchiveInstall, fetches
from frutebox_infra.recipes.base import (
    PodSpec,
    Recipe,
    ServeOptions,
    Serving,
    Sharing,
    counters_dir,
    engine_address,
    slots_problem,
    static_slots,
)
from frutebox_infra.recipes.counts import CountsKeeper, keeper_port, keeper_words

DEFAULT_OLLAMA_CONTEXT = 4096
"""Ollama's own default context, used only when the registry records none."""

OLLAMA_HOME = "/tmp/frutebox-ollama"
"""Where the release archive is unpacked at every start (the container disk): bin/ollama and
the runners it finds beside it in lib/ollama."""
PROGRAM = f"{OLLAMA_HOME}/bin/ollama"

COUNTED_ROUTES = ("/api/generate", "/api/chat", "/v1/chat/completions", "/v1/completions")
"""Ollama's routes whose answers say how much they generated: the native ones' final object
carries eval_count and eval_duration, the OpenAI-style ones' usage.completion_tokens (a stream's
only when its client asks, `stream_options.include_usage`) (ollama `api/types.go` Metrics,
`openai/openai.go`)."""

PULLS_ENV = "FRUTEBOX_OLLAMA_PULLS"
"""The tags the pod's launch makes sure its store holds before its server answers: the
gateway refuses /api/pull, so no client of ours can pull through it."""


def launch_script(install: ArchiveInstall, counts: CountsKeeper | None = None) -> str:
    """Unpack the checked release, then, through a first server on the pod's own address
    (loopback behind the gateway), pull what the store lacks and remove what the pod no longer
    serves (a disarmed member of a shared pod: the store is the pod's own), stop it, and exec
    the server (under the counts keeper, with `counts`). A tag already in the store (seeded,
    or pulled by an earlier pod) is not fetched again; a pull that fails exits 1 before the
    server answers."""
    program = shlex.quote(f"{install.home}/bin/ollama")
    keeper = "" if counts is None else f"{keeper_words(counts, python='python3')} "
    return "\n".join(
        [
            install.line(python="python3"),
            f"{program} serve & first=$!",
            f"until {program} list >/dev/null 2>&1; do"
            ' kill -0 "$first" 2>/dev/null || exit 1; sleep 1; done',
            'keep=" "',
            f"for tag in ${PULLS_ENV}; do"
            f' {program} show "$tag" >/dev/null 2>&1 || {program} pull "$tag"'
            ' || { kill "$first"; exit 1; }',
            '  case "$tag" in *:*) keep="$keep$tag " ;; *) keep="$keep$tag:latest " ;; esac; done',
            f"for tag in $({program} list | tail -n +2 | cut -d' ' -f1); do"
            f' case "$keep" in *" $tag "*) ;; *) {program} rm "$tag" || true ;; esac; done',
            'kill "$first"; wait "$first" || true',
            f"exec {keeper}{program} serve",
        ]
    )


class Ollama(Recipe):
    runtime = Runtime.OLLAMA
    entrypoint = "none"
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
            metrics=options.metrics,
        )

    def options_problem(self, model: Model, options: ServeOptions) -> tuple[str, str] | None:
        return super().options_problem(model, options) or slots_problem(self, model, options)

    def weight_format(self, model: Model) -> WeightFormat:
        return "gguf"

    def gated_pull(self, model: Model) -> bool:
        return False  # the Ollama library serves its own copy; no Hugging Face token involved

    def image_problem(self, model: Model, image: Image) -> str | None:
        wrong_entrypoint = super().image_problem(model, image)
        if wrong_entrypoint is not None:
            return wrong_entrypoint
        if image.engine_archive is None or image.engine_version is None:
            return (
                f"needs Ollama's release archive to install, but {image.reference} has no"
                " engine_archive and engine_version in registry/images.yaml"
            )
        return None

    def launch_variant(self, gpu: Gpu, count: int) -> Hashable:
        # The pod is the same on every GPU type and count.
        return ()

    def render_pod(
        self, model: Model, image: Image, gpu: Gpu, count: int, serving: Serving, seeded: bool
    ) -> PodSpec:
        assert model.source is not None and model.source.ollama_tag is not None
        assert image.engine_archive is not None and image.engine_version is not None
        # No ENTRYPOINT: args is the whole command. It unpacks the checked Ollama release,
        # pulls what the store lacks on the pod itself, then execs the server: on loopback
        # behind the gateway, which refuses /api/pull to everyone.
        gateway = serving.gateway
        host, port = engine_address(image.port, gateway)
        # Ollama keeps no counters at all: a measured pod behind the gateway runs the server
        # under the counts keeper, which counts what the answers it passes on carry.
        counts = None
        if serving.metrics and gateway is not None:
            kept = counters_dir(model.id, self.runtime, image)
            counts = CountsKeeper(kind="ollama-answers", engine_port=port, read_path="",
                                  port=keeper_port(image.port), proxies=COUNTED_ROUTES,
                                  directory=kept)  # fmt: skip
        install = ArchiveInstall(
            archive=image.engine_archive, version=f"ollama-{image.engine_version}",
            home=OLLAMA_HOME, size_gb=image.volume_install_gb, fetch=fetches(seeded=seeded),
        )  # fmt: skip
        script = launch_script(install, counts)
        env = {
            "OLLAMA_HOST": f"{host}:{port}",
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
        env[PULLS_ENV] = " ".join(pulls)
        words = ("bash", "-c", f"set -eo pipefail\n{script}")
        spec = self.pod_spec(model, image, words, seeded=seeded, env=env, ollama_pulls=pulls)
        spec = replace(spec, archives=(install.kept_archive,))
        if gateway is None:
            return spec
        return self.behind_gateway(spec, gateway, script, python="python3", seeded=seeded,
                                   counts=counts)  # fmt: skip

    def shared_pod(self, pods: Sequence[PodSpec]) -> PodSpec:
        # Members agree on context and slots (the planner groups only those), so the anchor's
        # server settings hold for all; every member stays loaded, none is evicted. The launch
        # makes sure the store holds every member's tag before the server answers.
        anchor = pods[0]
        tags = tuple(tag for pod in pods for tag in pod.ollama_pulls)
        env = {**anchor.env, "OLLAMA_MAX_LOADED_MODELS": str(len(pods)), PULLS_ENV: " ".join(tags)}
        return replace(anchor, env=env, ollama_pulls=tags)
