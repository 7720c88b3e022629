"""Where weights live on a volume, as the seeder writes them and the engines read them: the one
statement of those paths for the emulated pods (paths below the mount, /workspace)."""

from __future__ import annotations

from frutebox_infra.recipes.base import VOLUME_PATH
from frutebox_infra.seeding.protocol import OLLAMA_REGISTRY_HOST


def below_mount(path: str) -> str | None:
    """`path` relative to the volume's mount, or None when it is elsewhere."""
    prefix = VOLUME_PATH.rstrip("/") + "/"
    clean = path.rstrip("/")
    return clean.removeprefix(prefix) if clean.startswith(prefix) else None


def on_mount(path: str) -> str:
    """A path below the volume's mount as a pod sees it."""
    return f"{VOLUME_PATH.rstrip('/')}/{path}"


def repo_dir(cache_dir: str, repo: str) -> str:
    """huggingface_hub's folder of a repo in a hub cache (`models--org--name`)."""
    return f"{cache_dir}/models--{repo.replace('/', '--')}"


def snapshot_file(cache_dir: str, repo: str, commit: str, path: str) -> str:
    return f"{repo_dir(cache_dir, repo)}/snapshots/{commit}/{path}"


def ref_file(cache_dir: str, repo: str, ref: str) -> str:
    return f"{repo_dir(cache_dir, repo)}/refs/{ref}"


def ollama_parts(tag: str) -> tuple[str, str, str]:
    """(namespace, model, tag) of an Ollama tag, as its store files them."""
    name, _, version = tag.partition(":")
    namespace, _, model = name.rpartition("/")
    return namespace or "library", model, version or "latest"


def ollama_manifest(store: str, tag: str) -> str:
    namespace, model, version = ollama_parts(tag)
    return f"{store}/manifests/{OLLAMA_REGISTRY_HOST}/{namespace}/{model}/{version}"


def ollama_blob(store: str, digest_hex: str) -> str:
    return f"{store}/blobs/sha256-{digest_hex}"


def ollama_tags(paths: list[str], store: str) -> list[str]:
    """The tags whose manifests are in a store (`model:tag`, `ns/model:tag` outside library)."""
    prefix = f"{store}/manifests/{OLLAMA_REGISTRY_HOST}/"
    tags = []
    for path in paths:
        if not path.startswith(prefix):
            continue
        parts = path.removeprefix(prefix).split("/")
        if len(parts) != 3:
            continue
        namespace, model, version = parts
        tags.append(
            f"{model}:{version}" if namespace == "library" else f"{namespace}/{model}:{version}"
        )
    return sorted(tags)
