"""What every engine recipe provides: the rules a placement must meet and the pod it runs."""

from __future__ import annotations

import re
import shlex
from abc import ABC, abstractmethod
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import cached_property, lru_cache
from typing import ClassVar

from frutebox_infra.catalog.schema import Gpu, Image, Model, Runtime, WeightFormat
from frutebox_infra.estimates.fit import MemoryModel
from frutebox_infra.recipes.archives import KeptArchive, fetches
from frutebox_infra.recipes.counts import CountsKeeper
from frutebox_infra.recipes.gateway import (
    KEY_ENV,
    LOOPBACK,
    GatewaySetup,
    StartHook,
    engine_port,
    gateway_env,
    gateway_start,
    hook_env,
    start_hook,
)

VOLUME_PATH = "/workspace"
"""Where every pod mounts the stack's network volume; engine caches live below it."""
COUNTERS_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus_client's multiprocess directory: each process keeps its metric values in
mmapped `<type>_<pid>.db` files there, summed across files when `/metrics` is read, so
counters written there outlive the process (prometheus_client `values.py`,
`multiprocess.py`). SGLang and vLLM keep a directory set here rather than make a temporary
one of their own (sglang `srt/utils/common.py` set_prometheus_multiproc_dir, vllm
`v1/metrics/prometheus.py` setup_multiprocess_prometheus)."""
COUNTERS_ROOT = f"{VOLUME_PATH}/frutebox/counters"
"""Below it, one directory per model and engine release whose counters outlive restarts."""


def counters_dir(model_id: str, runtime: Runtime, image: Image) -> str:
    """Where a model's engine keeps its counters on the volume: one directory per model, engine
    and release (a new release starts afresh; a restart, a PATCH or a new pod of the same
    release carries on the same counters)."""
    release = re.sub(r"[^A-Za-z0-9._-]", "-", image.tag or "untagged")
    return f"{COUNTERS_ROOT}/{model_id}/{runtime}-{release}"


class Sharing(StrEnum):
    """How one server of an engine holds several models, which decides a shared pod's fit.

    SUM: every member stays loaded at once (Ollama keeps each model's runner, weights and KV
    slots resident), so the members' needs add up under one engine reserve. LARGEST: the server
    swaps checkpoints in and out of VRAM on demand (ComfyUI's model management frees loaded
    models before loading another), so only the largest member must fit.
    """

    SUM = "sum"
    LARGEST = "largest"


@dataclass(frozen=True, kw_only=True)
class ServeOptions:
    """Per-model serving targets after the stack's overrides; engine-independent."""

    context_tokens: int | None = None
    concurrency: int | None = None
    min_sequences: int = 1
    min_sequences_pinned: bool = False
    """True when the model's own override set min_sequences, not the stack-wide default."""
    hf_token_configured: bool = False
    spec_decode_enabled: bool = True
    eagle3_head: str | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    """The request lengths the speed estimate assumes (both or neither)."""
    metrics: bool = False
    """Launch the engine with its token counters on (the stack's measureUsage)."""


@dataclass(frozen=True, kw_only=True)
class PodSpec:
    """The engine-specific part of a RunPod v2 pod body for one placement."""

    image: str
    args: str
    env: Mapping[str, str]
    port: int
    health_path: str
    secret_env: tuple[str, ...] = ()
    """Pod env vars the deploy step fills with the Hugging Face token, never stored here."""
    serving_key_env: tuple[str, ...] = ()
    """Pod env vars the deploy step fills with the stack's serving key (the gateway's), never
    stored here; empty: the pod runs no gateway."""
    ollama_pulls: tuple[str, ...] = ()
    """Ollama tags the deploy step pulls through the server (several on a shared pod)."""
    notes: tuple[str, ...] = ()
    expected_files: tuple[str, ...] = ()
    """`kind/name` files the server must list (ComfyUI's GET /models/<kind>) before the pod
    counts as healthy: a server that answers without its weights serves nothing."""
    words: tuple[str, ...] = field(default=(), compare=False, repr=False)
    """The words `args` joins, as the recipe gave them (empty: not known): the launch check
    reads these rather than splitting `args` again, which would give them back."""
    start_hook: StartHook | None = None
    """The gateway's start hook the image's Python runs (an image whose ENTRYPOINT is the
    engine); the seeding CPU pod puts it on the volume before the pod starts. None: the pod's
    args start the gateway themselves, or it runs none."""
    archives: tuple[KeptArchive, ...] = ()
    """The release archives its launch checks on the volume before the engine starts (the
    gateway's, an engine's): the seeding CPU pod places them for a seeded pod."""

    @property
    def ports(self) -> list[str]:
        return [f"{self.port}/http"]

    @property
    def hook_source(self) -> str:
        """The start hook's source, which reads some of the pod's variables ("": none)."""
        return self.start_hook.text if self.start_hook is not None else ""

    @property
    def hook_execs(self) -> str | None:
        """The server the start hook execs in its interpreter's place, if it does."""
        return self.start_hook.execs if self.start_hook is not None else None


@dataclass(frozen=True, kw_only=True)
class Serving:
    """How a model is served by one engine, independent of the placement."""

    weights_vram_gb: float
    weights_disk_gb: float | None
    context_tokens: int
    concurrency: int
    require_fp8: bool
    memory_model: MemoryModel
    static_allocation: bool = False
    speculative: bool = False
    spec_flags: tuple[str, ...] = ()
    """The engine flags of the speculative decoding that `speculative` says is on."""
    warnings: tuple[str, ...] = field(default=())
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    """The request lengths the stack states for its speed estimate (both or neither)."""
    metrics: bool = False
    """The engine's token counters are switched on at launch (where a flag does that)."""
    gateway: GatewaySetup | None = None
    """The gateway its pods start in front of the engine (None: the registry has no gateway
    release or no routes for the engine, and the pod serves the engine itself, open)."""

    @property
    def token_context(self) -> bool:
        """Diffusion pipelines have no token context; their `context_tokens` is a placeholder."""
        return self.memory_model is not MemoryModel.DIFFUSION

    @cached_property
    def rendered_pods(self) -> RenderedPods:
        """The pods `Recipe.pod` rendered for placements served this way (one model's, in a
        plan): they differ in a few values at most, so each variant is rendered once."""
        return RenderedPods()


class RenderedPods:
    """The pods of one recipe, model and image by `Recipe.launch_variant`, apart for pods that
    read seeded weights; held by a `Serving`, so they last as long as the model's plan, and
    made again for another model."""

    def __init__(self) -> None:
        self.recipe: Recipe | None = None
        self.model: Model | None = None
        self.image: Image | None = None
        self.pods: dict[Hashable, PodSpec] = {}
        self.seeded_pods: dict[Hashable, PodSpec] = {}

    def of(
        self, recipe: Recipe, model: Model, image: Image, seeded: bool
    ) -> dict[Hashable, PodSpec]:
        """The pods rendered for `recipe`, `model` and `image` (the same objects), seeded or
        not, by variant."""
        if self.recipe is not recipe or self.model is not model or self.image is not image:
            self.recipe, self.model, self.image = recipe, model, image
            self.pods, self.seeded_pods = {}, {}
        return self.seeded_pods if seeded else self.pods


class Recipe(ABC):
    """One serving engine. A runtime is servable exactly when a Recipe subclass exists for it."""

    runtime: ClassVar[Runtime]
    default_concurrency: ClassVar[int]
    entrypoint: ClassVar[str]
    """How the recipe's `args` reach the process; must match the image's registry entry."""
    sharing: ClassVar[Sharing | None] = None
    """How one server serves several models, or None where one pod serves one model."""
    loads_weights_at_start: ClassVar[bool] = True
    """The server reads every weight before it answers its health check; an engine that
    loads a model on its first request (Ollama, ComfyUI) bills no read before serving."""
    gateway_needs_seeding: ClassVar[bool] = False
    """Its gateway starts from a hook the seeding CPU pod puts on the volume (nothing of the
    pod's own can put it there): an unseeded pod of it cannot be planned."""
    offline_env: ClassVar[Mapping[str, str]] = {}
    """What makes the engine load only what is already on the volume once a CPU pod seeded
    it, so a GPU never bills a download; variables the pinned image reads (the launch check
    holds them to registry/engine_options/ like any other). Empty: the engine needs none
    (Ollama's pull and ComfyUI's fetch skip what is there)."""

    @abstractmethod
    def missing(self, model: Model) -> str | None:
        """Why the registry lacks what this engine needs for `model`, or None."""

    @abstractmethod
    def serving(self, model: Model, options: ServeOptions) -> Serving:
        """Placement-independent serving facts; call only when `missing` is None."""

    def max_context(self, model: Model) -> int | None:
        """The longest context this engine serves `model` with: the registry's `context`."""
        return model.context

    def options_problem(self, model: Model, options: ServeOptions) -> tuple[str, str] | None:
        """Why this engine cannot honour the stack's overrides for `model`: (what, fix)."""
        asked = options.context_tokens
        if asked is None:
            return None  # the registry's context: nothing to refuse
        limit = self.max_context(model)
        if limit is not None and asked > limit:
            return (
                f"overrides.{model.id}.context asks for {asked} tokens, above the {limit}"
                f" tokens {model.id} is served with at most (registry/models.yaml `context`)",
                f"set frutebox-infra:overrides.{model.id}.context to {limit} or less",
            )
        return None

    def count_problem(self, model: Model, count: int) -> str | None:
        """Why `count` GPUs cannot serve `model` with this engine, or None."""
        if count < model.min_gpus:
            return f"below the model's minimum of {model.min_gpus} GPUs"
        return None

    def allowed_counts(self, model: Model, counts: Sequence[int]) -> tuple[int, ...]:
        """The `counts` without a `count_problem`, in their order: what a search may try."""
        return tuple(count for count in counts if self.count_problem(model, count) is None)

    def kv_dtype_bytes(self, gpu: Gpu) -> int:
        """Bytes per cached KV element as this engine is launched on `gpu`."""
        return 2

    def weight_format(self, model: Model) -> WeightFormat:
        """The precision the engine holds the weights at: the checkpoint's own."""
        return model.weights.format

    def non_expert_bytes_per_weight(self, model: Model) -> float | None:
        """Bytes of a MoE's shared weight where the weights served keep them at another
        precision than the experts; None: one precision throughout."""
        return model.weights.non_expert_bytes_per_weight

    def expert_parallel(self, model: Model, count: int) -> bool:
        """Whether `count` GPUs give each GPU whole experts rather than a slice of each."""
        return False

    def image_problem(self, model: Model, image: Image) -> str | None:
        """Why the pinned image cannot run `model` (e.g. too old an engine), or None."""
        if image.entrypoint != self.entrypoint:
            return (
                f"needs an image whose ENTRYPOINT is '{self.entrypoint}' (its args are built"
                f" for that), but registry/images.yaml says {image.reference} is"
                f" '{image.entrypoint}'"
            )
        return None

    def gated_pull(self, model: Model) -> bool:
        """Does this engine fetch the weights from a gated Hugging Face repo?"""
        return model.source is not None and model.source.gated

    def pod_spec(
        self,
        model: Model,
        image: Image,
        words: Sequence[str],
        *,
        seeded: bool,
        args: str | None = None,
        env: Mapping[str, str] | None = None,
        ollama_pulls: tuple[str, ...] = (),
        notes: tuple[str, ...] = (),
        expected_files: tuple[str, ...] = (),
    ) -> PodSpec:
        """A pod of this engine's image running `words`: caches on the volume, the token only
        where gated. RunPod takes one args string: the words joined by `shlex.join`, so that
        shell-style splitting restores them (`args`, where the recipe has them joined already).
        A `seeded` pod reads the weights a CPU pod put on the volume: offline (`offline_env`),
        and without the token an offline engine never sends; rendered so at once, not copied
        from the pod that would download them."""
        env = env_with_cache(image, env)
        offline = self.offline_env if seeded else None
        if offline:
            env.update(offline)
            secret_env: tuple[str, ...] = ()
        else:
            secret_env = ("HF_TOKEN",) if self.gated_pull(model) else ()
        return PodSpec(
            image=image.reference,
            args=shlex.join(words) if args is None else args,
            env=env,
            port=image.port,
            health_path=image.health_path,
            secret_env=secret_env,
            ollama_pulls=ollama_pulls,
            notes=notes,
            expected_files=expected_files,
            words=tuple(words),
        )

    def behind_gateway(
        self,
        spec: PodSpec,
        gateway: GatewaySetup,
        script: str,
        *,
        python: str,
        seeded: bool,
        counts: CountsKeeper | None = None,
    ) -> PodSpec:
        """`spec` with its command made `script` preceded by the gateway's start: the gateway
        on the published port, the key filled by the deploy step, the release checked on
        every start; with `counts`, the route to the counts keeper `script` runs. A `seeded`
        pod's seeding CPU pod places the release first, so its launch only checks it; an
        unseeded pod fetches it when the volume does not hold it yet (the first such pod of a
        volume bills those few seconds): `fetches` says why."""
        lines = gateway_start(gateway, python=python, fetch=fetches(seeded=seeded))
        whole = "\n".join(["set -eo pipefail", *lines, script])
        words = ("bash", "-c", whole)
        return replace(
            spec,
            args=shlex.join(words),
            env={**spec.env, **gateway_env(gateway, spec.port, counts=counts)},
            serving_key_env=(KEY_ENV,),
            words=words,
            archives=(gateway.kept_archive, *spec.archives),
        )

    def behind_hook(
        self,
        spec: PodSpec,
        gateway: GatewaySetup,
        *,
        seeded: bool,
        engine_config: str | None = None,
        engine_config_text: str = "",
        execs: str | None = None,
        counts: CountsKeeper | None = None,
    ) -> PodSpec:
        """`spec` (the engine's own flags, bound to loopback) with the gateway started by a
        start hook in the image's Python (`start_hook`: it then writes `engine_config`, which
        the flags name, or execs the server `execs`, or runs it as its child while it keeps
        its `counts`): the hook's directory on PYTHONPATH, the gateway's configuration, the
        key filled by the deploy step. A `seeded` pod's hook only checks the release its
        seeding CPU pod placed (`fetches` says why)."""
        hook = start_hook(gateway, engine_config=engine_config,
                          engine_config_text=engine_config_text, execs=execs, counts=counts,
                          fetch=fetches(seeded=seeded))  # fmt: skip
        routed = gateway_env(gateway, spec.port, counts=counts)
        return replace(
            spec,
            env={**spec.env, **routed, **hook_env(hook)},
            serving_key_env=(KEY_ENV,),
            start_hook=hook,
            archives=(gateway.kept_archive, *spec.archives),
        )

    def pod_notes(self, model: Model) -> tuple[str, ...]:
        """The `notes` of every pod of `model`, known without rendering one: the planner warns
        with the taken pod's notes before (and whether or not) it renders that pod."""
        return ()

    def pod(
        self,
        model: Model,
        image: Image,
        gpu: Gpu,
        count: int,
        serving: Serving,
        seeded: bool = False,
    ) -> PodSpec:
        """The pod for `count` x `gpu`, reading seeded weights or not: rendered once per
        `launch_variant` of the model's placements, and the same object for every placement
        of that variant."""
        rendered = serving.rendered_pods.of(self, model, image, seeded)
        variant = self.launch_variant(gpu, count)
        pod = rendered.get(variant)
        if pod is None:
            pod = rendered[variant] = self.render_pod(model, image, gpu, count, serving, seeded)
        return pod

    def launch_variant(self, gpu: Gpu, count: int) -> Hashable:
        """Everything of a placement that `render_pod` reads: placements of one model with
        the same variant launch the same pod. Unless a recipe says less, the whole placement."""
        return gpu.id, count

    @abstractmethod
    def render_pod(
        self, model: Model, image: Image, gpu: Gpu, count: int, serving: Serving, seeded: bool
    ) -> PodSpec:
        """The pod for `count` x `gpu`: flags such as tensor parallelism depend on the count;
        `seeded`: it reads weights a CPU pod already put on the volume (`pod_spec`)."""

    def shared_pod(self, pods: Sequence[PodSpec]) -> PodSpec:
        """One pod serving every member, from the members' own pods on the shared GPU (the
        anchor first); only engines with a `sharing` rule have one."""
        raise NotImplementedError(f"{self.runtime} serves one model per pod")


def engine_address(port: int, gateway: GatewaySetup | None) -> tuple[str, int]:
    """Where the engine listens: on loopback behind its gateway, which takes the published
    `port`; on every interface at `port` when it serves open."""
    if gateway is None:
        return "0.0.0.0", port
    return LOOPBACK, engine_port(port)


def env_with_cache(image: Image, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The image's cache directories on the volume, plus engine-specific variables."""
    return {**image.cache_env, **extra} if extra else dict(image.cache_env)


@lru_cache(maxsize=32)
def version_tuple(version: str) -> tuple[int, ...]:
    """A release as numbers; cached, since every model an image serves asks its release."""
    return tuple(map(int, version.split(".")))


def is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def slots_problem(recipe: Recipe, model: Model, options: ServeOptions) -> tuple[str, str] | None:
    """Engines that allocate every slot at start hold exactly `concurrency` full-context
    sequences, so a floor above a pinned concurrency can never be met."""
    pinned = options.concurrency
    if pinned is not None and options.min_sequences > pinned:
        key = (
            f"overrides.{model.id}.minConcurrentSequences"
            if options.min_sequences_pinned
            else "minConcurrentSequences"
        )
        return (
            f"{key} asks for {options.min_sequences} full-context sequences, but"
            f" overrides.{model.id}.concurrency gives {recipe.runtime} {pinned} slots, and it"
            " allocates exactly that many at start",
            f"raise frutebox-infra:overrides.{model.id}.concurrency to"
            f" {options.min_sequences}, or lower frutebox-infra:{key}",
        )
    return None


def static_slots(recipe: Recipe, options: ServeOptions) -> int:
    """Slots to launch: the pinned concurrency, else enough for the sequence floor."""
    return options.concurrency or max(recipe.default_concurrency, options.min_sequences)
