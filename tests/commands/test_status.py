"""The status shell against the emulator (the stack's outputs given): what it reads, probes and
terminates, seen through the view and its renderings."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from frutebox_infra.catalog.schema import Runtime
from frutebox_infra.commands.status import (
    StatusError,
    collect,
    probe_health,
    recorded_from_outputs,
    terminate_untracked,
)
from frutebox_infra.deploy.requests import pod_body
from frutebox_infra.emulator.server import RunningEmulator
from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.plumbing.errors import UsageError
from frutebox_infra.report.status_report import status_markdown, status_table
from frutebox_infra.runpod.tls import tls_context
from frutebox_infra.stack.endpoints import Endpoint, resolve_endpoint
from frutebox_infra.views.drift import HEALTH_PROBES, with_health
from frutebox_infra.views.status_view import DriftKind, Probe, StatusView
from tests.emulator_client import LOOPBACK, fault, place_releases, requests
from tests.factories import real_registry, settings

STACK = "s"
OWNER = "tok-status-1234"
KEY = "status-key-" + "k" * 36
"""The stack's serving key, as the deploy step fills a gateway pod's and status reads it."""


def plan() -> FleetPlan:
    return plan_fleet(real_registry(), settings(models=["qwen3-8b"]), stack=STACK)


def deploy(emulator: RunningEmulator) -> dict[str, Any]:
    """Create what `up` would (volume + the planned pod) and return the matching outputs."""
    p = plan()
    api = httpx.Client(
        base_url=emulator.url, headers={"Authorization": "Bearer k"}, verify=tls_context()
    )
    volume = api.post(
        "/v2/network-volumes", json={"name": "v", "size": 20, "dataCenter": "EU-RO-1"}
    ).json()
    model = p.models[0]
    assert model.placement is not None
    body = pod_body(
        model, model.placement, p.settings, stack=STACK, volume_id=volume["id"], owner=OWNER
    )
    place_releases(emulator, volume["id"], model.placement.pod)
    for name in model.placement.pod.serving_key_env:
        body["env"][name] = KEY  # as the deploy step fills it
    pod = api.post("/v2/pods", json=body).json()
    for _ in range(3):
        api.get(f"/v2/pods/{pod['id']}")  # PROVISIONING -> STARTING -> RUNNING
    return {
        "volume": {"id": volume["id"], "sizeGb": 20, "owner": OWNER},
        "pods": {"qwen3-8b": {"name": body["name"], "podId": pod["id"], "gpuId": "g"}},
    }


def endpoints(emulator: RunningEmulator) -> Endpoint:
    env = {
        "RUNPOD_API_KEY": "k",
        "RUNPOD_API_URL": emulator.url,
        "RUNPOD_PROXY_URL_TEMPLATE": emulator.app.proxy_url_template,
    }
    return resolve_endpoint(env)


def view_of(emulator: RunningEmulator, outputs: dict[str, Any]) -> StatusView:
    return collect(plan(), recorded_from_outputs(outputs), endpoints(emulator), serving_key=KEY)


def test_in_sync_with_health_uptime_and_spend(emulator: RunningEmulator) -> None:
    view = view_of(emulator, deploy(emulator))
    assert not view.drifted and view.heal is None
    [model] = view.models
    assert model.healthy is True and model.live is not None and model.live.status == "RUNNING"
    assert [s.hours for s in view.spend] == [24, 168]
    assert all(s.billed_usd >= 0 for s in view.spend)
    assert "in sync" in status_table(view) and "✅ in sync" in status_markdown(view)


def test_stopped_then_untracked_then_foreign(emulator: RunningEmulator) -> None:
    outputs = deploy(emulator)
    pod_id = outputs["pods"]["qwen3-8b"]["podId"]
    LOOPBACK.post(f"{emulator.url}/_emulator/pods/{pod_id}/stop").raise_for_status()
    view = view_of(emulator, outputs)
    assert view.models[0].drift is DriftKind.STOPPED and view.heal is not None
    assert "stopped" in status_table(view) and view.heal in status_markdown(view)
    # The state loses the pod (say a cancelled up): it carries our volume, so it is untracked.
    lost = {**outputs, "pods": {}}
    view = view_of(emulator, lost)
    assert [p.id for p in view.untracked] == [pod_id]
    assert terminate_untracked(view, endpoints(emulator)) == [pod_id]
    assert view_of(emulator, lost).untracked == ()


def test_no_key_is_a_usage_error_before_any_pulumi_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from frutebox_infra.commands.cli import main

    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no pulumi to run: running one would exit 1
    assert main(["status", "--stack", "dev"]) == 2


@pytest.mark.parametrize("in_file", [pytest.param(True, id="set"), pytest.param(False, id="unset")])
def test_the_stack_secret_is_read_only_where_the_stack_file_holds_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, in_file: bool
) -> None:
    from frutebox_infra.commands import status as status_read

    secret = {"frutebox-infra:runpodApiKey": {"secure": "v1:abc"}} if in_file else {}
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.s.yaml").write_text(
        yaml.safe_dump({"config": {"frutebox-infra:dataCenter": "EU-RO-1", **secret}})
    )
    asked: list[str] = []

    def stack_api_key(stack: str, project_dir: Path, env: object) -> str:
        asked.append(stack)
        return "rk-stack"

    monkeypatch.setattr(status_read, "stack_api_key", stack_api_key)
    if in_file:
        assert status_read.stack_endpoint("s", tmp_path, {}, None).has_key
        assert asked == ["s"]
    else:
        with pytest.raises(UsageError, match="needs a key"):
            status_read.stack_endpoint("s", tmp_path, {}, None)
        assert asked == []


def test_a_recorded_pod_the_list_leaves_out_is_read_by_id(
    emulator: RunningEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    from frutebox_infra.runpod.client import RunPodClient

    outputs = deploy(emulator)
    monkeypatch.setattr(RunPodClient, "list_pods", lambda self: [])  # a lagging listing
    view = view_of(emulator, outputs)
    assert view.models[0].drift is None and view.models[0].live is not None
    LOOPBACK.post(f"{emulator.url}/_emulator/pods/{view.models[0].live.id}/terminate")
    assert view_of(emulator, outputs).models[0].drift is DriftKind.MISSING


def kill_host(emulator: RunningEmulator, pod_id: str) -> None:
    LOOPBACK.post(f"{emulator.url}/_emulator/pods/{pod_id}/kill-host").raise_for_status()


def test_a_pod_whose_host_died_is_unhealthy_after_every_probe_of_the_window(
    emulator: RunningEmulator,
) -> None:
    outputs = deploy(emulator)
    kill_host(emulator, outputs["pods"]["qwen3-8b"]["podId"])
    view = collect(plan(), recorded_from_outputs(outputs), endpoints(emulator), probe=False)
    api_calls = len(emulator.app.account.requests)
    paused: list[float] = []
    probes = probe_health(
        view, endpoints(emulator), window_s=8.0, sleep=paused.append, serving_key=KEY
    )
    assert probes == {"qwen3-8b": Probe(False, HEALTH_PROBES, 8.0, 502, "/api/version")}
    assert paused == [4.0, 4.0]  # three probes spread over the window
    unhealthy = with_health(view, probes)
    assert unhealthy.models[0].drift is DriftKind.UNHEALTHY and unhealthy.heal is not None
    health = requests(emulator, "proxy")
    # Each probe carries the serving key (an Ollama pod runs the gateway).
    assert len(health) == HEALTH_PROBES and all(r["authorization"] for r in health)
    # The probes are the proxy's, never the API's quota.
    assert len(emulator.app.account.requests) == api_calls + HEALTH_PROBES


def test_a_healthy_pod_answers_the_first_probe(emulator: RunningEmulator) -> None:
    outputs = deploy(emulator)
    view = collect(plan(), recorded_from_outputs(outputs), endpoints(emulator), probe=False)
    paused: list[float] = []
    probes = probe_health(view, endpoints(emulator), sleep=paused.append, serving_key=KEY)
    assert probes["qwen3-8b"].ok and probes["qwen3-8b"].probes == 1 and paused == []


def test_pods_are_probed_in_parallel(emulator: RunningEmulator) -> None:
    outputs = deploy(emulator)
    second = deploy(emulator)["pods"]["qwen3-8b"]
    outputs["pods"]["llama"] = {**second, "name": "other"}
    view = collect(plan(), recorded_from_outputs(outputs), endpoints(emulator), probe=False)
    target = view.models[0]
    assert target.live is not None
    twin = replace(target, model_id="twin", live=replace(target.live, id=second["podId"]))
    both = replace(view, models=(target, twin))
    kill_host(emulator, target.live.id)
    kill_host(emulator, second["podId"])
    # Each probe's pause waits for the other pod's: probed one after the other, it would
    # break the barrier instead.
    barrier = threading.Barrier(2, timeout=10)
    probes = probe_health(
        both, endpoints(emulator), window_s=1.0, sleep=lambda s: barrier.wait(), serving_key=KEY
    )
    assert {m: p.ok for m, p in probes.items()} == {"qwen3-8b": False, "twin": False}


def test_terminate_untracked_deletes_our_untracked_volume_never_a_foreign_one(
    emulator: RunningEmulator,
) -> None:
    outputs = deploy(emulator)
    account = emulator.app.account
    duplicate = account.create_volume({"name": f"frutebox-s-weights-{OWNER}", "size": 30,
                                       "dataCenter": "EU-RO-1"})  # fmt: skip
    theirs = account.create_volume({"name": "frutebox-s-weights", "size": 30,
                                    "dataCenter": "EU-RO-1"})  # fmt: skip
    view = view_of(emulator, outputs)
    assert [v.id for v in view.untracked_volumes] == [duplicate.id]
    assert [v.id for v in view.foreign_volumes] == [theirs.id]
    assert view.heal == f"frutebox status --stack {STACK} --terminate-untracked"
    assert terminate_untracked(view, endpoints(emulator)) == [duplicate.id]
    again = view_of(emulator, outputs)
    assert again.untracked_volumes == () and [v.id for v in again.foreign_volumes] == [theirs.id]
    assert not again.drifted


@pytest.mark.parametrize(
    ("scope", "status", "says"),
    [
        pytest.param("revoked", 401, "does not accept the API key from environment variable"
                     " RUNPOD_API_KEY", id="revoked"),
        pytest.param("read-only", 403, "may not write", id="read-only-terminating"),
    ],
)  # fmt: skip
def test_a_refused_key_is_named_with_what_status_needs(
    emulator: RunningEmulator, scope: str, status: int, says: str
) -> None:
    outputs = deploy(emulator)
    lost = {**outputs, "pods": {}}  # an untracked pod for --terminate-untracked to remove
    view = view_of(emulator, lost)
    emulator.app.account.set_key("k", scope)
    with pytest.raises(StatusError) as caught:
        if scope == "revoked":
            view_of(emulator, lost)
        else:
            terminate_untracked(view, endpoints(emulator))
    message = str(caught.value)
    assert f"{status} " in message and says in message
    needs = "read access" if scope == "revoked" else "write access"
    assert needs in message and "`frutebox status" in message


@pytest.mark.parametrize("attempts", [pytest.param(1, id="one"), pytest.param(3, id="three")])
def test_a_runpod_hiccup_is_retried_as_the_deploy_step_retries(
    emulator: RunningEmulator, monkeypatch: pytest.MonkeyPatch, attempts: int
) -> None:
    """The deploy step's FRUTEBOX_RETRY_* pace status too (tests/e2e set them to their clock)."""
    monkeypatch.setenv("FRUTEBOX_RETRY_ATTEMPTS", str(attempts))
    monkeypatch.setenv("FRUTEBOX_RETRY_BACKOFF_S", "0")
    fault(emulator, {"op": "pods.list", "action": "return-503", "times": 3})
    with pytest.raises(StatusError, match="503"):
        view_of(emulator, {"volume": None, "pods": {}})
    assert [r["status"] for r in requests(emulator, "pods.list")] == [503] * attempts


def test_the_serving_key_goes_to_a_gateway_pod_s_probe_only(emulator: RunningEmulator) -> None:
    key = "status-" + "s" * 40
    # Ollama open here (a registry without its routes, so it runs no gateway), ComfyUI keyed.
    real = real_registry()
    routes = {k: v for k, v in real.engine_routes.items() if k is not Runtime.OLLAMA}
    registry = replace(real, engine_routes=routes)
    both = plan_fleet(registry, settings(models=["qwen3-8b", "sdxl-1.0"]), stack=STACK)
    api = httpx.Client(
        base_url=emulator.url, headers={"Authorization": "Bearer k"}, verify=tls_context()
    )
    volume = api.post(
        "/v2/network-volumes", json={"name": "v", "size": 40, "dataCenter": "EU-RO-1"}
    ).json()
    pods = {}
    for model in both.models:
        assert model.placement is not None
        body = pod_body(model, model.placement, both.settings, stack=STACK,
                        volume_id=volume["id"], owner=OWNER)  # fmt: skip
        place_releases(emulator, volume["id"], model.placement.pod)
        for name in model.placement.pod.serving_key_env:
            body["env"][name] = key  # as the deploy step fills it
        pod = api.post("/v2/pods", json=body).json()
        for _ in range(3):
            api.get(f"/v2/pods/{pod['id']}")
        pods[model.model_id] = {"name": body["name"], "podId": pod["id"], "gpuId": "g"}
    outputs = {"volume": {"id": volume["id"], "sizeGb": 40, "owner": OWNER}, "pods": pods}
    view = collect(both, recorded_from_outputs(outputs), endpoints(emulator), probe=False)
    keyed = probe_health(view, endpoints(emulator), window_s=0.0, serving_key=key)
    assert keyed["sdxl-1.0"].ok and keyed["qwen3-8b"].ok
    sent = {r["pod"]: r["authorization"] for r in requests(emulator, "proxy")}
    assert sent == {pods["sdxl-1.0"]["podId"]: True, pods["qwen3-8b"]["podId"]: False}
    # Without the key, the gateway answers its health path 401: the pod reads unhealthy.
    bare = probe_health(view, endpoints(emulator), window_s=0.0, probes=1)
    assert not bare["sdxl-1.0"].ok and bare["sdxl-1.0"].last == 401
