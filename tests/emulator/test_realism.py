"""The realistic account: each documented RunPod unkindness, on a clock scaled for tests."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from frutebox_infra.emulator.catalog import Catalog
from frutebox_infra.emulator.realism import HIGH_PERFORMANCE, STANDARD, Realism
from frutebox_infra.emulator.routes import App, Response
from frutebox_infra.emulator.server import realistic_for
from frutebox_infra.emulator.state import Account
from frutebox_infra.registry_files import load_registry
from tests.emulator.conftest import pod_body

SCALE = 1000.0  # a minute window lasts 60 ms, a 20 s restart 20 ms


def app_with(**overrides: Any) -> App:
    realism = realistic_for(load_registry(), time_scale=SCALE, **overrides)
    return App(Account(Catalog.builtin(), realism=realism), proxy_base="http://127.0.0.1:9")


def send(app: App, method: str, path: str, body: Any = None, key: str = "k") -> Response:
    raw = b"" if body is None else json.dumps(body).encode()
    return app.handle(method, path, {"authorization": f"Bearer {key}"}, raw)


def our_pod(app: App, **overrides: Any) -> dict[str, Any]:
    volume = send(app, "POST", "/v2/network-volumes", {"name": "v", "size": 50, "dataCenter":
                  "EU-RO-1", "type": STANDARD}).body  # fmt: skip
    fields: dict[str, Any] = {
        "name": "ours",
        "image": "ollama/ollama:0.35.1",
        "mounts": {"network": [{"volumeId": volume["id"], "path": "/workspace"}]},
    }
    body = pod_body(**{**fields, **overrides})
    response = send(app, "POST", "/v2/pods", body)
    assert response.status == 201, response.body
    created: dict[str, Any] = response.body
    return created


def wait_real(app: App, emulated_s: float) -> None:
    time.sleep(app.account.realism.real_s(emulated_s) + 0.005)


def test_every_authenticated_answer_carries_the_quota_and_a_full_window_answers_429() -> None:
    app = app_with(quotas=(("minute", 3, 60.0), ("hour", 3000, 3600.0)))
    first = send(app, "GET", "/v2/pods")
    assert first.headers["RateLimit-Policy"] == '"minute";q=3;w=0.060, "hour";q=3000;w=3.600'
    assert first.headers["RateLimit"].startswith('"minute";r=2;')
    send(app, "GET", "/v2/pods")
    send(app, "GET", "/v2/pods")
    limited = send(app, "GET", "/v2/pods")
    assert limited.status == 429
    assert 0 < float(limited.headers["Retry-After"]) <= 0.06
    assert limited.body["detail"] == "rate limit exceeded for the minute window"
    time.sleep(0.07)
    assert send(app, "GET", "/v2/pods").status == 200


def test_a_wrong_key_is_401_when_the_account_has_one() -> None:
    app = app_with(api_key="rpa_right")
    assert send(app, "GET", "/v2/pods", key="rpa_wrong").status == 401
    assert send(app, "GET", "/v2/pods", key="rpa_right").status == 200


def test_names_collide_with_pods_and_volumes_the_account_already_holds() -> None:
    app = app_with()
    names = {p["name"] for p in send(app, "GET", "/v2/pods").body["pods"]}
    assert {"frutebox-dev-qwen3-8b", "frutebox-prod-qwen3-8b"} <= names
    volumes = {v["name"] for v in send(app, "GET", "/v2/network-volumes").body["networkVolumes"]}
    assert "frutebox-dev-weights" in volumes


def test_a_created_pod_is_listed_only_after_a_delay() -> None:
    app = app_with()
    created = our_pod(app)
    listed = {p["id"] for p in send(app, "GET", "/v2/pods").body["pods"]}
    assert created["id"] not in listed
    assert send(app, "GET", f"/v2/pods/{created['id']}").status == 200
    wait_real(app, app.account.realism.listing_delay_s)
    assert created["id"] in {p["id"] for p in send(app, "GET", "/v2/pods").body["pods"]}


def test_host_cuda_versions_are_served_and_a_floor_no_host_meets_is_a_capacity_400() -> None:
    app = app_with(cuda_versions={"NVIDIA A40": ("12.4", "12.8")})
    gpus = send(app, "GET", "/v2/catalog/gpus?include=AVAILABILITY&product=POD").body["gpus"]
    a40 = next(g for g in gpus if g["id"] == "NVIDIA A40")
    assert [c["version"] for c in a40["cudaVersions"]] == ["12.4", "12.8"]
    refused = send(app, "POST", "/v2/pods", pod_body(
        image="ollama/ollama:0.35.1", gpu={"id": "NVIDIA A40", "count": 1,
                                           "minCudaVersion": "13.0"}))  # fmt: skip
    assert refused.status == 400 and "no longer any instances" in refused.body["detail"]
    placed = our_pod(app, gpu={"id": "NVIDIA A40", "count": 1, "minCudaVersion": "12.6"})
    assert placed["cudaVersion"] == "12.8"


def test_an_image_no_registry_holds_is_422_without_field_errors() -> None:
    refused = send(app_with(), "POST", "/v2/pods", pod_body(image="nosuch/image:9"))
    assert refused.status == 422 and "errors" not in refused.body


def test_gpu_count_is_required() -> None:
    body = pod_body(image="ollama/ollama:0.35.1", gpu={"id": "NVIDIA A40"})
    assert send(app_with(), "POST", "/v2/pods", body).status == 400


def test_volume_tiers_follow_the_data_centre_and_the_default_is_its_first() -> None:
    app = app_with()
    centres = send(app, "GET", "/v2/catalog/datacenters").body["dataCenters"]
    ro = next(c for c in centres if c["id"] == "EU-RO-1")
    assert ro["networkVolumeTypes"] == [HIGH_PERFORMANCE, STANDARD]
    unnamed = send(app, "POST", "/v2/network-volumes",
                   {"name": "v", "size": 10, "dataCenter": "EU-RO-1"})  # fmt: skip
    assert unnamed.body["type"] == HIGH_PERFORMANCE
    hps = {"name": "v", "size": 10, "dataCenter": "EU-SE-1", "type": HIGH_PERFORMANCE}
    refused = send(app, "POST", "/v2/network-volumes", hps)
    assert refused.status == 400


def test_a_patch_keeps_the_old_container_running_for_a_while_then_restarts() -> None:
    app = app_with()
    pod_id = our_pod(app)["id"]
    while send(app, "GET", f"/v2/pods/{pod_id}").body["status"] != "RUNNING":
        pass
    before = send(app, "GET", f"/v2/pods/{pod_id}").body
    send(app, "PATCH", f"/v2/pods/{pod_id}", {"args": "serve --new"})
    right_after = send(app, "GET", f"/v2/pods/{pod_id}").body
    assert right_after["status"] == "RUNNING"
    assert right_after["startedAt"] == before["startedAt"]
    wait_real(app, app.account.realism.restart_delay_s)
    seen = [send(app, "GET", f"/v2/pods/{pod_id}").body for _ in range(3)]
    assert [p["status"] for p in seen] == ["STARTING", "RUNNING", "RUNNING"]
    assert seen[-1]["runtime"]["uptime"] < 1


def test_health_waits_for_a_load_that_grows_with_the_weights_and_logs_say_why() -> None:
    app = app_with()
    pod_id = our_pod(app)["id"]
    while send(app, "GET", f"/v2/pods/{pod_id}").body["status"] != "RUNNING":
        pass
    pod = app.account.pods[pod_id]
    assert pod.load_s == pytest.approx(app.account.realism.real_s(30 + 2 * 50))
    assert app.handle("GET", f"/proxy/{pod_id}-8080/health", {}, b"").status == 502
    time.sleep(pod.load_s + 0.01)
    assert app.handle("GET", f"/proxy/{pod_id}-8080/health", {}, b"").status == 200
    logs = send(app, "GET", f"/v2/pods/{pod_id}/logs?tail=2")
    assert logs.headers["Content-Type"] == "text/event-stream"
    lines = [json.loads(x[6:])["line"] for x in logs.payload().decode().splitlines()
             if x.startswith("data: ")]  # fmt: skip
    assert lines == ["container started; loading weights", "server is listening"]


def test_a_comfyui_like_image_answers_200_with_a_placeholder_while_it_loads() -> None:
    app = app_with(known_images=None)
    pod_id = our_pod(app, image="ghcr.io/ai-dock/comfyui:v2", ports=["8188/http"])["id"]
    while send(app, "GET", f"/v2/pods/{pod_id}").body["status"] != "RUNNING":
        pass
    early = app.handle("GET", f"/proxy/{pod_id}-8188/system_stats", {}, b"")
    assert early.status == 200 and b"Loading" in early.payload()


def test_fast_keeps_the_forgiving_account() -> None:
    app = App(Account(Catalog.builtin(), realism=Realism.fast()))
    assert send(app, "GET", "/v2/pods").body == {"pods": []}
    assert "RateLimit" not in send(app, "GET", "/v2/pods").headers
