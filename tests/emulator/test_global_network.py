"""Global networking as RunPod runs it: offered in the data centres the catalog flags
`globalNetwork` (registry/datacenters.yaml), on NVIDIA GPU pods only, and a pod that publishes
no port has nothing on the proxy."""

from __future__ import annotations

import pytest

from frutebox_infra.catalog.files import load_registry
from frutebox_infra.emulator.routes import App
from tests.emulator.conftest import Call, pod_body, valid

REGISTRY = load_registry()
NETWORKED = set(REGISTRY.networked_data_centers)
WITHOUT = sorted({d.id for d in REGISTRY.data_centers} - NETWORKED)


def test_the_registry_says_where_and_why() -> None:
    assert REGISTRY.global_network is not None
    assert "pods/networking" in REGISTRY.global_network.source
    # RunPod docs, pods/networking "Supported data centers": of the centres we know, these
    # three are not listed (EUR-IS-2, not EUR-IS-1; CA-MTL-3, not CA-MTL-1; no AP centre).
    assert WITHOUT == ["AP-JP-1", "CA-MTL-1", "EUR-IS-1"]
    assert "EU-RO-1" in NETWORKED


def test_the_catalog_flags_each_centre_from_the_registry(call: Call) -> None:
    body = valid("ListDataCentersResponse", call("GET", "/v2/catalog/datacenters").body)
    flags = {d["id"]: d["globalNetwork"] for d in body["dataCenters"]}
    assert {dc for dc, on in flags.items() if on} == NETWORKED
    assert set(flags) == {d.id for d in REGISTRY.data_centers}


@pytest.mark.parametrize(("flag", "expected"), [("true", NETWORKED), ("false", set(WITHOUT))])
def test_the_catalog_filters_by_global_network(call: Call, flag: str, expected: set[str]) -> None:
    body = call("GET", f"/v2/catalog/datacenters?globalNetwork={flag}").body
    assert {d["id"] for d in body["dataCenters"]} == expected


@pytest.mark.parametrize("dc", WITHOUT)
def test_a_create_asking_for_it_where_it_is_not_offered_is_refused(call: Call, dc: str) -> None:
    answer = call("POST", "/v2/pods", pod_body(dataCenterIds=[dc], globalNetworking=True))
    assert answer.status == 400
    refused = f"globalNetworking is not supported in data center(s) {dc}"
    assert answer.body["detail"].startswith(refused)
    assert call("POST", "/v2/pods", pod_body(dataCenterIds=[dc])).status == 201


def test_a_cpu_pod_asking_for_it_is_refused(call: Call) -> None:
    cpu = {"name": "s", "image": "img:1", "cpu": {"id": "cpu3c", "vcpuCount": 2}, "disk": 10,
           "dataCenterIds": ["EU-RO-1"]}  # fmt: skip
    answer = call("POST", "/v2/pods", {**cpu, "globalNetworking": True})
    refused = "globalNetworking requires an NVIDIA GPU pod"
    assert (answer.status, answer.body["detail"]) == (400, refused)
    assert call("POST", "/v2/pods", cpu).status == 201


def test_without_a_centre_named_it_lands_where_it_is_offered(call: Call) -> None:
    answer = call("POST", "/v2/pods", pod_body(dataCenterIds=[], globalNetworking=True))
    assert answer.status == 201 and answer.body["dataCenterId"] in NETWORKED


def test_a_private_pod_is_networked_and_has_nothing_on_the_proxy(call: Call, app: App) -> None:
    pod = call("POST", "/v2/pods", pod_body(ports=[], globalNetworking=True)).body
    # Derived from the address the pod is given as it starts: not yet while it provisions.
    assert pod["globalNetworking"] == {"enabled": False} and pod["ports"] == []
    for _ in range(3):
        call("GET", f"/v2/pods/{pod['id']}")
    running = valid("Pod", call("GET", f"/v2/pods/{pod['id']}").body)
    assert running["status"] == "RUNNING"
    networking = running["globalNetworking"]
    assert networking["enabled"] is True and networking["ip"].startswith("10.65.")
    assert networking["internalDns"] == f"{pod['id']}.runpod.internal"
    # The same answer as for any port the pod does not publish.
    assert call("GET", f"/proxy/{pod['id']}-8080/health", auth=None).status == 404


def test_a_patch_turning_it_on_where_it_is_not_offered_is_refused(call: Call) -> None:
    pod_id = call("POST", "/v2/pods", pod_body(dataCenterIds=["EUR-IS-1"])).body["id"]
    answer = call("PATCH", f"/v2/pods/{pod_id}", {"globalNetworking": True, "ports": []})
    assert answer.status == 400 and "EUR-IS-1" in answer.body["detail"]
    assert call("GET", f"/v2/pods/{pod_id}").body["ports"] == ["8080/http"]
    on = call("POST", "/v2/pods", pod_body(dataCenterIds=["EU-RO-1"])).body["id"]
    patched = call("PATCH", f"/v2/pods/{on}", {"globalNetworking": True, "ports": []})
    assert patched.status == 200 and patched.body["ports"] == []


def test_a_patch_of_global_networking_takes_effect_on_the_next_start(call: Call) -> None:
    pod_id = call("POST", "/v2/pods", pod_body()).body["id"]
    for _ in range(3):
        call("GET", f"/v2/pods/{pod_id}")
    patched = call("PATCH", f"/v2/pods/{pod_id}", {"globalNetworking": True})
    assert patched.status == 200 and patched.body["globalNetworking"] == {"enabled": False}
    assert call("GET", f"/v2/pods/{pod_id}").body["status"] == "RUNNING"  # no restart of its own
    assert call("GET", f"/v2/pods/{pod_id}").body["globalNetworking"]["enabled"] is False
    assert call("POST", f"/v2/pods/{pod_id}/action", {"action": "restart"}).status == 200
    for _ in range(2):
        call("GET", f"/v2/pods/{pod_id}")
    assert call("GET", f"/v2/pods/{pod_id}").body["globalNetworking"]["enabled"] is True
