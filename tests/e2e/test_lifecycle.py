"""The whole lifecycle on the real engine against the emulator: up, change, roll back, destroy."""

from __future__ import annotations

import json
from typing import Any

import pytest

from frutebox_infra.plan import plan_fleet, pod_body
from frutebox_infra.settings import load_settings
from tests.e2e.deployment import API_KEY, HF_TOKEN, SMALL, Deployment
from tests.e2e.project import PulumiProject
from tests.factories import SECRET_SIG, SECRET_SIG_VALUE, real_registry

A4000, A5000 = "NVIDIA RTX A4000", "NVIDIA RTX A5000"


def _live_names(deployment: Deployment) -> dict[str, tuple[str, int]]:
    return {p["name"]: (p["gpu"]["id"], p["gpu"]["count"]) for p in deployment.live_pods()}


def test_up_creates_the_volume_and_exactly_the_pods_the_plan_promised(
    deployment: Deployment,
) -> None:
    project = deployment.project
    project.up("dev")
    settings = load_settings(project.stack_path("dev"))
    plan = plan_fleet(real_registry(), settings, stack="dev")
    [volume] = deployment.volumes()
    assert volume["size"] == plan.volume.size_gb and volume["dataCenter"] == "EU-RO-1"
    bodies = {b["name"]: b for b in deployment.created_bodies()}
    assert len(bodies) == len(plan.models)
    for model in plan.models:
        assert model.placement is not None
        expected = pod_body(model, model.placement, settings, stack="dev", volume_id=volume["id"])
        assert bodies[expected["name"]] == expected
    outputs = project.outputs("dev")
    live = {p["name"]: p for p in deployment.live_pods()}
    for model_id, out in outputs["pods"].items():
        assert out["name"].endswith(model_id)
        pod = live[out["name"]]
        assert out["podId"] == pod["id"]
        assert out["gpuId"] == pod["gpu"]["id"]
        assert out["usdPerHour"] == pytest.approx(pod["cost"])
    assert outputs["volume"]["id"] == volume["id"]


def test_ollama_pods_pull_their_pinned_tag_once_serving(deployment: Deployment) -> None:
    deployment.project.write_stack("small", {**SMALL, "models": ["qwen3-8b"]})
    deployment.project.up("small")
    pulls = [r for r in deployment.requests("proxy") if r["path"].endswith("/api/pull")]
    assert [p["body"]["model"] for p in pulls] == ["qwen3:8b"]


def test_cheapest_gpu_out_of_stock_lands_on_the_next_candidate(project: PulumiProject) -> None:
    deployment = Deployment.start(project, stock={A4000: 0})
    try:
        project.write_stack("small", {**SMALL, "models": ["qwen3-8b"]})
        project.up("small")
        assert _live_names(deployment) == {"frutebox-small-qwen3-8b": (A5000, 1)}
        pod = project.outputs("small")["pods"]["qwen3-8b"]
        assert pod["gpuId"] == A5000 and pod["usdPerHour"] == pytest.approx(0.26)
    finally:
        deployment.stop()


def test_every_candidate_out_of_stock_fails_up_and_leaves_no_pod(project: PulumiProject) -> None:
    deployment = Deployment.start(project, stock={A4000: 0, A5000: 0})
    try:
        project.write_stack("small", {**SMALL, "models": ["qwen3-8b"]})
        proc = project.up("small", check=False)
        assert proc.returncode != 0
        assert "no longer any instances available" in proc.stdout + proc.stderr
        assert deployment.live_pods() == []
    finally:
        deployment.stop()


def test_a_5xx_after_create_adopts_the_pod_instead_of_creating_a_second(
    deployment: Deployment,
) -> None:
    deployment.fault({"op": "pods.create", "action": "return-503-after-create"})
    deployment.project.write_stack("small", {**SMALL, "models": ["qwen3-8b"]})
    deployment.project.up("small")
    pods = [p for p in deployment.state()["pods"] if p["name"] == "frutebox-small-qwen3-8b"]
    assert len(pods) == 1 and pods[0]["status"] == "RUNNING"


def test_a_429_is_retried_after_retry_after(deployment: Deployment) -> None:
    deployment.fault({"op": "pods.create", "action": "return-429", "retryAfter": 1})
    deployment.project.write_stack("small", {**SMALL, "models": ["qwen3-8b"]})
    deployment.project.up("small")
    statuses = [r["status"] for r in deployment.requests("pods.create")]
    assert statuses == [429, 201]
    assert len(deployment.live_pods()) == 1


def test_a_pod_that_never_becomes_healthy_is_terminated_and_up_fails(
    deployment: Deployment,
) -> None:
    deployment.fault({"op": "pods.create", "action": "never-healthy"})
    deployment.project.write_stack("small", {**SMALL, "models": ["qwen3-8b"]})
    proc = deployment.project.up("small", check=False)
    assert proc.returncode != 0
    assert "health" in (proc.stdout + proc.stderr).lower()
    assert deployment.live_pods() == []


def test_arming_changing_and_rolling_back(deployment: Deployment) -> None:
    project = deployment.project
    project.write_stack("fleet", {**SMALL, "models": ["qwen3-8b", "llama-3.2-1b"]})
    project.up("fleet")
    before = _live_names(deployment)
    [volume] = deployment.volumes()
    saved = project.stack_path("fleet").read_text()

    # Arming another model is exactly one more server and its pod.
    project.write_stack("fleet", {**SMALL, "models": ["qwen3-8b", "llama-3.2-1b", "sdxl-1.0"]})
    preview = project.preview("fleet")
    assert sorted(u.rsplit("::", 1)[1] for u in preview.urns("create")) == [
        "sdxl-1.0",
        "sdxl-1.0-pod",
    ]
    assert preview.urns("replace") == [] and preview.urns("delete") == []

    # A placement-affecting change is a replace; an in-place one is an update.
    changed: dict[str, Any] = {
        **SMALL,
        "models": ["qwen3-8b", "llama-3.2-1b"],
        "overrides": {"qwen3-8b": {"gpu": A5000}, "llama-3.2-1b": {"context": 8192}},
    }
    project.write_stack("fleet", changed)
    preview = project.preview("fleet")
    assert [u.rsplit("::", 1)[1] for u in preview.urns("replace")] == ["qwen3-8b-pod"]
    assert [u.rsplit("::", 1)[1] for u in preview.urns("update")] == ["llama-3.2-1b-pod"]
    project.up("fleet")
    assert _live_names(deployment)["frutebox-fleet-qwen3-8b"] == (A5000, 1)
    llama = next(p for p in deployment.live_pods() if p["name"].endswith("llama-3.2-1b"))
    assert llama["env"]["OLLAMA_CONTEXT_LENGTH"] == "8192"

    # Rolling back is restoring the previous stack file: RunPod returns to the earlier pods.
    project.stack_path("fleet").write_text(saved)
    project.up("fleet")
    assert _live_names(deployment) == before
    assert [v["id"] for v in deployment.volumes()] == [volume["id"]]

    # Disarming everything keeps the volume (it still costs storage).
    project.write_stack("fleet", {**SMALL, "models": []})
    project.up("fleet")
    assert deployment.live_pods() == []
    assert [v["id"] for v in deployment.volumes()] == [volume["id"]]


def test_destroy_terminates_every_pod_and_keeps_the_protected_volume(
    deployment: Deployment,
) -> None:
    project = deployment.project
    project.up("dev")
    assert deployment.live_pods()
    refused = project.pulumi("destroy", "--stack", "dev", "--yes", check=False)
    assert refused.returncode != 0
    assert "protected" in refused.stdout + refused.stderr
    project.pulumi("destroy", "--stack", "dev", "--yes", "--exclude-protected")
    assert deployment.live_pods() == []
    [volume] = deployment.volumes()
    # Only an explicit unprotect lets the volume go.
    urn = next(
        line.split()[-1]
        for line in project.pulumi("stack", "--stack", "dev", "--show-urns").stdout.splitlines()
        if "weights-volume" in line and "URN:" in line
    )
    project.pulumi("state", "unprotect", urn, "--stack", "dev", "--yes")
    project.pulumi("destroy", "--stack", "dev", "--yes")
    assert deployment.volumes() == []
    assert volume["id"] not in [v["id"] for v in deployment.volumes()]


@pytest.mark.engine
@pytest.mark.parametrize("where", ["secret-config", "environment"])
def test_secrets_never_reach_state_logs_or_outputs(deployment: Deployment, where: str) -> None:
    project = deployment.project
    project.write_stack("gated", {**SMALL, "models": ["stable-audio-open-1.0"]})
    project.init("gated")
    if where == "secret-config":
        project.extra_env.pop("RUNPOD_API_KEY")
        project.pulumi("config", "set", "--secret", "runpodApiKey", API_KEY, "--stack", "gated")
        project.pulumi("config", "set", "--secret", "hfToken", HF_TOKEN, "--stack", "gated")
    else:
        project.extra_env["HF_TOKEN"] = HF_TOKEN
    up = project.up("gated")
    outputs = project.pulumi("stack", "output", "--stack", "gated", "--json").stdout
    exported = project.pulumi("stack", "export", "--stack", "gated").stdout
    seen = "\n".join([up.stdout, up.stderr, outputs, exported, project.state_text(),
                      project.stack_path("gated").read_text()])  # fmt: skip
    assert API_KEY not in seen and HF_TOKEN not in seen
    # Secret by construction (additional_secret_outputs), not by the provider: the log
    # output is encrypted, the result JSON the outputs come from stays readable.
    commands = [r for r in json.loads(exported)["deployment"]["resources"]
                if r["type"] == "command:local:Command"]  # fmt: skip
    assert len(commands) == 3
    for command in commands:
        assert command["outputs"]["stderr"].get(SECRET_SIG) == SECRET_SIG_VALUE
        assert isinstance(command["outputs"]["stdout"], str)
    # ...while the pod that needs the token got it, filled in at the last moment.
    [body] = deployment.created_bodies()
    assert body["env"]["HF_TOKEN"] == HF_TOKEN
