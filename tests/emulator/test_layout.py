"""Paths of weights on a volume, as the seeder writes them and the engines read them."""

from __future__ import annotations

import pytest

from frutebox_infra.emulator import layout


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        pytest.param("/workspace/huggingface", "huggingface", id="below"),
        pytest.param("/workspace/ollama/models/x/", "ollama/models/x", id="trailing-slash"),
        pytest.param("/root/.cache", None, id="elsewhere"),
        pytest.param("/workspacex/a", None, id="a-lookalike-prefix"),
    ],
)
def test_paths_are_taken_relative_to_the_mount(path: str, expected: str | None) -> None:
    assert layout.below_mount(path) == expected


def test_a_hub_cache_file_is_filed_under_its_repo_snapshot_and_refs() -> None:
    assert layout.snapshot_file("hf/hub", "Qwen/Q-8B", "c" * 40, "a/b.json") == (
        f"hf/hub/models--Qwen--Q-8B/snapshots/{'c' * 40}/a/b.json"
    )
    assert layout.ref_file("hf/hub", "Qwen/Q-8B", "main") == "hf/hub/models--Qwen--Q-8B/refs/main"


@pytest.mark.parametrize(
    ("tag", "manifest", "listed"),
    [
        pytest.param("qwen3:8b", "library/qwen3/8b", "qwen3:8b", id="library"),
        pytest.param("llama3.2", "library/llama3.2/latest", "llama3.2:latest", id="no-tag"),
        pytest.param("me/model:v1", "me/model/v1", "me/model:v1", id="namespaced"),
    ],
)
def test_ollama_stores_file_a_tag_by_namespace_model_and_tag(
    tag: str, manifest: str, listed: str
) -> None:
    path = layout.ollama_manifest("s", tag)
    assert path == f"s/manifests/registry.ollama.ai/{manifest}"
    assert layout.ollama_tags([path, "s/blobs/sha256-00", "other/x"], "s") == [listed]
