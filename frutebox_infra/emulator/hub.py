"""The Hugging Face Hub and Ollama's library as the emulated pods see them: which repos, revisions,
files and tags exist, how large each file is, and what a missing or gated one answers.

Built from the registry, so every armed model has its weights somewhere: a Hugging Face repo of
`config.json` and safetensors shards adding up to the model's `weights.disk_gb`, a GGUF repo
with the quant's (split) files beside another quant's, ComfyUI's files, an Ollama tag's blobs.
Release archives (the gateway's, an engine's) are there by their URL. What a pod is refused
(401 for a gated repo without a token, 404 for a repo, revision or file that is not there, a
release gone or tampered with) is said exactly as the seeder says it (seeding/seeder.py
explains HTTP answers), and a GPU pod's download fails on the same rules.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from frutebox_infra.catalog.schema import Model, Registry
from frutebox_infra.emulator.errors import ApiProblem
from frutebox_infra.recipes.comfyui import file_sources
from frutebox_infra.seeding import seeder
from frutebox_infra.seeding.protocol import HF_HUB_URL

COMMIT = re.compile(r"^[0-9a-f]{40}$")
SHARD_GB = 5.0
"""Safetensors shards of about this size, as transformers saves them."""
GGUF_SPLIT_GB = 49.0
"""GGUF splits stay under Hugging Face's 50 GB per-file limit."""
OTHER_QUANT_GB = 1.0
"""A second quant beside the served one, so a seeder taking the whole repo would show."""


def _hex(*parts: str, length: int = 40) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:length]


@dataclass
class HubRepo:
    repo_id: str
    commit: str
    files: dict[str, int] = field(default_factory=dict)
    """Path -> size in bytes, at `commit`."""
    branches: dict[str, str] = field(default_factory=dict)
    gated: bool = False

    def resolve(self, revision: str) -> str | None:
        if revision == self.commit:
            return self.commit
        return self.branches.get(revision)


@dataclass(frozen=True)
class OllamaTag:
    name: str
    """`namespace/model:tag` as the library keeps it (`library/qwen3:8b`)."""
    blobs: tuple[tuple[str, int], ...]
    """sha256 hex and size of the config and every layer."""


def full_tag(tag: str) -> str:
    name, _, version = tag.partition(":")
    return f"{name if '/' in name else f'library/{name}'}:{version or 'latest'}"


class Hub:
    """What exists on the Hub and in Ollama's library; tokens: any non-empty one is valid."""

    def __init__(self, url: str = HF_HUB_URL) -> None:
        self.url = url
        self.repos: dict[str, HubRepo] = {}
        self.tags: dict[str, OllamaTag] = {}
        self.releases: dict[str, int] = {}
        """Release archives a pod may fetch (registry/images.yaml: an image's engine_archive,
        the gateway's release): URL -> size in bytes (the image's volume_install_gb, the
        gateway's archive_mb). Each serves the bytes its pin names, unless tampered with."""
        self.tampered: set[str] = set()
        """Release URLs whose bytes no longer match the registry's pin (a release replaced
        upstream, or a wrong pin): every check of them fails, the seeder's and a launch's."""

    @classmethod
    def from_registry(cls, registry: Registry) -> Hub:
        hub = cls()
        for model in registry.models:
            hub.add_model(model)
        for image in registry.images.values():
            if image.engine_archive is not None:
                size = int(max(image.volume_install_gb, 0.1) * 1e9)
                hub.releases[image.engine_archive.url] = size
        if registry.gateway is not None:
            hub.releases[registry.gateway.url] = int(registry.gateway.archive_mb * 1e6)
        return hub

    # --- content -------------------------------------------------------------------------

    def repo(self, repo_id: str, revision: str | None = None, *, gated: bool = False) -> HubRepo:
        """The repo (made on first use), holding `revision`: a commit it is at, or a branch."""
        pinned = revision if revision and COMMIT.match(revision) else None
        repo = self.repos.setdefault(repo_id, HubRepo(repo_id, pinned or _hex(repo_id)))
        repo.branches.setdefault("main", repo.commit)
        if revision and not COMMIT.match(revision):
            repo.branches.setdefault(revision, repo.commit)
        repo.gated = repo.gated or gated
        return repo

    def add_model(self, model: Model) -> None:
        source = model.source
        if source is None:
            return
        disk = model.weights.disk_gb or 1.0
        if source.hf_repo and not source.comfyui:
            repo = self.repo(source.hf_repo, source.revision, gated=source.gated)
            repo.files.setdefault("config.json", 2_000)
            repo.files.setdefault("tokenizer.json", 10_000_000)
            shards = max(1, math.ceil(disk / SHARD_GB))
            for i in range(1, shards + 1):
                name = f"model-{i:05d}-of-{shards:05d}.safetensors"
                repo.files.setdefault(name, int(disk * 1e9 / shards))
        if source.gguf is not None:
            gguf = source.gguf
            repo = self.repo(gguf.repo, gguf.revision)
            stem = gguf.repo.rsplit("/", 1)[-1].removesuffix("-GGUF")
            size = gguf.disk_gb or disk
            splits = math.ceil(size / GGUF_SPLIT_GB)
            if splits > 1:
                for i in range(1, splits + 1):
                    path = f"{gguf.quant}/{stem}-{gguf.quant}-{i:05d}-of-{splits:05d}.gguf"
                    repo.files.setdefault(path, int(size * 1e9 / splits))
            else:
                repo.files.setdefault(f"{stem}-{gguf.quant}.gguf", int(size * 1e9))
            repo.files.setdefault(f"{stem}-Q2_K.gguf", int(OTHER_QUANT_GB * 1e9))
        if source.comfyui is not None:
            files = file_sources(model)
            for file in files:
                repo = self.repo(file.repo, file.revision, gated=file.gated)
                repo.files.setdefault(file.path, int(disk * 1e9 / len(files)))
        if source.ollama_tag:
            tag = full_tag(source.ollama_tag)
            layer = (_hex(tag, "model", length=64), int(disk * 1e9))
            config = (_hex(tag, "config", length=64), 500)
            self.tags.setdefault(tag, OllamaTag(tag, (config, layer)))

    def change(self, body: Any) -> dict[str, Any]:
        """An out-of-band change (`POST /_emulator/hub`): a repo, file, tag or engine release
        removed, or a repo gated: what tests use to make a model's source go missing."""
        if not isinstance(body, dict):
            raise ApiProblem(400, "control body must be an object")
        if "ollamaTag" in body:
            self.tags.pop(full_tag(str(body["ollamaTag"])), None)
            return {"ollamaTag": body["ollamaTag"], "removed": True}
        if "releaseUrl" in body:
            url = str(body["releaseUrl"])
            if body.get("tamper") is True:
                self.tampered.add(url)
                return {"releaseUrl": url, "tampered": True}
            self.releases.pop(url, None)
            return {"releaseUrl": url, "removed": True}
        repo_id = body.get("repo")
        if not isinstance(repo_id, str) or repo_id not in self.repos:
            raise ApiProblem(400, f"no emulated repo {repo_id!r}")
        repo = self.repos[repo_id]
        if body.get("remove") is True:
            del self.repos[repo_id]
        if isinstance(body.get("removeFile"), str):
            repo.files.pop(body["removeFile"], None)
        if isinstance(body.get("gated"), bool):
            repo.gated = body["gated"]
        return {"repo": repo_id, "files": len(repo.files), "gated": repo.gated}

    # --- what a pod is answered -------------------------------------------------------------

    def snapshot(self, repo_id: str, revision: str, *, token: bool) -> tuple[str, dict[str, int]]:
        """The commit `revision` names and its files; raises seeder.Failed as the hub refuses."""
        repo = self._allowed(repo_id, revision, "", token=token)
        commit = repo.resolve(revision)
        if commit is None:
            raise self._refused(404, repo_id, revision, "", "RevisionNotFound", token=token)
        return commit, dict(repo.files)

    def file(self, repo_id: str, revision: str, path: str, *, token: bool) -> tuple[str, int]:
        """The commit and size of one file; raises seeder.Failed as the hub refuses."""
        commit, files = self.snapshot(repo_id, revision, token=token)
        if path not in files:
            raise self._refused(404, repo_id, revision, path, "EntryNotFound", token=token)
        return commit, files[path]

    def release(self, url: str, kind: str, pinned: str) -> int:
        """The size of the release archive at `url`, fetched and checked against `pinned` (a
        `kind` hex digest) as the seeder checks it; raises seeder.Failed as it fails."""
        size = self.releases.get(url)
        if size is None:
            raise seeder.release_refused(url, 404)
        if url in self.tampered:
            got = hashlib.new(kind, f"{url} tampered".encode()).hexdigest()
            raise seeder.release_mismatch(url, kind, got, pinned)
        return size

    def ollama(self, tag: str) -> OllamaTag:
        found = self.tags.get(full_tag(tag))
        if found is None:
            failure = seeder.OllamaWhere(tag).explain(404, {}, sent_token=False)
            assert isinstance(failure, seeder.Failed)
            raise failure
        return found

    def _allowed(self, repo_id: str, revision: str, path: str, *, token: bool) -> HubRepo:
        repo = self.repos.get(repo_id)
        if repo is None:
            # The real hub cannot tell an anonymous caller "missing": it may be private.
            code = 404 if token else 401
            raise self._refused(code, repo_id, revision, path, "RepoNotFound", token=token)
        if repo.gated and not token:
            raise self._refused(401, repo_id, revision, path, "GatedRepo", token=token)
        return repo

    def _refused(
        self, code: int, repo_id: str, revision: str, path: str, error: str, *, token: bool
    ) -> seeder.Failed:
        where = seeder.Where(self.url, repo_id, revision, path)
        headers: Mapping[str, str] = {"X-Error-Code": error}
        failure = where.explain(code, headers, sent_token=token)
        assert isinstance(failure, seeder.Failed)
        return failure
