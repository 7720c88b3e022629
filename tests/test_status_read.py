"""The status shell against the emulator (the stack's outputs given): what it reads, probes and
terminates, seen through the view and its renderings."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from frutebox_infra.deploy_requests import pod_body
from frutebox_infra.drift import DriftKind, StatusView
from frutebox_infra.emulator.server import RunningEmulator
from frutebox_infra.endpoints import Endpoint, resolve_endpoint
from frutebox_infra.plan import FleetPlan, plan_fleet
from frutebox_infra.report.status_report import status_markdown, status_table
from frutebox_infra.status_read import collect, recorded_from_outputs, terminate_untracked
from tests.factories import real_registry, settings

STACK = "s"
OWNER = "tok-status-1234"


def plan() -> FleetPlan:
    return plan_fleet(real_registry(), settings(models=["qwen3-8b"]), stack=STACK)


def deploy(emulator: RunningEmulator) -> dict[str, Any]:
    """Create what `up` would (volume + the planned pod) and return the matching outputs."""
    p = plan()
    api = httpx.Client(base_url=emulator.url, headers={"Authorization": "Bearer k"})
    volume = api.post(
        "/v2/network-volumes", json={"name": "v", "size": 20, "dataCenter": "EU-RO-1"}
    ).json()
    model = p.models[0]
    assert model.placement is not None
    body = pod_body(
        model, model.placement, p.settings, stack=STACK, volume_id=volume["id"], owner=OWNER
    )
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
    return collect(plan(), recorded_from_outputs(outputs), endpoints(emulator))


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
    httpx.post(f"{emulator.url}/_emulator/pods/{pod_id}/stop").raise_for_status()
    view = view_of(emulator, outputs)
    assert view.models[0].drift is DriftKind.STOPPED and view.heal is not None
    assert "stopped" in status_table(view) and view.heal in status_markdown(view)
    # The state loses the pod (say a cancelled up): it carries our volume, so it is untracked.
    lost = {**outputs, "pods": {}}
    view = view_of(emulator, lost)
    assert [p.id for p in view.untracked] == [pod_id]
    assert terminate_untracked(view, endpoints(emulator)) == [pod_id]
    assert view_of(emulator, lost).untracked == ()


def test_no_key_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from frutebox_infra.cli import main

    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    assert main(["status", "--stack", "dev"]) == 2


def test_a_recorded_pod_the_list_leaves_out_is_read_by_id(
    emulator: RunningEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    from frutebox_infra.runpod.client import RunPodClient

    outputs = deploy(emulator)
    monkeypatch.setattr(RunPodClient, "list_pods", lambda self: [])  # a lagging listing
    view = view_of(emulator, outputs)
    assert view.models[0].drift is None and view.models[0].live is not None
    httpx.post(f"{emulator.url}/_emulator/pods/{view.models[0].live.id}/terminate")
    assert view_of(emulator, outputs).models[0].drift is DriftKind.MISSING
