"""The whole lifecycle on the real engine against the realistic emulator (RunPod's documented
unkindness, on a scaled clock): up, change, roll back, destroy."""

from __future__ import annotations

import json
from typing import Any

import pytest

from frutebox_infra.deploy.requests import pod_body
from frutebox_infra.planner.plan import plan_fleet
from frutebox_infra.stack.stack_file import load_settings
from tests.e2e.deployment import API_KEY, HF_TOKEN, SMALL, TIME_SCALE, Deployment
from tests.e2e.project import PulumiProject
from tests.factories import SECRET_SIG, SECRET_SIG_VALUE, real_registry

pytestmark = pytest.mark.engine

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
    # The stack's token: minted with the volume, in its name and in every pod's env.
    owner = volume["name"].removeprefix("frutebox-dev-weights-")
    assert len(owner) == 16
    outputs = project.outputs("dev")
    for model in plan.models:
        assert model.placement is not None
        expected = pod_body(
            model, model.placement, settings, stack="dev", volume_id=volume["id"], owner=owner
        )
        # A gateway pod's key, filled in by the deploy step at the last moment.
        for name in model.placement.pod.serving_key_env:
            expected["env"][name] = outputs["servingKey"]
        assert bodies[expected["name"]] == expected
    live = {p["name"]: p for p in deployment.live_pods()}
    for model_id, out in outputs["pods"].items():
        assert out["name"].endswith(model_id)
        pod = live[out["name"]]
        assert out["podId"] == pod["id"]
        assert out["gpuId"] == pod["gpu"]["id"]
        assert out["usdPerHour"] == pytest.approx(pod["cost"])
    assert outputs["volume"]["id"] == volume["id"]


def test_an_ollama_pods_launch_pulls_its_pinned_tag_before_it_serves(
    deployment: Deployment,
) -> None:
    deployment.project.write_stack("small", {**SMALL, "models": ["qwen3-8b"]})
    deployment.project.up("small")
    # Behind its gateway no client pulls: the pod's own launch did, and the deploy step only
    # saw the tag listed.
    proxied = deployment.requests("proxy")
    assert not [r for r in proxied if r["path"].endswith("/api/pull")]
    assert [r for r in proxied if r["path"].endswith("/api/tags")]
    (pod,) = [p for p in deployment.state()["pods"] if p["name"] == "frutebox-small-qwen3-8b"
              and not p["emulator"]["foreign"]]  # fmt: skip
    assert pod["emulator"]["pulled"] == ["qwen3:8b"]


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


def test_a_late_appearing_duplicate_of_an_ambiguous_create_is_cleaned(
    deployment: Deployment,
) -> None:
    # The create happens but answers 503; the listing lags, so the look right after sees
    # nothing, the retry creates a second pod, and the look after the delay removes the first.
    deployment.fault({"op": "pods.create", "action": "return-503-after-create"})
    deployment.project.write_stack("small", {**SMALL, "models": ["qwen3-8b"]})
    up = deployment.project.up("small")
    ours = [p for p in deployment.state()["pods"] if p["name"] == "frutebox-small-qwen3-8b"
            and not p["emulator"]["foreign"]]  # fmt: skip
    assert sorted(p["status"] for p in ours) == ["RUNNING", "TERMINATED"]
    [live] = deployment.live_pods()
    assert deployment.project.outputs("small")["pods"]["qwen3-8b"]["podId"] == live["id"]
    assert "a duplicate of" in up.stdout + up.stderr


def test_a_429_is_retried_after_retry_after(deployment: Deployment) -> None:
    deployment.fault({"op": "pods.create", "action": "return-429", "retryAfter": 1})
    deployment.project.write_stack("small", {**SMALL, "models": ["qwen3-8b"]})
    deployment.project.up("small")
    statuses = [r["status"] for r in deployment.requests("pods.create")]
    assert statuses == [429, 201]
    assert deployment.project.outputs("small")["pods"]["qwen3-8b"]["podId"]
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
    [minted] = [r for r in commands if r["urn"].endswith("::serving-key")]
    assert minted["outputs"]["stdout"].get(SECRET_SIG) == SECRET_SIG_VALUE  # the key itself
    commands.remove(minted)
    assert len(commands) == 3
    for command in commands:
        assert command["outputs"]["stderr"].get(SECRET_SIG) == SECRET_SIG_VALUE
        assert isinstance(command["outputs"]["stdout"], str)
    # ...while the pod that needs the token got it, filled in at the last moment.
    [body] = deployment.created_bodies()
    assert body["env"]["HF_TOKEN"] == HF_TOKEN


def test_a_foreign_pod_with_our_name_survives_every_up_and_destroy(
    deployment: Deployment,
) -> None:
    project = deployment.project
    before = {p["id"]: p["status"] for p in deployment.foreign_pods()}
    assert any(p["name"] == "frutebox-small-qwen3-8b" for p in deployment.foreign_pods())
    project.write_stack("small", {**SMALL, "models": ["qwen3-8b"]})
    up = project.up("small")
    assert "leaving it alone" in up.stdout + up.stderr
    project.write_stack("small", {**SMALL, "models": ["qwen3-8b"],
                                  "overrides": {"qwen3-8b": {"gpu": A5000}}})  # fmt: skip
    project.up("small")  # a replace: delete ours, create anew
    project.pulumi("destroy", "--stack", "small", "--yes", "--exclude-protected")
    assert deployment.live_pods() == []
    assert {p["id"]: p["status"] for p in deployment.foreign_pods()} == before
    assert set(before.values()) == {"RUNNING"}
    # ...and the foreign volume with our volume's name was never adopted.
    [ours] = deployment.volumes()
    assert ours["name"] != "frutebox-small-weights"


def test_ten_minutes_of_503_and_429_while_waiting_do_not_kill_a_healthy_pod(
    deployment: Deployment,
) -> None:
    project = deployment.project
    # Ten minutes on the emulator's clock (6 s real at x100): five of 503 on every read of the
    # pod, then five of 429 asking for 30 s each. The step's own bounds stay longer.
    project.extra_env.update(FRUTEBOX_RUNNING_TIMEOUT_S="60", FRUTEBOX_HEALTH_TIMEOUT_S="60")
    deployment.fault(
        {"op": "pods.get", "action": "return-503", "forSeconds": 300},
        {"op": "pods.get", "action": "return-429", "retryAfter": 30, "forSeconds": 300},
    )
    project.write_stack("small", {**SMALL, "models": ["qwen3-8b"]})
    project.up("small")
    [live] = deployment.live_pods()
    assert live["status"] == "RUNNING"
    gets = deployment.requests("pods.get")
    statuses = [r["status"] for r in gets]
    assert 503 in statuses and 429 in statuses and statuses[-1] == 200
    failing = [r["at"] for r in gets if r["status"] in (503, 429)]
    recovered = next(r["at"] for r in gets if r["at"] > max(failing) and r["status"] == 200)
    assert (recovered - min(failing)) * TIME_SCALE >= 599  # the storm lasted ten minutes
    assert not deployment.requests("pods.delete")


def test_a_cuda_13_image_on_a_gpu_whose_hosts_report_12_moves_to_the_next_candidate(
    project: PulumiProject,
) -> None:
    config = {"dataCenter": "EU-RO-1", "budgetUsdPerHour": 20, "maxFallbackPremium": 3,
              "models": ["qwen-3.6-27b"]}  # fmt: skip
    project.write_stack("cuda", config)
    model = plan_fleet(real_registry(), load_settings(project.stack_path("cuda")),
                       stack="cuda").models[0]  # fmt: skip
    first, second = model.candidates[0], model.candidates[1]
    assert first.image.min_cuda_version == "13.0"
    deployment = Deployment.start(project, cuda_versions={first.gpu.id: ("12.4", "12.8")})
    try:
        up = project.up("cuda")
        [live] = deployment.live_pods()
        assert (live["gpu"]["id"], live["gpu"]["count"]) == (second.gpu.id, second.count)
        assert "no-capacity" in up.stdout + up.stderr
        gpu_creates = [r for r in deployment.requests("pods.create") if "gpu" in r["body"]]
        [refused, placed] = gpu_creates  # its seeding CPU pod's create came before
        assert refused["status"] == 400 and refused["body"]["gpu"]["minCudaVersion"] == "13.0"
        assert placed["status"] == 201
    finally:
        deployment.stop()


def test_a_v2_base_url_works_and_a_wrong_path_fails_loudly(deployment: Deployment) -> None:
    project = deployment.project
    base = project.extra_env["RUNPOD_API_URL"]
    project.extra_env["RUNPOD_API_URL"] = base + "/v2/"  # as RunPod's docs print it
    project.write_stack("small", {**SMALL, "models": ["qwen3-8b"]})
    project.up("small")
    [live] = deployment.live_pods()
    # A wrong path: every call is "not found". The stack's changed URL (nothing exported, so
    # the stack's key is the one used) makes Pulumi run the pod's and the volume's update,
    # which look their resources up: a 404 is never read as "gone".
    project.extra_env["RUNPOD_API_URL"] = ""
    project.write_stack("small", {**SMALL, "models": ["qwen3-8b"],
                                  "runpodApiUrl": base + "/api/wrong"})  # fmt: skip
    failed = project.up("small", check=False)
    assert failed.returncode != 0
    assert "API URL is wrong" in failed.stdout + failed.stderr
    assert [p["id"] for p in deployment.live_pods()] == [live["id"]]
    assert len(deployment.volumes()) == 1 and not deployment.requests("pods.create")[1:]


def test_an_in_place_change_patches_and_waits_for_the_restart(deployment: Deployment) -> None:
    project = deployment.project
    project.write_stack("small", {**SMALL, "models": ["qwen3-8b"]})
    project.up("small")
    [before] = deployment.live_pods()
    project.write_stack("small", {**SMALL, "models": ["qwen3-8b"],
                                  "overrides": {"qwen3-8b": {"context": 8192}}})  # fmt: skip
    project.up("small")
    [after] = deployment.live_pods()
    old_start = before["emulator"]["started_wall"]
    assert after["id"] == before["id"] and after["emulator"]["started_wall"] != old_start
    state = deployment.state()["requests"]
    patched = next(i for i, r in enumerate(state) if r["op"] == "pods.update")
    probes = [r for r in state[patched:] if r["op"] == "proxy"]
    # RunPod kept the old container RUNNING for a while; no probe was read off it.
    assert probes and all(r["startedWall"] not in (None, old_start) for r in probes)
