"""The realistic account: each documented RunPod unkindness, on a manual clock scaled as in e2e."""

from __future__ import annotations

import json
from typing import Any

import pytest

from frutebox_infra.catalog.files import load_registry
from frutebox_infra.deploy.requests import pod_name, volume_name
from frutebox_infra.emulator.catalog import Catalog
from frutebox_infra.emulator.clock import ManualClock
from frutebox_infra.emulator.keys import Scope
from frutebox_infra.emulator.realism import HIGH_PERFORMANCE, STANDARD, Realism
from frutebox_infra.emulator.routes import App, Response
from frutebox_infra.emulator.server import COLLIDING_STACKS, realistic_for
from frutebox_infra.emulator.state import Account
from tests.emulator.conftest import OPENAPI, network, pod_body

SCALE = 1000.0  # a minute window lasts 60 ms of the clock, a 20 s restart 20 ms


FIXED = "vllm/vllm-openai:v0.31.0-cu129"
"""An image the registry pins whose ENTRYPOINT is its server: args are only its arguments."""


def app_with(clock: ManualClock, **overrides: Any) -> App:
    options: dict[str, Any] = {"time_scale": SCALE, **overrides}
    realism = realistic_for(load_registry(), **options)
    account = Account(Catalog.builtin(), realism=realism, clock=clock)
    return App(account, proxy_base="http://127.0.0.1:9", openapi=OPENAPI)


def send(app: App, method: str, path: str, body: Any = None, key: str = "k") -> Response:
    raw = b"" if body is None else json.dumps(body).encode()
    return app.handle(method, path, {"authorization": f"Bearer {key}"}, raw)


def our_pod(app: App, **overrides: Any) -> dict[str, Any]:
    volume = send(app, "POST", "/v2/network-volumes", {"name": "v", "size": 50, "dataCenter":
                  "EU-RO-1", "type": STANDARD}).body  # fmt: skip
    fields: dict[str, Any] = {
        "name": "ours",
        "image": FIXED,
        "mounts": network(volume["id"]),
    }
    body = pod_body(**{**fields, **overrides})
    response = send(app, "POST", "/v2/pods", body)
    assert response.status == 201, response.body
    created: dict[str, Any] = response.body
    return created


def running(app: App, pod_id: str) -> dict[str, Any]:
    """Read the pod until RUNNING (each read moves it one step), without moving the clock."""
    for _ in range(3):
        pod: dict[str, Any] = send(app, "GET", f"/v2/pods/{pod_id}").body
        if pod["status"] == "RUNNING":
            return pod
    raise AssertionError(f"pod {pod_id} is {pod['status']} after three reads")


def test_every_authenticated_answer_carries_the_quota_and_a_full_window_answers_429(
    clock: ManualClock,
) -> None:
    app = app_with(clock, quotas=(("minute", 3, 60.0), ("hour", 3000, 3600.0)))
    first = send(app, "GET", "/v2/pods")
    assert first.headers["RateLimit-Policy"] == '"minute";q=3;w=0.060, "hour";q=3000;w=3.600'
    assert first.headers["RateLimit"] == '"minute";r=2;t=0.060, "hour";r=2999;t=3.600'
    clock.advance(0.010)
    send(app, "GET", "/v2/pods")
    send(app, "GET", "/v2/pods")
    limited = send(app, "GET", "/v2/pods")
    assert limited.status == 429
    assert limited.headers["Retry-After"] == "0.050"  # real seconds until the window resets
    assert limited.headers["RateLimit"].startswith('"minute";r=0;t=0.050')
    assert limited.body["detail"] == "rate limit exceeded for the minute window"
    clock.advance(0.049)
    assert send(app, "GET", "/v2/pods").status == 429
    clock.advance(0.0011)  # past the reset, with room for the epoch's float rounding
    assert send(app, "GET", "/v2/pods").status == 200


def test_the_hour_window_is_counted_apart_from_the_minute(clock: ManualClock) -> None:
    app = app_with(clock, quotas=(("minute", 60, 60.0), ("hour", 2, 3600.0)))
    assert [send(app, "GET", "/v2/pods").status for _ in range(3)] == [200, 200, 429]
    clock.advance(0.060)  # a new minute, the same hour
    limited = send(app, "GET", "/v2/pods")
    assert limited.status == 429 and "hour window" in limited.body["detail"]
    clock.advance(3.600 - 0.060 - 0.001)
    assert send(app, "GET", "/v2/pods").status == 429
    clock.advance(0.0011)
    assert send(app, "GET", "/v2/pods").status == 200


def test_a_wrong_key_is_401_when_the_account_has_one(clock: ManualClock) -> None:
    app = app_with(clock, api_keys={"rpa_right": Scope.ALL}, any_key=False)
    assert send(app, "GET", "/v2/pods", key="rpa_wrong").status == 401
    assert send(app, "GET", "/v2/pods", key="rpa_right").status == 200


def test_names_collide_with_every_pod_and_volume_the_planner_names(clock: ManualClock) -> None:
    app = app_with(clock)
    names = {p["name"] for p in send(app, "GET", "/v2/pods").body["pods"]}
    planned = {pod_name(s, m.id) for s in COLLIDING_STACKS for m in load_registry().models}
    assert "frutebox-dev-qwen3-8b" in planned and planned <= names
    volumes = {v["name"] for v in send(app, "GET", "/v2/network-volumes").body["networkVolumes"]}
    assert {volume_name(s) for s in COLLIDING_STACKS} <= volumes


@pytest.mark.parametrize(
    "scale", [pytest.param(1.0, id="real-time"), pytest.param(SCALE, id="x1000")]
)
def test_a_created_pod_and_volume_are_listed_only_after_a_delay(
    clock: ManualClock, scale: float
) -> None:
    app = app_with(clock, time_scale=scale)
    created = our_pod(app)
    lag = app.account.realism.real_s(app.account.realism.listing_delay_s)
    assert lag == 5.0 / scale

    def listed() -> tuple[bool, bool]:
        pods = {p["id"] for p in send(app, "GET", "/v2/pods").body["pods"]}
        volumes = {v["id"] for v in send(app, "GET", "/v2/network-volumes").body["networkVolumes"]}
        return created["id"] in pods, created["mounts"]["network"][0]["volumeId"] in volumes

    assert listed() == (False, False)
    assert send(app, "GET", f"/v2/pods/{created['id']}").status == 200  # a read finds it
    clock.advance(lag * 0.999)
    assert listed() == (False, False)
    clock.advance(lag * 0.002)
    assert listed() == (True, True)


def test_host_cuda_versions_are_served_and_a_floor_no_host_meets_is_a_capacity_400(
    clock: ManualClock,
) -> None:
    app = app_with(clock, cuda_versions={"NVIDIA A40": ("12.4", "12.8")})
    gpus = send(app, "GET", "/v2/catalog/gpus?include=AVAILABILITY&product=POD").body["gpus"]
    a40 = next(g for g in gpus if g["id"] == "NVIDIA A40")
    assert [c["version"] for c in a40["cudaVersions"]] == ["12.4", "12.8"]
    refused = send(app, "POST", "/v2/pods", pod_body(
        image=FIXED, gpu={"id": "NVIDIA A40", "count": 1,
                                           "minCudaVersion": "13.0"}))  # fmt: skip
    assert refused.status == 400 and "no longer any instances" in refused.body["detail"]
    placed = our_pod(app, gpu={"id": "NVIDIA A40", "count": 1, "minCudaVersion": "12.6"})
    assert placed["cudaVersion"] == "12.8"


def test_an_image_no_registry_holds_is_422_without_field_errors(clock: ManualClock) -> None:
    refused = send(app_with(clock), "POST", "/v2/pods", pod_body(image="nosuch/image:9"))
    assert refused.status == 422 and "errors" not in refused.body


def test_gpu_count_is_required(clock: ManualClock) -> None:
    app = app_with(clock)
    body = pod_body(image=FIXED, gpu={"id": "NVIDIA A40"})
    assert send(app, "POST", "/v2/pods", body).status == 400
    assert send(app, "POST", "/v2/pods", pod_body(image=FIXED)).status == 201


def test_volume_tiers_follow_the_data_centre_and_the_default_is_its_first(
    clock: ManualClock,
) -> None:
    app = app_with(clock)
    centres = send(app, "GET", "/v2/catalog/datacenters").body["dataCenters"]
    ro = next(c for c in centres if c["id"] == "EU-RO-1")
    assert ro["networkVolumeTypes"] == [HIGH_PERFORMANCE, STANDARD]
    unnamed = send(app, "POST", "/v2/network-volumes",
                   {"name": "v", "size": 10, "dataCenter": "EU-RO-1"})  # fmt: skip
    assert unnamed.body["type"] == HIGH_PERFORMANCE
    hps = {"name": "v", "size": 10, "dataCenter": "EU-SE-1", "type": HIGH_PERFORMANCE}
    refused = send(app, "POST", "/v2/network-volumes", hps)
    assert refused.status == 400


def test_a_patch_keeps_the_old_container_running_for_a_while_then_restarts(
    clock: ManualClock,
) -> None:
    app = app_with(clock)
    pod_id = our_pod(app)["id"]
    before = running(app, pod_id)
    clock.advance(2.0)
    send(app, "PATCH", f"/v2/pods/{pod_id}", {"args": "serve --new"})
    lag = app.account.realism.real_s(app.account.realism.restart_delay_s)
    clock.advance(lag * 0.999)
    right_after = send(app, "GET", f"/v2/pods/{pod_id}").body
    assert right_after["status"] == "RUNNING"
    assert right_after["startedAt"] == before["startedAt"]
    assert right_after["runtime"]["uptime"] >= 2  # the old container's
    clock.advance(lag * 0.002)
    seen = [send(app, "GET", f"/v2/pods/{pod_id}").body for _ in range(3)]
    assert [p["status"] for p in seen] == ["STARTING", "RUNNING", "RUNNING"]
    assert seen[-1]["runtime"]["uptime"] == 0.0
    clock.advance(0.25)
    assert send(app, "GET", f"/v2/pods/{pod_id}").body["runtime"]["uptime"] == 0.25


def test_health_waits_for_a_load_that_grows_with_the_weights_and_logs_say_why(
    clock: ManualClock,
) -> None:
    app = app_with(clock)
    pod_id = our_pod(app)["id"]
    running(app, pod_id)
    pod = app.account.pods[pod_id]
    assert pod.load_s == app.account.realism.real_s(30 + 2 * 50)

    def health() -> int:
        return app.handle("GET", f"/proxy/{pod_id}-8080/health", {}, b"").status

    def log_lines() -> list[str]:
        logs = send(app, "GET", f"/v2/pods/{pod_id}/logs?tail=2&source=container")
        assert logs.headers["Content-Type"] == "text/event-stream"
        return [json.loads(x[6:])["line"] for x in logs.payload().decode().splitlines()
                if x.startswith("data: ")]  # fmt: skip

    clock.advance(pod.load_s * 0.999)
    assert health() == 502
    assert log_lines() == [
        f"pulling image {FIXED}",
        "container started; loading weights",
    ]
    clock.advance(pod.load_s * 0.002)
    assert health() == 200
    assert log_lines() == ["container started; loading weights", "server is listening"]


def test_a_comfyui_like_image_answers_200_with_a_placeholder_while_it_loads(
    clock: ManualClock,
) -> None:
    app = app_with(clock, known_images=None)
    pod_id = our_pod(app, image="ghcr.io/ai-dock/comfyui:v2", ports=["8188/http"])["id"]
    running(app, pod_id)
    early = app.handle("GET", f"/proxy/{pod_id}-8188/system_stats", {}, b"")
    assert early.status == 200 and b"Loading" in early.payload()
    clock.advance(app.account.pods[pod_id].load_s)
    served = app.handle("GET", f"/proxy/{pod_id}-8188/system_stats", {}, b"")
    assert served.status == 200 and json.loads(served.payload())["status"] == "ok"


def test_fast_keeps_the_forgiving_account() -> None:
    app = App(Account(Catalog.builtin(), realism=Realism.fast()), openapi=OPENAPI)
    assert send(app, "GET", "/v2/pods").body == {"pods": []}
    assert "RateLimit" not in send(app, "GET", "/v2/pods").headers


def proxy_status(app: App, pod_id: str, port: int = 8080, path: str = "/health") -> int:
    """The status of a probe of the pod's health path (the default pod runs Ollama)."""
    return app.handle("GET", f"/proxy/{pod_id}-{port}{path}", {}, b"").status


def log_text(app: App, pod_id: str) -> str:
    return send(app, "GET", f"/v2/pods/{pod_id}/logs?tail=100").payload().decode()


def test_a_launch_its_image_cannot_run_crash_loops_while_the_pod_stays_running(
    clock: ManualClock,
) -> None:
    # The SGLang image has no ENTRYPOINT and no server CMD: args that are only flags run
    # nothing, so the container exits at once and RunPod starts it again and again.
    app = app_with(clock)
    flags_only = "--model-path Qwen/Qwen3-8B"
    pod_id = our_pod(app, image="lmsysorg/sglang:v0.5.21", args=flags_only)["id"]
    first = running(app, pod_id)
    realism = app.account.realism
    up, gap = realism.real_s(realism.crash_up_s), realism.real_s(realism.crash_gap_s)
    uptimes = [first["runtime"]["uptime"]]
    clock.advance(up / 2)  # mid-way through each container's life from here on
    for _ in range(3):
        clock.advance(up + gap)
        pod = send(app, "GET", f"/v2/pods/{pod_id}").body
        assert pod["status"] == "RUNNING"
        uptimes.append(pod["runtime"]["uptime"])
        assert proxy_status(app, pod_id) == 502
    assert all(u < up for u in uptimes)  # each container lives less than a cycle
    clock.advance(up / 2)  # the fourth container has just exited: RUNNING, no runtime
    down = send(app, "GET", f"/v2/pods/{pod_id}").body
    assert (down["status"], down["runtime"]) == ("RUNNING", None)
    assert log_text(app, pod_id).count("executable file not found") == 4
    system = send(app, "GET", f"/v2/pods/{pod_id}/logs?source=system").payload().decode()
    assert system.count('"source": "system", "line": "start container"') == 4  # 1 + 3 restarts
    assert "executable file not found" not in system
    assert send(app, "GET", f"/v2/pods/{pod_id}/logs?source=kernel").status == 400
    assert app.account.pods[pod_id].billed[-1][1] is None  # it bills all along
    # startedAt has whole seconds: on a real clock each cycle shows a new one.
    real = app_with(clock, time_scale=1.0)
    real_id = our_pod(real, image="lmsysorg/sglang:v0.5.21", args="")["id"]
    starts = set()
    for _ in range(3):
        starts.add(running(real, real_id)["startedAt"])
        clock.advance(10.0)
    assert len(starts) == 3


def test_the_crash_loop_fault_applies_to_a_create_or_to_the_container_a_patch_restarts(
    clock: ManualClock,
) -> None:
    app = app_with(clock)
    send(app, "POST", "/_emulator/faults", {"op": "pods.update", "action": "crash-loop"})
    pod_id = our_pod(app)["id"]
    running(app, pod_id)
    clock.advance(app.account.pods[pod_id].load_s)
    assert proxy_status(app, pod_id) == 200  # the create was not affected
    send(app, "PATCH", f"/v2/pods/{pod_id}", {"args": "serve --broken"})
    clock.advance(app.account.realism.real_s(app.account.realism.restart_delay_s))
    running(app, pod_id)
    clock.advance(app.account.realism.real_s(10.0))
    assert proxy_status(app, pod_id) == 502
    assert "the server exited during start-up" in log_text(app, pod_id)
    # Patching back restarts a container that starts: the loop is over.
    send(app, "PATCH", f"/v2/pods/{pod_id}", {"args": "serve"})
    clock.advance(app.account.realism.real_s(app.account.realism.restart_delay_s))
    running(app, pod_id)
    clock.advance(app.account.pods[pod_id].load_s)
    assert proxy_status(app, pod_id) == 200


def test_a_dead_host_keeps_the_pod_running_and_billing_with_no_runtime_and_a_502(
    clock: ManualClock,
) -> None:
    app = app_with(clock)
    pod_id = our_pod(app)["id"]
    running(app, pod_id)
    clock.advance(app.account.pods[pod_id].load_s)
    assert proxy_status(app, pod_id) == 200
    killed = app.handle("POST", f"/_emulator/pods/{pod_id}/kill-host", {}, b"")
    assert killed.status == 200
    clock.advance(3600 / SCALE)
    pod = send(app, "GET", f"/v2/pods/{pod_id}").body
    assert (pod["status"], pod["runtime"]) == ("RUNNING", None) and pod["cost"] > 0
    assert proxy_status(app, pod_id) == 502
    assert app.account.pods[pod_id].billed[-1][1] is None


def test_a_volume_create_answering_503_after_creating_shows_in_the_listing_late(
    clock: ManualClock,
) -> None:
    app = app_with(clock)
    send(app, "POST", "/_emulator/faults",
         {"op": "volumes.create", "action": "return-503-after-create"})  # fmt: skip
    body = {"name": "frutebox-x-weights-0011223344556677", "size": 50, "dataCenter": "EU-RO-1",
            "type": STANDARD}  # fmt: skip
    assert send(app, "POST", "/v2/network-volumes", body).status == 503
    [made] = [v for v in app.account.volumes.values() if v.name == body["name"]]

    def listed() -> bool:
        volumes = send(app, "GET", "/v2/network-volumes").body["networkVolumes"]
        return made.id in {v["id"] for v in volumes}

    assert not listed()
    clock.advance(app.account.realism.real_s(app.account.realism.listing_delay_s))
    assert listed()
