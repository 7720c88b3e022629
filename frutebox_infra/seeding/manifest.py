"""What to seed for one model: its source at its revision, and where on the volume its engine
reads it, derived from the registry and the pod the recipe renders (never a table of its own)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any

from frutebox_infra.catalog.schema import Model, Runtime
from frutebox_infra.recipes.base import COUNTERS_ENV, VOLUME_PATH, PodSpec
from frutebox_infra.recipes.comfyui import file_origins, stored_path
from frutebox_infra.seeding.protocol import (
    FilesJob,
    FileSpec,
    HfSnapshotJob,
    OllamaJob,
    PlacedArchive,
    PlacedText,
    SeedJob,
    SeedPlan,
)

HUB_SUBDIR = "hub"
"""huggingface_hub keeps its cache in $HF_HOME/hub unless HF_HUB_CACHE names another place."""

COMMIT = re.compile(r"^[0-9a-f]{40}$")

_VOLUME_PREFIX = VOLUME_PATH.rstrip("/") + "/"
_VOLUME_PREFIX_LEN = len(_VOLUME_PREFIX)

OTHER_WEIGHT_FORMATS = (
    "*.bin", "*.pt", "*.pth", "*.ckpt", "*.h5", "*.msgpack", "*.onnx", "*.ot", "*.tflite",
    "*.gguf", "original/*",
)  # fmt: skip
"""Weight files SGLang and vLLM never read when a revision ships safetensors (their loaders
pick `*.safetensors` first); Meta's repos add a second, raw copy under original/."""

MISTRAL_FORMAT_FLAG = ("--load-format", "mistral")
MISTRAL_FORMAT_WORD = "=".join(MISTRAL_FORMAT_FLAG)
"""The same flag as one word."""
MISTRAL_NATIVE = ("consolidated*.safetensors",)
"""Mistral's own checkpoint, which only `--load-format mistral` reads."""
HF_FORMAT_SHARDS = ("model*.safetensors", "model.safetensors.index.json")
"""The transformers-format copy that Mistral repos carry beside their own format."""
BESIDE_MISTRAL_FORMAT = OTHER_WEIGHT_FORMATS + HF_FORMAT_SHARDS
BESIDE_HF_FORMAT = OTHER_WEIGHT_FORMATS + MISTRAL_NATIVE
"""What an engine skips beside the safetensors it loads, in Mistral's format or in HF's."""


@dataclass(frozen=True, kw_only=True)
class Unseedable:
    """Why a model's weights cannot be placed by a CPU pod; its GPU pod downloads them."""

    model_id: str
    reason: str


class _NotSeedable(Exception):
    """Raised by the job builders; `seed_job` turns it into an Unseedable."""


def seed_job(model: Model, runtime: Runtime, pod: PodSpec) -> SeedJob | Unseedable:
    """The job that puts `model`'s weights where `pod` (its engine's pod, or the shared pod
    it is a member of) reads them."""
    try:
        job = _weights_job(model, runtime, pod)
        # The release archives the pod's launch checks, so its GPU bills no fetch of them.
        archives = _archives(pod)
        return replace(job, archives=archives) if archives else job
    except _NotSeedable as exc:
        return Unseedable(model_id=model.id, reason=str(exc))


def _weights_job(model: Model, runtime: Runtime, pod: PodSpec) -> SeedJob:
    if model.source is None:
        raise _NotSeedable("the registry records no source for it")
    if runtime in (Runtime.SGLANG, Runtime.VLLM):
        return _hf_engine_job(model, runtime, pod)
    if runtime is Runtime.LLAMACPP:
        return _gguf_job(model, pod)
    if runtime is Runtime.OLLAMA:
        return _ollama_job(model, pod.env)
    if runtime is Runtime.COMFYUI:
        return _comfy_job(model)
    raise _NotSeedable(f"no seeding rule for the {runtime} engine")


def _archives(pod: PodSpec) -> tuple[PlacedArchive, ...]:
    """The release archives the pod's launch checks on the volume (`PodSpec.archives`, read
    off registry/images.yaml by its recipe)."""
    return tuple(
        [
            PlacedArchive(
                url=kept.url,
                path=_on_volume("its release archive", kept.path),
                **{kept.algorithm: kept.digest},
            )
            for kept in pod.archives
        ]
    )


def needs_token(job: SeedJob) -> bool:
    """Does the job fetch from a gated repo (so its pod gets the Hugging Face token)?"""
    if isinstance(job, HfSnapshotJob):
        return job.gated
    if isinstance(job, FilesJob):
        return any(f.gated for f in job.files)
    return False


def seed_plan(jobs: Sequence[SeedJob], **overrides: Any) -> SeedPlan:
    """One seeder run for `jobs`; keyword overrides replace the plan's defaults (e.g. the
    emulator's hub URL)."""
    return SeedPlan(jobs=tuple(jobs), volumePath=VOLUME_PATH, **overrides)


def _hf_engine_job(model: Model, runtime: Runtime, pod: PodSpec) -> SeedJob:
    assert model.source is not None
    if model.source.hf_repo is None:
        raise _NotSeedable("the registry records no hf_repo for it")
    env = pod.env
    cache = _hub_cache(env)
    revision = model.source.revision or "main"
    beside = ignored_beside_safetensors(model.engine_args.get(runtime, ()))
    return HfSnapshotJob(
        modelId=model.id,
        repo=model.source.hf_repo,
        revision=revision,
        cacheDir=cache,
        gated=model.source.gated,
        # huggingface_hub records a branch or tag under refs/; a commit needs none.
        refs=() if COMMIT.match(revision) else (revision,),
        ignoreBesideSafetensors=beside,
        texts=_hook_texts(pod),
        # The directory the pod's engine keeps its counters in: made here, since vLLM's
        # fixed-ENTRYPOINT launch cannot make it and the engine fails to start without it.
        counterDirs=(_env_path(env, COUNTERS_ENV),) if COUNTERS_ENV in env else (),
    )


def _hook_texts(pod: PodSpec) -> tuple[PlacedText, ...]:
    """The pod's gateway start hook, which its image's Python reads off the volume."""
    hook = pod.start_hook
    if hook is None:
        return ()
    return (PlacedText(path=_on_volume("its gateway's start hook", hook.path), text=hook.text),)


def _gguf_job(model: Model, pod: PodSpec) -> SeedJob:
    assert model.source is not None
    gguf = model.source.gguf
    if gguf is None:
        raise _NotSeedable("the registry records no source.gguf for it")
    relative = _env_path(pod.env, "LLAMA_CACHE")
    revision = gguf.revision or "main"
    refs = ["main"]
    if not COMMIT.match(revision) and revision != "main":
        refs.append(revision)
    # llama.cpp reads LLAMA_CACHE itself as a hub cache (no hub/ below it) and, offline,
    # loads the snapshot refs/main names: main points at the seeded commit, pinned or not.
    return HfSnapshotJob(
        modelId=model.id,
        repo=gguf.repo,
        revision=revision,
        cacheDir=relative,
        refs=tuple(refs),
        quant=gguf.quant,
        texts=_hook_texts(pod),
    )


def _ollama_job(model: Model, env: Mapping[str, str]) -> SeedJob:
    assert model.source is not None
    tag = model.source.ollama_tag
    if tag is None:
        raise _NotSeedable("the registry records no ollama_tag for it")
    return OllamaJob(modelId=model.id, tag=tag, store=_env_path(env, "OLLAMA_MODELS"))


def _comfy_job(model: Model) -> SeedJob:
    assert model.source is not None
    if model.source.comfyui is None:
        raise _NotSeedable("the registry records no source.comfyui file list for it")
    files = tuple(
        [
            FileSpec(
                repo=repo,
                revision=revision,
                path=file.path,
                destination=_on_volume(
                    "its ComfyUI models folder", stored_path(file.folder, file.stored_name)
                ),
                gated=gated,
            )
            for file, repo, revision, gated in file_origins(model)
        ]
    )
    return FilesJob(modelId=model.id, files=files)


def _hub_cache(env: Mapping[str, str]) -> str:
    """The hub cache, relative to the volume."""
    if "HF_HUB_CACHE" in env:
        return _env_path(env, "HF_HUB_CACHE")
    return f"{_env_path(env, 'HF_HOME')}/{HUB_SUBDIR}"


def _env_path(env: Mapping[str, str], name: str) -> str:
    """Where the pod's `name` variable points, relative to the volume."""
    if name not in env:
        raise _NotSeedable(f"its pod sets no {name} on the volume (registry/images.yaml cache_env)")
    return _on_volume(name, env[name])


def _on_volume(name: str, path: str) -> str:
    """`path` relative to the volume's mount; a path elsewhere cannot be seeded."""
    clean = path.rstrip("/")
    # Most paths hold no `..` at all, which a substring test answers without splitting.
    if not clean.startswith(_VOLUME_PREFIX) or (".." in clean and ".." in clean.split("/")):
        raise _NotSeedable(f"{name} is {path}, not on the volume mounted at {VOLUME_PATH}")
    return clean[_VOLUME_PREFIX_LEN:]


def ignored_beside_safetensors(words: Sequence[str]) -> tuple[str, ...]:
    """What an engine launched with `words` leaves alone beside `*.safetensors` weights: the
    other format's shards as well as the other weight formats."""
    return BESIDE_MISTRAL_FORMAT if _mistral_format(words) else BESIDE_HF_FORMAT


def _mistral_format(words: Sequence[str]) -> bool:
    """Do the engine's flags load Mistral's own format (`--load-format mistral`, as two words
    or one)? Most flags name no load format, which `in` answers without a loop."""
    flag, value = MISTRAL_FORMAT_FLAG
    if MISTRAL_FORMAT_WORD in words:
        return True
    if flag not in words:
        return False
    return (flag, value) in pairwise(words)
