"""Routes: auth, the OpenAPI contract (422), problem JSON, faults, proxy, and the control API."""

from __future__ import annotations

import json

import pytest

from frutebox_infra.emulator.clock import ManualClock
from frutebox_infra.emulator.errors import CAPACITY_DETAIL, TITLES, ApiProblem
from frutebox_infra.emulator.routes import App
from tests.emulator.conftest import Call, pod_body, valid

PROBLEM = "application/problem+json"


def test_a_bearer_token_is_required(call: Call) -> None:
    for auth in (None, "Basic abc", "Bearer "):
        response = call("GET", "/v2/pods", auth=auth)
        assert response.status == 401
        assert response.headers["Content-Type"] == PROBLEM
        assert response.body == {
            "title": "Unauthorized",
            "status": 401,
            "detail": "missing bearer token",
        }


def test_bodies_are_checked_against_the_official_schema(call: Call) -> None:
    response = call("POST", "/v2/pods", pod_body(bogus=1, disk=0))
    assert response.status == 422
    assert response.headers["Content-Type"] == PROBLEM
    assert response.body["errors"] == ["$.disk: 0 is less than the minimum of 1"]
    assert call("POST", "/v2/pods", {"name": "p"}).body["errors"] == [
        "$: 'image' is a required property"
    ]
    unknown = call("POST", "/v2/pods", pod_body(bogus=1)).body["errors"]
    assert unknown == ["$: Unevaluated properties are not allowed ('bogus' was unexpected)"]
    mount = call("POST", "/v2/pods", pod_body(mounts={"network": [{"volumeId": "v"}]}))
    assert mount.body["errors"] == ["$.mounts.network[0]: 'path' is a required property"]
    assert call("PATCH", "/v2/network-volumes/x", {}).status == 422
    assert call("POST", "/v2/pods/x/action", {"action": "explode"}).status == 422


# A problem reads like the real API's: RFC 9457 JSON with a title, the status and a detail.


@pytest.mark.parametrize("status", sorted(TITLES))
def test_every_status_the_emulator_answers_has_its_http_title(status: int) -> None:
    body = ApiProblem(status, "why").body()
    assert body == {"title": TITLES[status], "status": status, "detail": "why"}


def test_an_unlisted_status_is_titled_error() -> None:
    assert ApiProblem(418, "teapot").body()["title"] == "Error"


def test_field_errors_appear_only_when_given() -> None:
    assert "errors" not in ApiProblem(422, "x").body()
    body = ApiProblem(422, "Request validation failed.", errors=["$.disk: too small"]).body()
    assert body["errors"] == ["$.disk: too small"]
    assert ApiProblem(422, "x", errors=[]).body()["errors"] == []


def test_headers_are_copied_so_the_caller_cannot_change_them_afterwards() -> None:
    given = {"Retry-After": "3"}
    problem = ApiProblem(429, "slow down", headers=given)
    given["Retry-After"] = "0"
    assert problem.headers == {"Retry-After": "3"} and str(problem) == "slow down"


@pytest.mark.parametrize(
    "problem",
    [
        pytest.param(ApiProblem(404, "pod p not found"), id="plain"),
        pytest.param(ApiProblem(422, "Request validation failed.", errors=["$: x"]), id="fields"),
    ],
)
def test_the_body_is_the_official_error_shape(problem: ApiProblem) -> None:
    valid("ErrorResponse", problem.body())


def test_malformed_json_is_a_400(call: Call) -> None:
    response = call("POST", "/v2/pods", raw=b"{not json")
    assert response.status == 400 and "not valid JSON" in response.body["detail"]


def test_unknown_paths_and_methods(call: Call) -> None:
    assert call("GET", "/v2/nothing").status == 404
    response = call("PUT", "/v2/pods/abc")
    assert response.status == 405
    assert response.headers["Allow"] == "GET, PATCH, DELETE"


def test_pod_crud_through_the_routes(call: Call) -> None:
    created = call("POST", "/v2/pods", pod_body())
    assert created.status == 201 and created.body["status"] == "PROVISIONING"
    pod_id = created.body["id"]
    assert call("GET", f"/v2/pods/{pod_id}").body["status"] == "STARTING"
    assert [p["id"] for p in call("GET", "/v2/pods").body["pods"]] == [pod_id]
    assert call("PATCH", f"/v2/pods/{pod_id}", {"image": "img:2"}).body["image"] == "img:2"
    assert call("POST", f"/v2/pods/{pod_id}/action", {"action": "stop"}).body["status"] == "EXITED"
    assert call("DELETE", f"/v2/pods/{pod_id}").status == 204
    assert call("DELETE", f"/v2/pods/{pod_id}").status == 404
    assert call("GET", "/v2/pods").body == {"pods": []}


def test_volume_crud_through_the_routes(call: Call) -> None:
    body = {"name": "w", "size": 10, "dataCenter": "EU-RO-1"}
    created = call("POST", "/v2/network-volumes", body)
    assert created.status == 201 and created.body["type"] == "STANDARD"
    vid = created.body["id"]
    assert call("PATCH", f"/v2/network-volumes/{vid}", {"size": 5}).status == 422
    assert call("PATCH", f"/v2/network-volumes/{vid}", {"size": 20}).body["size"] == 20
    assert call("GET", "/v2/network-volumes").body["networkVolumes"][0]["size"] == 20
    assert call("DELETE", f"/v2/network-volumes/{vid}").status == 204
    assert call("GET", f"/v2/network-volumes/{vid}").status == 404
    assert call("POST", "/v2/network-volumes", {**body, "dataCenter": "MARS-1"}).status == 400


def test_the_request_log_keeps_bodies_and_statuses_but_no_credentials(call: Call, app: App) -> None:
    call("POST", "/v2/pods", pod_body())
    call("GET", "/v2/pods", auth=None)
    log = app.account.requests
    assert [(r["op"], r["method"], r["status"]) for r in log] == [
        ("pods.create", "POST", 201),
        ("pods.list", "GET", 401),
    ]
    assert log[0]["body"] == pod_body()
    assert "Bearer" not in repr(log)


@pytest.mark.parametrize(
    ("action", "status", "detail"),
    [
        pytest.param("return-400-capacity", 400, CAPACITY_DETAIL, id="400"),
        pytest.param("return-402", 402, "Insufficient balance", id="402"),
        pytest.param("return-403", 403, "cannot access the requested pool", id="403"),
        pytest.param("return-500", 500, "internal", id="500"),
        pytest.param("return-503", 503, "unavailable", id="503"),
    ],
)
def test_response_faults_answer_once_and_create_nothing(
    call: Call, app: App, action: str, status: int, detail: str
) -> None:
    assert (
        call("POST", "/_emulator/faults", [{"op": "pods.create", "action": action}]).status == 200
    )
    response = call("POST", "/v2/pods", pod_body())
    assert response.status == status and detail in response.body["detail"]
    assert app.account.pods == {}
    assert call("POST", "/v2/pods", pod_body()).status == 201


def test_a_429_fault_carries_retry_after(call: Call) -> None:
    call("POST", "/_emulator/faults", {"op": "pods.list", "action": "return-429", "retryAfter": 3})
    response = call("GET", "/v2/pods")
    assert (response.status, response.headers["Retry-After"]) == (429, "3")


def test_a_timed_fault_answers_until_the_accounts_clock_ends_its_period(
    call: Call, clock: ManualClock
) -> None:
    call("POST", "/_emulator/faults", {"op": "pods.list", "action": "return-503", "forSeconds": 30})
    assert call("GET", "/v2/pods").status == 503
    clock.advance(29.9)
    assert call("GET", "/v2/pods").status == 503
    clock.advance(0.2)
    assert call("GET", "/v2/pods").status == 200


def test_the_request_log_is_stamped_by_the_accounts_clock(
    call: Call, app: App, clock: ManualClock
) -> None:
    call("GET", "/v2/pods")
    clock.advance(12.5)
    call("GET", "/v2/pods")
    assert [r["at"] for r in app.account.requests] == [clock.now() - 12.5, clock.now()]


def test_201_malformed_creates_then_answers_a_body_that_is_not_json(call: Call, app: App) -> None:
    call("POST", "/_emulator/faults", [{"op": "volumes.create", "action": "return-201-malformed"}])
    body = {"name": "w", "size": 10, "dataCenter": "EU-RO-1"}
    answer = call("POST", "/v2/network-volumes", body)
    assert answer.status == 201 and answer.headers["Content-Type"] == "text/html"
    with pytest.raises(ValueError):
        json.loads(answer.payload())
    assert [v.name for v in app.account.list_volumes()] == ["w"]
    assert app.account.requests[-1]["status"] == 201


def test_503_after_create_creates_the_pod_then_fails(call: Call, app: App) -> None:
    call("POST", "/_emulator/faults", [{"op": "pods.create", "action": "return-503-after-create"}])
    assert call("POST", "/v2/pods", pod_body()).status == 503
    assert len(app.account.list_pods()) == 1


def test_faults_are_fifo_per_operation_and_wait_for_a_valid_request(call: Call) -> None:
    call(
        "POST",
        "/_emulator/faults",
        [
            {"op": "pods.create", "action": "return-500"},
            {"op": "pods.list", "action": "return-503"},
            {"op": "pods.create", "action": "return-403"},
        ],
    )
    assert call("POST", "/v2/pods", {"name": "p"}).status == 422  # the contract comes first
    assert call("POST", "/v2/pods", pod_body()).status == 500
    assert call("POST", "/v2/pods", pod_body()).status == 403
    assert call("GET", "/v2/pods").status == 503
    assert call("POST", "/v2/pods", pod_body()).status == 201


def test_a_pod_fault_waits_for_a_pod_that_is_actually_created(call: Call, app: App) -> None:
    app.account.initial_stock = app.account.stock = {}
    call("POST", "/_emulator/faults", [{"op": "pods.create", "action": "pod-error"}])
    assert call("POST", "/v2/pods", pod_body()).status == 400
    app.account.stock = {("NVIDIA A40", "EU-RO-1"): 1}
    pod_id = call("POST", "/v2/pods", pod_body()).body["id"]
    assert app.account.pods[pod_id].fault == "pod-error"


def test_unknown_fault_instructions_are_rejected(call: Call) -> None:
    for bad in (
        {"op": "pods.create", "action": "explode"},
        {"op": "pods.fly", "action": "return-500"},
        {"op": "pods.get", "action": "pod-error"},
        "nonsense",
    ):
        response = call("POST", "/_emulator/faults", bad)
        assert response.status == 400 and "bad fault instruction" in response.body["detail"]
    assert call("POST", "/_emulator/faults", raw=b"{").status == 400


def test_reset_and_state(call: Call, app: App) -> None:
    call("POST", "/v2/pods", pod_body())
    call("POST", "/_emulator/faults", [{"op": "pods.get", "action": "return-500"}])
    state = call("GET", "/_emulator/state").body
    assert len(state["pods"]) == 1 and len(state["requests"]) == 1
    assert state["faults"] == [{"op": "pods.get", "action": "return-500"}]
    assert state["proxyUrlTemplate"] == "http://127.0.0.1:9/proxy/{podId}-{port}"
    assert call("POST", "/_emulator/reset").status == 200
    state = call("GET", "/_emulator/state").body
    assert (state["pods"], state["requests"], state["faults"]) == ([], [], [])
    assert call("GET", "/_emulator/nothing").status == 404


def test_the_proxy_route_serves_pod_ports_and_logs_credentials_only_as_a_flag(
    call: Call, app: App
) -> None:
    pod_id = call("POST", "/v2/pods", pod_body()).body["id"]
    assert call("GET", f"/proxy/{pod_id}-8080/health", auth=None).status == 502
    call("GET", f"/v2/pods/{pod_id}")
    call("GET", f"/v2/pods/{pod_id}")
    assert call("GET", f"/proxy/{pod_id}-8080/health", auth=None).status == 200
    pulled = call("POST", f"/proxy/{pod_id}-8080/api/pull", {"model": "m:1"}, auth="Bearer leaked")
    assert pulled.headers["Content-Type"] == "application/x-ndjson"
    lines = pulled.payload().decode().splitlines()
    assert json.loads(lines[-1]) == {"status": "success"} and len(lines) > 2
    silent = call(
        "POST", f"/proxy/{pod_id}-8080/api/pull", {"model": "m:1", "stream": False}, auth=None
    )
    assert (silent.status, silent.payload()) == (524, b"error code: 524")
    proxied = [r for r in app.account.requests if r["op"] == "proxy"]
    assert [r["authorization"] for r in proxied] == [False, False, True, False]
    assert [r["status"] for r in proxied] == [502, 200, 200, 524]
    assert "leaked" not in repr(app.account.requests)


def test_the_gpu_catalog_reflects_stock(call: Call, app: App) -> None:
    app.account.stock = {("NVIDIA A40", "EU-RO-1"): 2}
    gpus = {
        g["id"]: g
        for g in call("GET", "/v2/catalog/gpus?include=AVAILABILITY&product=POD").body["gpus"]
    }
    assert gpus["NVIDIA A40"]["availability"] == "LOW"
    assert gpus["NVIDIA A40"]["dataCenters"] == [
        {"id": "EU-RO-1", "name": "Romania", "availability": "LOW"}
    ]
    assert gpus["NVIDIA H100 80GB HBM3"]["availability"] == "NONE"
    assert gpus["NVIDIA A40"]["price"]["secure"] == 0.40
    assert "availability" not in call("GET", "/v2/catalog/gpus").body["gpus"][0]


def test_gpu_availability_needs_product_and_answers_per_data_centre(call: Call, app: App) -> None:
    assert call("GET", "/v2/catalog/gpus?include=AVAILABILITY").status == 400
    assert call("GET", "/v2/catalog/gpus?product=POD").status == 400
    assert call("GET", "/v2/catalog/gpus?include=AVAILABILITY&product=VM").status == 400
    app.account.stock = {("NVIDIA A40", "EU-RO-1"): 20, ("NVIDIA A40", "EU-SE-1"): 1}
    body = call("GET", "/v2/catalog/gpus?include=AVAILABILITY&product=POD").body
    valid("ListGpuTypesResponse", body)
    a40 = next(g for g in body["gpus"] if g["id"] == "NVIDIA A40")
    assert {d["id"]: d["availability"] for d in a40["dataCenters"]} == {
        "EU-RO-1": "HIGH",
        "EU-SE-1": "LOW",
    }
    assert [c["version"] for c in a40["cudaVersions"]] == list(app.account.realism.host_cuda(
        "NVIDIA A40"))  # fmt: skip


def test_an_emulator_bug_answers_500_problem_json(call: Call, app: App) -> None:
    def broken(request: object) -> None:
        raise KeyError("boom")

    app.account.create_pod = broken  # type: ignore[assignment,method-assign]
    response = call("POST", "/v2/pods", pod_body())
    assert response.status == 500 and "KeyError('boom')" in response.body["detail"]
