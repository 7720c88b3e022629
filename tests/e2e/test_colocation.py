"""Co-location on the real engine against the realistic emulator: fewer pods than models,
every member answering through its pod, a member disarmed in place, and a rollback."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from frutebox_infra.stack.stack_file import load_settings
from tests.e2e.deployment import SMALL, Deployment
from tests.e2e.project import PulumiProject
from tests.emulator_client import LOOPBACK

pytestmark = pytest.mark.engine

A5000 = "NVIDIA RTX A5000"
TAGS = {"qwen3-8b": "qwen3:8b", "llama-3.2-1b": "llama3.2:1b"}


@pytest.fixture
def deployment(project: PulumiProject) -> Iterator[Deployment]:
    running = Deployment.start(project)
    yield running
    running.stop()


def ask(url: str, tag: str, key: str) -> httpx.Response:
    """What a client of the pod does: generate with one of its models, through the proxy and
    the pod's gateway, with the stack's serving key."""
    return LOOPBACK.post(f"{url}/api/generate", json={"model": tag, "prompt": "hi"},
                         headers={"Authorization": f"Bearer {key}"}, timeout=10)  # fmt: skip


def pods_by_name(deployment: Deployment) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in deployment.live_pods()}


def test_dev_with_colocation_runs_fewer_pods_every_member_answers_and_rolls_back(
    deployment: Deployment,
) -> None:
    project = deployment.project
    dev = load_settings(project.stack_path("dev"))
    models = list(dev.models)
    project.write_stack("dev", {**SMALL, "models": models})
    project.up("dev")
    apart = sorted(pods_by_name(deployment))
    assert len(apart) == len(models)
    saved_apart = project.stack_path("dev").read_text()

    project.write_stack("dev", {**SMALL, "models": models, "colocate": True})
    project.up("dev")
    live = pods_by_name(deployment)
    assert len(live) < len(models)
    key = project.outputs("dev")["servingKey"]
    outputs = project.outputs("dev")["pods"]
    shared = outputs["qwen3-8b"]
    assert outputs["llama-3.2-1b"]["podId"] == shared["podId"]
    assert shared["name"] == "frutebox-dev-qwen3-8b" and shared["sharedWith"] == ["llama-3.2-1b"]
    pod = live[shared["name"]]
    assert pod["env"]["OLLAMA_MAX_LOADED_MODELS"] == "2"
    for model_id, tag in TAGS.items():
        answer = ask(outputs[model_id]["url"], tag, key)
        assert answer.status_code == 200, answer.text
        assert answer.json()["model"] == tag
    # A member's $/h is its share; together they are what the pod bills.
    assert outputs["qwen3-8b"]["usdPerHour"] + outputs["llama-3.2-1b"]["usdPerHour"] == (
        pytest.approx(pod["cost"], abs=0.011)
    )
    assert "frutebox-dev-llama-3.2-1b" not in live

    # Rolling back is restoring the previous stack file: one pod per model again.
    project.stack_path("dev").write_text(saved_apart)
    project.up("dev")
    assert sorted(pods_by_name(deployment)) == apart
    outputs = project.outputs("dev")["pods"]
    assert ask(outputs["llama-3.2-1b"]["url"], "llama3.2:1b", key).status_code == 200


def test_disarming_a_member_updates_its_pod_in_place_and_the_others_keep_serving(
    deployment: Deployment,
) -> None:
    project = deployment.project
    # Five slots each: qwen3-8b alone needs the 24 GB card, and llama-3.2-1b fits beside it.
    slots = {"qwen3-8b": {"concurrency": 5}, "llama-3.2-1b": {"concurrency": 5}}
    both = {**SMALL, "models": ["qwen3-8b", "llama-3.2-1b"], "colocate": True, "overrides": slots}
    project.write_stack("shared", both)
    project.up("shared")
    [pod] = deployment.live_pods()
    assert pod["gpu"]["id"] == A5000
    url = project.outputs("shared")["pods"]["qwen3-8b"]["url"]
    key = project.outputs("shared")["servingKey"]
    assert ask(url, "llama3.2:1b", key).status_code == 200

    project.write_stack(
        "shared", {**both, "models": ["qwen3-8b"], "overrides": {"qwen3-8b": slots["qwen3-8b"]}}
    )
    preview = project.preview("shared")
    assert preview.urns("replace") == [] and preview.urns("delete") == []
    assert [u.rsplit("::", 1)[1] for u in preview.urns("update")] == ["qwen3-8b-pod"]
    project.up("shared")
    [after] = deployment.live_pods()
    assert after["id"] == pod["id"]
    assert "OLLAMA_MAX_LOADED_MODELS" not in after["env"]
    # Nobody deletes through the gateway: the pod's restarted launch removed the disarmed
    # member from its own store.
    assert not [r for r in deployment.requests("proxy") if r["path"] == "/api/delete"]
    assert ask(url, "qwen3:8b", key).status_code == 200
    assert ask(url, "llama3.2:1b", key).status_code == 404
