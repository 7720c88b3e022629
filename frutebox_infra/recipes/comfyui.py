"""ComfyUI: diffusion, video and audio models, weights fetched once onto the volume."""

from __future__ import annotations

import shlex

from frutebox_infra.fit import MemoryModel
from frutebox_infra.recipes.base import (
    VOLUME_PATH,
    PodSpec,
    Recipe,
    ServeOptions,
    Serving,
    version_tuple,
)
from frutebox_infra.registry import ComfyRecipe, Gpu, Image, Model, Runtime

MODELS_DIR = f"{VOLUME_PATH}/ComfyUI/models"
"""The ai-dock image moves ComfyUI onto the mounted workspace; ComfyUI lists models/<kind>/ flat."""

PROVISIONING_PATH = "/opt/ai-dock/bin/provisioning.sh"
"""The image's init script sources this file before its supervisor starts ComfyUI."""

HF_RESOLVE = "https://huggingface.co/{repo}/resolve/{revision}/{path}"

_FETCH_FUNCTION = (
    'fetch() { mkdir -p "$1" && { [ -s "$1/$2" ] || { '
    'curl -fsSL --retry 3 ${HF_TOKEN:+-H "Authorization: Bearer $HF_TOKEN"} '
    '-o "$1/$2.part" "$3" && mv -f "$1/$2.part" "$1/$2"; }; }; }'
)


class ComfyUI(Recipe):
    runtime = Runtime.COMFYUI
    entrypoint = "none"
    default_concurrency = 1

    def missing(self, model: Model) -> str | None:
        if _recipe(model) is None:
            return (
                "the registry has no source.comfyui file list for it (which files, from which"
                " repo at which revision, into which models/ folder)"
            )
        if model.weights.vram_gb is None:
            return "the registry lacks weights.vram_gb for it"
        return None

    def serving(self, model: Model, options: ServeOptions) -> Serving:
        assert model.weights.vram_gb is not None
        return Serving(
            weights_vram_gb=model.weights.vram_gb,
            weights_disk_gb=model.weights.disk_gb,
            context_tokens=1,
            concurrency=1,
            require_fp8=False,
            memory_model=MemoryModel.DIFFUSION,
        )

    def count_problem(self, model: Model, count: int) -> str | None:
        return None if count == 1 else "ComfyUI runs a pipeline on one GPU"

    def image_problem(self, model: Model, image: Image) -> str | None:
        wrong_entrypoint = super().image_problem(model, image)
        if wrong_entrypoint is not None:
            return wrong_entrypoint
        recipe = _recipe(model)
        needed = recipe.min_comfyui if recipe else None
        if needed is None or image.engine_version is None:
            return None
        if version_tuple(image.engine_version) >= version_tuple(needed):
            return None
        return (
            f"needs ComfyUI {needed} or newer and the pinned image {image.reference} ships"
            f" {image.engine_version}"
        )

    def gated_pull(self, model: Model) -> bool:
        recipe = _recipe(model)
        if recipe is not None and recipe.repo is not None:
            return recipe.gated
        return model.source is not None and model.source.gated

    def pod(self, model: Model, image: Image, gpu: Gpu, count: int, serving: Serving) -> PodSpec:
        env = {
            "FRUTEBOX_PROVISION": provisioning_script(model),
            "WORKSPACE": VOLUME_PATH,
            # The RunPod proxy carries the health probe; the image's login page would
            # answer it with a redirect instead of the API.
            "WEB_ENABLE_AUTH": "false",
        }
        # No ENTRYPOINT: args is the command. Install our fetch script where the image's init
        # sources it before ComfyUI starts, then hand over to that init as PID 1.
        install = f'printf "%s\\n" "$FRUTEBOX_PROVISION" > {PROVISIONING_PATH} && exec init.sh'
        return self.pod_spec(
            model,
            image,
            shlex.join(["bash", "-c", install]),
            env=env,
            expected_files=expected_files(model),
        )


LISTED_KIND = {"clip": "text_encoders", "unet": "diffusion_models"}
"""ComfyUI lists models/clip under text_encoders and models/unet under diffusion_models."""


def expected_files(model: Model) -> tuple[str, ...]:
    """`kind/name` of every file the recipe stores, as ComfyUI's GET /models/<kind> lists it."""
    recipe = _recipe(model)
    assert recipe is not None
    return tuple(f"{LISTED_KIND.get(f.folder, f.folder)}/{f.stored_name}" for f in recipe.files)


def provisioning_script(model: Model) -> str:
    """Idempotent downloads: skip a non-empty file, fetch to .part then rename; fail loudly.

    `exit 1` leaves the image's init, so a model whose weights failed to arrive never
    reaches a healthy ComfyUI and the deploy step terminates the pod.
    """
    recipe = _recipe(model)
    assert recipe is not None and model.source is not None
    repo = recipe.repo or model.source.hf_repo
    revision = recipe.revision or model.source.revision or "main"
    lines = [_FETCH_FUNCTION]
    for file in recipe.files:
        url = HF_RESOLVE.format(
            repo=file.repo or repo,
            revision=file.revision or ("main" if file.repo else revision),
            path=file.path,
        )
        target = f"{MODELS_DIR}/{file.folder}"
        lines.append(f"fetch {target} {shlex.quote(file.stored_name)} {shlex.quote(url)} || exit 1")
    return "\n".join(lines)


def _recipe(model: Model) -> ComfyRecipe | None:
    return model.source.comfyui if model.source else None
