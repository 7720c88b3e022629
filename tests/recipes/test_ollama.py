"""Ollama: args are an ollama sub-command only; the pinned tag is pulled another way."""

from __future__ import annotations

import pytest

from frutebox_infra.catalog.schema import Runtime
from frutebox_infra.recipes.ollama import Ollama
from tests.factories import ollama_model, words
from tests.recipes.conftest import BuildPod

A4000 = "NVIDIA RTX A4000"


@pytest.mark.parametrize(
    ("model_id", "tag"),
    [
        pytest.param("qwen3-8b", "qwen3:8b", id="qwen3-8b"),
        pytest.param("llama-3.2-1b", "llama3.2:1b", id="llama-3.2-1b"),
    ],
)
def test_args_are_serve_and_the_pull_is_the_pinned_tag(
    build_pod: BuildPod, model_id: str, tag: str
) -> None:
    pod = build_pod(model_id, Runtime.OLLAMA, A4000, 1)
    # ENTRYPOINT is /bin/ollama: anything but a sub-command would be `ollama <garbage>`.
    assert words(pod.args) == ["serve"]
    assert pod.ollama_pulls == (tag,)
    assert model_id not in pod.ollama_pulls


def test_server_listens_on_all_interfaces_and_caches_on_the_volume(build_pod: BuildPod) -> None:
    pod = build_pod("qwen3-8b", Runtime.OLLAMA, A4000, 1)
    assert pod.image.startswith("ollama/ollama:")
    assert pod.port == 11434
    assert pod.env["OLLAMA_HOST"] == "0.0.0.0:11434"
    assert pod.env["OLLAMA_MODELS"].startswith("/workspace/")


def test_each_pod_has_its_own_model_store_and_a_shared_pod_keeps_its_anchors(
    build_pod: BuildPod,
) -> None:
    qwen = build_pod("qwen3-8b", Runtime.OLLAMA, A4000, 1)
    llama = build_pod("llama-3.2-1b", Runtime.OLLAMA, A4000, 1)
    # A member deleted from one pod's store can never be a model another pod serves.
    assert qwen.env["OLLAMA_MODELS"] != llama.env["OLLAMA_MODELS"]
    assert qwen.env["OLLAMA_MODELS"].endswith("/qwen3-8b")
    assert Ollama().shared_pod([qwen, llama]).env["OLLAMA_MODELS"] == qwen.env["OLLAMA_MODELS"]


def test_context_and_slots_reach_the_server(build_pod: BuildPod) -> None:
    pod = build_pod("qwen3-8b", Runtime.OLLAMA, A4000, 1, context_tokens=8192, concurrency=2)
    assert pod.env["OLLAMA_CONTEXT_LENGTH"] == "8192"
    assert pod.env["OLLAMA_NUM_PARALLEL"] == "2"


def test_a_gated_hugging_face_original_needs_no_token_through_ollama(build_pod: BuildPod) -> None:
    pod = build_pod("llama-3.2-1b", Runtime.OLLAMA, A4000, 1)
    assert pod.secret_env == ()
    gated = ollama_model("g", source={"ollama_tag": "g:1b", "gated": True, "hf_repo": "meta/g"})
    assert Ollama().gated_pull(gated) is False


def test_an_unknown_size_is_a_gap_not_a_guess() -> None:
    reason = Ollama().missing(ollama_model("sizeless", weights={"format": "gguf"}))
    assert reason is not None and "vram_gb" in reason


def test_a_shared_pod_keeps_every_member_loaded_and_pulls_each(build_pod: BuildPod) -> None:
    qwen = build_pod("qwen3-8b", Runtime.OLLAMA, A4000, 1)
    llama = build_pod("llama-3.2-1b", Runtime.OLLAMA, A4000, 1)
    shared = Ollama().shared_pod([qwen, llama])
    assert shared.ollama_pulls == ("qwen3:8b", "llama3.2:1b")
    assert shared.env["OLLAMA_MAX_LOADED_MODELS"] == "2"
    assert shared.env["OLLAMA_KEEP_ALIVE"] == "-1"  # never evicted for idling
    assert {k: v for k, v in shared.env.items() if k != "OLLAMA_MAX_LOADED_MODELS"} == qwen.env
    assert "OLLAMA_MAX_LOADED_MODELS" not in qwen.env  # a pod alone is unchanged
