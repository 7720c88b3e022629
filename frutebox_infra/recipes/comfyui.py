"""ComfyUI: diffusion, video and audio models, weights fetched once onto the volume."""

from __future__ import annotations

import shlex
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import NamedTuple

from frutebox_infra.catalog.schema import ComfyFile, ComfyRecipe, Gpu, Image, Model, Runtime
from frutebox_infra.estimates.fit import MemoryModel
from frutebox_infra.recipes.base import (
    VOLUME_PATH,
    PodSpec,
    Recipe,
    ServeOptions,
    Serving,
    Sharing,
    counters_dir,
    engine_address,
    version_tuple,
)
from frutebox_infra.recipes.counts import CountsKeeper, keeper_port, keeper_words
from frutebox_infra.recipes.gateway import GatewaySetup

COMFY_BASE = f"{VOLUME_PATH}/ComfyUI"
"""ComfyUI's --base-directory: models, input, output and user data live on the volume."""

MODELS_DIR = f"{COMFY_BASE}/models"
"""ComfyUI lists the files of models/<kind>/ flat under GET /models/<kind>."""

INSTALL_ROOT = f"{VOLUME_PATH}/comfyui"
"""One directory per ComfyUI release (source + venv), installed once and shared by pods."""

SOURCE_TARBALL = "https://github.com/Comfy-Org/ComfyUI/archive/refs/tags/v{version}.tar.gz"
"""ComfyUI's release tarball (the repository moved from comfyanonymous/ComfyUI to Comfy-Org)."""

# The image (an official PyTorch runtime image) has python but neither curl nor git, so
# downloads are Python's own. The token goes only to the URL asked for, never to the CDN a
# redirect leads to (an unredirected header); three tries, 5 s apart; any failure exits 1.
_DOWNLOAD_PY = """import os, shutil, sys, time, urllib.request as u
r = u.Request(sys.argv[1])
t = os.environ.get("HF_TOKEN")
if t: r.add_unredirected_header("Authorization", "Bearer " + t)
for n in range(3):
    try:
        with u.urlopen(r, timeout=60) as src, open(sys.argv[2], "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 24)
        break
    except Exception as e:
        print("download failed:", sys.argv[1], e, file=sys.stderr)
        if n == 2: sys.exit(1)
        time.sleep(5)"""

_FETCH_FUNCTION = (
    'fetch() { mkdir -p "$1" && { [ -s "$1/$2" ] || { '
    f"python -c '{_DOWNLOAD_PY}' "
    '"$3" "$1/$2.part" && mv -f "$1/$2.part" "$1/$2"; }; }; }'
)

_STREAM_PY = (
    "import shutil, sys, urllib.request as u; "
    "shutil.copyfileobj(u.urlopen(sys.argv[1], timeout=60), sys.stdout.buffer)"
)
"""Writes a URL's body to stdout (the ComfyUI release tarball, piped into tar)."""


class ComfyUI(Recipe):
    runtime = Runtime.COMFYUI
    entrypoint = "none"
    default_concurrency = 1
    # One server lists every checkpoint on the volume but loads them on demand, freeing what
    # is loaded when the next one needs the room: members take turns in VRAM, never add up.
    sharing = Sharing.LARGEST
    # The server answers at once and loads a model into VRAM on its first request.
    loads_weights_at_start = False

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
        weights = model.weights
        assert weights.vram_gb is not None
        return Serving(
            weights_vram_gb=weights.vram_gb,
            weights_disk_gb=weights.disk_gb,
            context_tokens=1,
            concurrency=1,
            require_fp8=False,
            memory_model=MemoryModel.DIFFUSION,
            metrics=options.metrics,
        )

    def count_problem(self, model: Model, count: int) -> str | None:
        return None if count == 1 else "ComfyUI runs a pipeline on one GPU"

    def options_problem(self, model: Model, options: ServeOptions) -> tuple[str, str] | None:
        # A diffusion pipeline has no token context and runs one job at a time.
        if (
            options.context_tokens is None
            and options.concurrency is None
            and not options.min_sequences_pinned
        ):
            return None  # no override to refuse: every model of a stack that sets none
        keys = [
            key
            for key, given in (
                ("context", options.context_tokens is not None),
                ("concurrency", options.concurrency is not None),
                ("minConcurrentSequences", options.min_sequences_pinned),
            )
            if given
        ]
        if not keys:
            return None
        named = ", ".join(f"overrides.{model.id}.{k}" for k in keys)
        return (
            f"{named} cannot be honoured: ComfyUI runs one diffusion job at a time and has no"
            " token context",
            f"remove {named} (only `gpu` applies to a ComfyUI model)",
        )

    def image_problem(self, model: Model, image: Image) -> str | None:
        wrong_entrypoint = super().image_problem(model, image)
        if wrong_entrypoint is not None:
            return wrong_entrypoint
        if image.engine_version is None:
            # The pod installs exactly that ComfyUI release onto the volume.
            return (
                f"needs the ComfyUI release to install, but {image.reference} has no"
                " engine_version in registry/images.yaml"
            )
        recipe = _recipe(model)
        needed = recipe.min_comfyui if recipe else None
        if needed is None:
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

    def launch_variant(self, gpu: Gpu, count: int) -> Hashable:
        # The pod is the same on every GPU type and count.
        return ()

    def render_pod(
        self, model: Model, image: Image, gpu: Gpu, count: int, serving: Serving, seeded: bool
    ) -> PodSpec:
        # No ENTRYPOINT: args is the whole command. It installs ComfyUI (once per release on
        # the volume), fetches the weights (FRUTEBOX_PROVISION, skipped when present), then
        # becomes the server; any failed step exits non-zero, so no pod serves without them.
        gateway = serving.gateway
        # ComfyUI's history is in its memory only, so a measured pod behind the gateway runs
        # the server under the counts keeper, which keeps the count on the volume.
        counts = None
        if serving.metrics and gateway is not None:
            counts = _keeper(image, gateway, counters_dir(model.id, self.runtime, image))
        script, args = launch(image, model.id, gateway=gateway, counts=counts)
        spec = self.pod_spec(
            model,
            image,
            ("bash", "-c", script),
            seeded=seeded,
            args=args,
            env={"FRUTEBOX_PROVISION": provisioning_script(model)},
            expected_files=expected_files(model),
        )
        if gateway is None:
            return spec
        # The gateway starts first: a pod that cannot start it never installs or fetches.
        return self.behind_gateway(spec, gateway, script, python="python", seeded=seeded,
                                   counts=counts)  # fmt: skip

    def shared_pod(self, pods: Sequence[PodSpec]) -> PodSpec:
        # One server (the anchor's launch, its output folder) fetches every member's files
        # before it starts and must list them all to be healthy.
        anchor = pods[0]
        script = "\n".join(pod.env["FRUTEBOX_PROVISION"] for pod in pods)
        return replace(
            anchor,
            env={**anchor.env, "FRUTEBOX_PROVISION": script},
            secret_env=tuple(sorted({name for pod in pods for name in pod.secret_env})),
            expected_files=tuple(dict.fromkeys(f for pod in pods for f in pod.expected_files)),
        )


class ComfyLaunch(NamedTuple):
    """A ComfyUI pod's command: the launch script, and RunPod's args for it
    (`shlex.join(["bash", "-c", script])`)."""

    script: str
    args: str


def _keeper(image: Image, gateway: GatewaySetup, directory: str) -> CountsKeeper:
    """The counts keeper of a measured pod: it counts the prompt ids new in ComfyUI's history
    and answers GET /metrics (a route ComfyUI has not) with the count."""
    return CountsKeeper(kind="comfyui-history", engine_port=engine_address(image.port, gateway)[1],
                        read_path="/history", port=keeper_port(image.port),
                        directory=directory)  # fmt: skip


def launch(
    image: Image,
    model_id: str,
    *,
    gateway: GatewaySetup | None = None,
    counts: CountsKeeper | None = None,
) -> ComfyLaunch:
    """Install the pinned ComfyUI release, fetch the weights, exec the server.

    The release is unpacked and its requirements installed into a venv inside a fresh
    temporary directory that is then renamed into place: a failed step removes it, a pod
    killed half-way leaves only a temporary directory, and two pods booting at once cannot
    interleave (the second rename fails and that pod uses the winner's copy). The venv sees
    the image's PyTorch (--system-site-packages), so pip keeps its CUDA build.

    Pods of different models share the install and the models folders on the volume, but
    not what one pod's server would disturb in another's: each writes its own output
    folder, keeps its scratch files on the container disk (ComfyUI empties its temp folder
    at start) and its asset database in memory (SQLite on a shared network volume, written
    by several servers, would lock or corrupt).
    """
    assert image.engine_version is not None, "the comfyui image needs engine_version"
    host, port = engine_address(image.port, gateway)
    server = _exec_server(host, port, model_id, counts)
    script = f"{_install_script(image.engine_version)}\n{server}"
    return ComfyLaunch(script, shlex.join(["bash", "-c", script]))


def _exec_server(host: str, port: int, model_id: str, counts: CountsKeeper | None) -> str:
    server = [
        *("main.py", "--listen", host, "--port", str(port)),
        *("--base-directory", COMFY_BASE),
        *("--output-directory", f"{COMFY_BASE}/output/{model_id}"),
        *("--temp-directory", "/tmp/comfyui"),
        *("--database-url", "sqlite:///:memory:"),
    ]
    python = '"$home/venv/bin/python"'
    if counts is None:
        return f"exec {python} {shlex.join(server)}"
    return f"exec {keeper_words(counts, python=python)} {python} {shlex.join(server)}"


@lru_cache(maxsize=8)
def _install_script(version: str) -> str:
    """The launch up to the server's exec: the same for every model of one ComfyUI release
    (worked out once per release, not once per pod)."""
    home = f"{INSTALL_ROOT}/{version}"
    tarball = SOURCE_TARBALL.format(version=version)
    return "\n".join(
        [
            "set -eo pipefail",
            f"home={home}",
            'if [ ! -d "$home" ]; then',
            f'  mkdir -p {INSTALL_ROOT} && tmp=$(mktemp -d "$home.XXXXXX")',
            """  trap 'rm -rf "$tmp"' EXIT""",
            f"  python -c {shlex.quote(_STREAM_PY)} {tarball}"
            ' | tar -xz --strip-components=1 -C "$tmp"',
            '  python -m venv --system-site-packages "$tmp/venv"',
            '  "$tmp/venv/bin/python" -m pip install --no-cache-dir -r "$tmp/requirements.txt"',
            '  mv -T "$tmp" "$home" 2>/dev/null || rm -rf "$tmp"',
            "fi",
            'eval "$FRUTEBOX_PROVISION"',
            'cd "$home"',
        ]
    )


LISTED_KIND = {"clip": "text_encoders", "unet": "diffusion_models"}
"""ComfyUI lists models/clip under text_encoders and models/unet under diffusion_models."""


def expected_files(model: Model) -> tuple[str, ...]:
    """`kind/name` of every file the recipe stores, as ComfyUI's GET /models/<kind> lists it."""
    recipe = _recipe(model)
    assert recipe is not None
    kinds = LISTED_KIND
    return tuple([f"{kinds.get(f.folder, f.folder)}/{f.stored_name}" for f in recipe.files])


def provisioning_script(model: Model) -> str:
    """Idempotent downloads: skip a non-empty file, fetch to .part then rename; fail loudly.

    `exit 1` ends the pod's command before ComfyUI starts, so a model whose weights failed to
    arrive never reaches a healthy server and the deploy step terminates the pod.
    """
    lines = [_FETCH_FUNCTION]
    for file, repo, revision, _ in file_origins(model):
        url = hf_resolve_url(repo, revision, file.path)
        target = f"{MODELS_DIR}/{file.folder}"
        lines.append(f"fetch {target} {shlex.quote(file.stored_name)} {shlex.quote(url)} || exit 1")
    return "\n".join(lines)


def hf_resolve_url(repo: str, revision: str, path: str) -> str:
    """Where Hugging Face serves one file of a repo at a revision."""
    return f"https://huggingface.co/{repo}/resolve/{revision}/{path}"


@dataclass(frozen=True, kw_only=True)
class FileSource:
    """One file the recipe stores: where it comes from and the flat name ComfyUI lists."""

    repo: str
    revision: str
    path: str
    folder: str
    stored_name: str
    gated: bool

    @property
    def destination(self) -> str:
        """Its path on the volume, as ComfyUI reads it."""
        return stored_path(self.folder, self.stored_name)


def stored_path(folder: str, stored_name: str) -> str:
    """Where ComfyUI reads a file of `folder` stored as `stored_name`."""
    return f"{MODELS_DIR}/{folder}/{stored_name}"


def file_sources(model: Model) -> tuple[FileSource, ...]:
    """Each file the recipe stores, with the repo and revision it comes from."""
    return tuple(
        FileSource(
            repo=repo,
            revision=revision,
            path=file.path,
            folder=file.folder,
            stored_name=file.stored_name,
            gated=gated,
        )
        for file, repo, revision, gated in file_origins(model)
    )


def file_origins(model: Model) -> list[tuple[ComfyFile, str, str, bool]]:
    """Each file with its repo, revision and gate: the recipe's repackaging (or the model's
    own repo) at its pinned revision; a file from another repository is that repository's
    main, and not behind the recipe's gate. Plain tuples: every pod's provisioning reads them."""
    recipe = _recipe(model)
    assert recipe is not None and model.source is not None
    repo = recipe.repo or model.source.hf_repo
    assert repo is not None, "a ComfyUI recipe needs a repo or the model's hf_repo"
    revision = recipe.revision or model.source.revision or "main"
    gated = recipe.gated if recipe.repo is not None else model.source.gated
    origins = []
    for file in recipe.files:
        if file.repo:
            origins.append((file, file.repo, file.revision or "main", False))
        else:
            origins.append((file, repo, file.revision or revision, gated))
    return origins


def _recipe(model: Model) -> ComfyRecipe | None:
    return model.source.comfyui if model.source else None
