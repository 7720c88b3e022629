"""What an emulated GPU pod's engine reads off its volume at start, told from its launch as each
engine would: SGLang's `--model-path`/`--revision`, vLLM's model argument, llama.cpp's
`-hf REPO:QUANT`, ComfyUI's fetch lines, Ollama's model store; and whether it may download
what is missing (`HF_HUB_OFFLINE`, `LLAMA_ARG_OFFLINE` / `--offline` say it may not).

A launch the emulator cannot read this way (a test's own image) reads nothing it knows of.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from frutebox_infra.catalog.schema import Runtime
from frutebox_infra.emulator import layout, volume_files
from frutebox_infra.emulator.gateway import engine_words
from frutebox_infra.emulator.hub import COMMIT, Hub
from frutebox_infra.emulator.records import VolumeRecord
from frutebox_infra.emulator.volume_files import Piece
from frutebox_infra.recipes import RECIPES
from frutebox_infra.recipes.archives import RELEASE_MARKER
from frutebox_infra.recipes.ollama import PULLS_ENV
from frutebox_infra.seeding import seeder
from frutebox_infra.seeding.manifest import HUB_SUBDIR, ignored_beside_safetensors

TRUTHY = frozenset({"1", "true", "yes", "on", "enabled"})
"""What huggingface_hub and llama.cpp read as a switch turned on."""
HF_RESOLVE = "https://huggingface.co/"


@dataclass(frozen=True)
class Reads:
    """What the engine needs on the volume before it serves, and how it may get it."""

    runtime: Runtime
    pieces: tuple[Piece, ...] = ()
    refs: tuple[tuple[str, str], ...] = ()
    """Refs the engine's own download writes ([path, commit]), as huggingface_hub does."""
    offline: bool = False
    failure: str | None = None
    """Why the engine cannot get its weights at all: its log line, then it never serves."""
    store: str | None = None
    """Ollama's model store, below the mount."""

    @property
    def loads_at_start(self) -> bool:
        return RECIPES[self.runtime].loads_weights_at_start


def reads_of(body: Mapping[str, object], hub: Hub, volume: VolumeRecord) -> Reads | None:
    env = body.get("env") if isinstance(body.get("env"), Mapping) else {}
    assert isinstance(env, Mapping)
    words = shlex.split(str(body.get("args") or ""))
    token = bool(env.get("HF_TOKEN"))
    if "FRUTEBOX_PROVISION" in env:
        return _comfy(str(env["FRUTEBOX_PROVISION"]), hub, volume, token=token)
    if "OLLAMA_MODELS" in env:
        store = layout.below_mount(str(env["OLLAMA_MODELS"]))
        return Reads(Runtime.OLLAMA, store=store)
    if "-hf" in words:
        cache = layout.below_mount(str(env.get("LLAMA_CACHE", "")))
        offline = str(env.get("LLAMA_ARG_OFFLINE", "")).lower() in TRUTHY or "--offline" in words
        repo, _, quant = _after(words, "-hf").partition(":")
        return _snapshot(Runtime.LLAMACPP, repo, "main", cache, hub, volume, offline=offline,
                         token=token, quant=quant)  # fmt: skip
    words = engine_words(body)
    if "sglang.launch_server" in words:
        runtime, repo = Runtime.SGLANG, _after(words, "--model-path")
    elif "vllm" in str(body.get("image", "")) and words and not words[0].startswith("-"):
        runtime, repo = Runtime.VLLM, words[0]
    else:
        return None
    home = env.get("HF_HOME")
    cache = (
        layout.below_mount(str(env["HF_HUB_CACHE"]))
        if "HF_HUB_CACHE" in env
        else (f"{layout.below_mount(str(home))}/{HUB_SUBDIR}" if home else None)
    )
    offline = str(env.get("HF_HUB_OFFLINE", "")).lower() in TRUTHY
    revision = _after(words, "--revision") or "main"
    # The checkpoint format the launch loads (vLLM's `--load-format mistral` reads Mistral's
    # consolidated files, not the Hugging Face shards beside them), as the seed job reads it.
    ignored = ignored_beside_safetensors(words)
    return _snapshot(runtime, repo, revision, cache, hub, volume, offline=offline, token=token,
                     ignored=ignored)  # fmt: skip


def release_checks(body: Mapping[str, object]) -> list[tuple[str, str, str, bool]]:
    """The release archives a launch script checks before its engine starts, in its order
    (recipes/archives.py `release_check`): (who: `gateway` or `engine`, its path below the
    volume's mount, its URL, whether the launch fetches it when the volume lacks it)."""
    try:
        words = shlex.split(str(body.get("args") or ""))
    except ValueError:
        return []
    if words[:2] != ["bash", "-c"] or len(words) < 3 or RELEASE_MARKER not in words[2]:
        return []
    script, found, at = words[2], [], 0
    while (at := script.find(RELEASE_MARKER, at)) >= 0:
        # Each check is one shell command whose program text spans lines: read its words from
        # the start of its line, as the shell would.
        start = script.rfind("\n", 0, at) + 1
        at += len(RELEASE_MARKER)
        lexer = shlex.shlex(script[start:], posix=True)
        lexer.whitespace_split = True
        try:
            parts = [lexer.get_token() for _ in range(9)]
        except ValueError:
            continue
        kept = layout.below_mount(str(parts[4])) if parts[4] else None
        if kept is not None and parts[5]:
            found.append((str(parts[3]), kept, str(parts[5]), parts[8] == "1"))
    return found


def release_checked(body: Mapping[str, object], who: str) -> tuple[str, str, bool] | None:
    """The release `who` (`gateway`, `engine`) a launch script checks: (its path below the
    volume's mount, its URL, whether the launch fetches it), or None."""
    for name, kept, url, fetch in release_checks(body):
        if name == who:
            return kept, url, fetch
    return None


def launch_pulls(env: Mapping[str, object]) -> list[str]:
    """The Ollama tags a launch pulls itself before its server answers (recipes/ollama.py)."""
    return str(env.get(PULLS_ENV, "")).split()


def _after(words: list[str], flag: str) -> str:
    return words[words.index(flag) + 1] if flag in words[:-1] else ""


def _snapshot(
    runtime: Runtime,
    repo: str,
    revision: str,
    cache: str | None,
    hub: Hub,
    volume: VolumeRecord,
    *,
    offline: bool,
    token: bool,
    quant: str = "",
    ignored: tuple[str, ...] = (),
) -> Reads:
    if cache is None or not repo:
        return Reads(runtime, failure="no model cache on the volume: the weights cannot be found")
    known = volume.refs.get(layout.ref_file(cache, repo, revision))
    commit = revision if COMMIT.match(revision) else known
    try:
        hub_commit, tree = hub.snapshot(repo, commit or revision, token=token)
    except seeder.Failed as failed:
        if not offline or commit is None:
            return Reads(runtime, failure=f"{failed.reason} (while fetching {repo})")
        # Offline, the engine never asks the hub: it loads what the cache's snapshot holds.
        prefix = layout.snapshot_file(cache, repo, commit, "")
        tree = {
            p.removeprefix(prefix): volume.files[p][0] for p in volume_files.listed(volume, prefix)
        }
        hub_commit = commit
    if offline and commit is None:
        return Reads(
            runtime,
            offline=True,
            failure=f"offline mode and {repo} has no refs/{revision} in the cache: the weights"
            " were never seeded",
        )
    commit = commit or hub_commit
    entries = [{"path": path} for path in sorted(tree)]
    try:
        chosen = (
            seeder.gguf_files(entries, quant)
            if quant
            else seeder.select(entries, {"ignoreBesideSafetensors": ignored})
        )
    except seeder.Failed as failed:
        return Reads(runtime, failure=failed.reason)
    if not chosen:
        return Reads(runtime, failure=f"{repo} has no files of quant {quant}")
    pieces = tuple(
        Piece(layout.snapshot_file(cache, repo, commit, e["path"]), tree[e["path"]]) for e in chosen
    )
    ref = ((layout.ref_file(cache, repo, revision), commit),) if revision != commit else ()
    return Reads(runtime, pieces, ref, offline=offline)


def _comfy(script: str, hub: Hub, volume: VolumeRecord, *, token: bool) -> Reads:
    """ComfyUI's provisioning script: one `fetch DIR NAME URL` per file, each skipped when
    the file is there; a file it cannot fetch ends the script (exit 1) before the server."""
    pieces = []
    for line in script.splitlines():
        words = shlex.split(line.split("||", 1)[0]) if line.startswith("fetch ") else []
        if len(words) < 4:
            continue
        folder, name, url = layout.below_mount(words[1]), words[2], words[3]
        path = f"{folder}/{name}"
        kept = volume.files.get(path)
        if kept is not None and volume_files.complete(volume, path, kept[0]):
            pieces.append(Piece(path, kept[0]))  # `[ -s file ]`: there, so not fetched
            continue
        repo, _, rest = url.removeprefix(HF_RESOLVE).partition("/resolve/")
        revision, _, file = rest.partition("/")
        try:
            _, size = hub.file(repo, revision, file, token=token)
        except seeder.Failed as failed:
            return Reads(Runtime.COMFYUI, failure=f"download failed: {url}: {failed.reason}")
        pieces.append(Piece(path, size))
    return Reads(Runtime.COMFYUI, tuple(pieces))
