"""Ollama: its pinned release archive run from a shell-capable image, the tags pulled by the
pod's own launch before its server answers, on loopback behind the gateway."""

from __future__ import annotations

import pytest

from frutebox_infra.catalog.schema import Registry, Runtime
from frutebox_infra.planner.plan import plan_fleet
from frutebox_infra.recipes import PodSpec
from frutebox_infra.recipes.gateway import CONFIG_ENV, KEY_ENV, caddyfile, starts_gateway
from frutebox_infra.recipes.ollama import PROGRAM, PULLS_ENV, Ollama
from tests.factories import ollama_model, server_words, settings, words
from tests.recipes.conftest import BuildPod

A4000 = "NVIDIA RTX A4000"


@pytest.mark.parametrize(
    ("model_id", "tag"),
    [
        pytest.param("qwen3-8b", "qwen3:8b", id="qwen3-8b"),
        pytest.param("llama-3.2-1b", "llama3.2:1b", id="llama-3.2-1b"),
    ],
)
def test_the_launch_execs_the_release_server_and_pulls_the_pinned_tag(
    build_pod: BuildPod, model_id: str, tag: str
) -> None:
    pod = build_pod(model_id, Runtime.OLLAMA, A4000, 1)
    # No ENTRYPOINT: the whole command is ours; its last line execs the release's server.
    assert words(pod.args)[:2] == ["bash", "-c"]
    assert server_words(pod.args) == [PROGRAM, "serve"]
    assert pod.ollama_pulls == (tag,) and pod.env[PULLS_ENV] == tag
    assert model_id not in pod.ollama_pulls


def test_the_release_is_checked_and_unpacked_before_anything_runs(
    build_pod: BuildPod, catalog: Registry
) -> None:
    pod = build_pod("qwen3-8b", Runtime.OLLAMA, A4000, 1)
    image = catalog.images[Runtime.OLLAMA]
    assert image.engine_archive is not None
    script = words(pod.args)[2]
    install = script.index(image.engine_archive.sha256)
    assert script.index(image.engine_archive.url) < install
    assert install < script.index(f"{PROGRAM} serve &") < script.index(f"\nexec {PROGRAM} serve")
    assert "|| exit 1" in script[install:].splitlines()[0]
    # Pulls go through a first server on the pod's own address, stopped before the exec.
    assert script.index(f'{PROGRAM} pull "$tag"') < script.rindex('kill "$first"')


def test_without_a_gateway_the_server_listens_on_all_interfaces(build_pod: BuildPod) -> None:
    pod = build_pod("qwen3-8b", Runtime.OLLAMA, A4000, 1)
    assert pod.image.startswith("python:")
    assert pod.port == 11434
    assert pod.env["OLLAMA_HOST"] == "0.0.0.0:11434"
    assert pod.env["OLLAMA_MODELS"].startswith("/workspace/")
    assert not starts_gateway(words(pod.args)) and not pod.serving_key_env


def planned_pod(catalog: Registry, models: list[str], **config: object) -> PodSpec:
    plan = plan_fleet(catalog, settings(models=models, budgetUsdPerHour=100, **config), stack="s")
    m = plan.model(models[0])
    assert m is not None and m.placement is not None and not plan.problems, plan.problems
    return m.placement.pod


def test_behind_the_gateway_it_listens_on_loopback(catalog: Registry) -> None:
    pod = planned_pod(catalog, ["qwen3-8b"])
    assert starts_gateway(words(pod.args))
    assert pod.env["OLLAMA_HOST"] == "127.0.0.1:21434" and pod.port == 11434
    assert pod.serving_key_env == (KEY_ENV,) and KEY_ENV not in pod.env
    assert pod.env[CONFIG_ENV] == caddyfile(
        catalog.engine_routes[Runtime.OLLAMA], port=11434, upstream_port=21434
    )
    script = words(pod.args)[2]
    assert script.index(" start --config ") < script.index(f"{PROGRAM} serve &")


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
    # The launch makes sure the store holds every member's tag before its server answers.
    assert shared.env[PULLS_ENV] == "qwen3:8b llama3.2:1b"
    unchanged = {k: v for k, v in shared.env.items() if k not in ("OLLAMA_MAX_LOADED_MODELS",
                                                                   PULLS_ENV)}  # fmt: skip
    assert unchanged == {k: v for k, v in qwen.env.items() if k != PULLS_ENV}
    assert "OLLAMA_MAX_LOADED_MODELS" not in qwen.env  # a pod alone is unchanged
