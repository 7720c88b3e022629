"""Catalog availability, data centres, pod billing and the out-of-band controls.

Every answer is checked against the official OpenAPI document's response schema.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from frutebox_infra.emulator.billing import pod_billing, window
from frutebox_infra.emulator.contract import Contract
from frutebox_infra.emulator.records import PodRecord
from frutebox_infra.emulator.routes import App
from tests.emulator.conftest import Call, pod_body

A40, DC = "NVIDIA A40", "EU-RO-1"


@pytest.fixture(scope="module")
def contract() -> Contract:
    return Contract()


def valid(contract: Contract, schema: str, body: Any) -> Any:
    assert contract.errors(schema, body) == []
    return body


def test_gpu_availability_needs_product_and_answers_per_data_centre(
    call: Call, app: App, contract: Contract
) -> None:
    assert call("GET", "/v2/catalog/gpus?include=AVAILABILITY").status == 400
    assert call("GET", "/v2/catalog/gpus?product=POD").status == 400
    assert call("GET", "/v2/catalog/gpus?include=AVAILABILITY&product=VM").status == 400
    app.account.stock = {(A40, DC): 20, (A40, "EU-SE-1"): 1}
    body = call("GET", "/v2/catalog/gpus?include=AVAILABILITY&product=POD").body
    valid(contract, "ListGpuTypesResponse", body)
    a40 = next(g for g in body["gpus"] if g["id"] == A40)
    assert {d["id"]: d["availability"] for d in a40["dataCenters"]} == {
        DC: "HIGH",
        "EU-SE-1": "LOW",
    }


def test_data_centres_with_gpu_availability_and_volume_tiers(
    call: Call, app: App, contract: Contract
) -> None:
    app.account.stock = {(A40, DC): 2}
    plain = valid(contract, "ListDataCentersResponse", call("GET", "/v2/catalog/datacenters").body)
    ro = next(d for d in plain["dataCenters"] if d["id"] == DC)
    assert ro["region"] == "EUROPE" and "gpuAvailability" not in ro
    assert ro["networkVolumeTypes"] == list(app.account.realism.tiers(DC))
    assert call("POST", "/_emulator/volume-types", {"dataCenterId": DC, "types": []}).status == 200
    body = call("GET", "/v2/catalog/datacenters?include=GPU_AVAILABILITY").body
    valid(contract, "ListDataCentersResponse", body)
    ro = next(d for d in body["dataCenters"] if d["id"] == DC)
    assert ro["networkVolumeTypes"] == []
    stock = {g["id"]: g["availability"] for g in ro["gpuAvailability"]}
    assert stock[A40] == "LOW" and stock["NVIDIA H200"] == "NONE"


def _pod(billed: list[list[Any]], pod_id: str = "p1") -> PodRecord:
    return PodRecord(pod_id, "n", {}, "RUNNING", DC, 1.0, "2026-11-30T00:00:00Z", billed=billed)


NOW = datetime(2026, 11, 30, 12, 30, tzinfo=UTC)


def _at(hours: float) -> str:
    return (NOW - timedelta(hours=hours)).isoformat()


def test_billing_buckets_a_pod_by_the_hours_it_held_gpus(contract: Contract) -> None:
    # Ran 10:30-11:30 at $2/h, stopped, started again 12:00 at $1/h, still running.
    pods = [_pod([[_at(2), _at(1), 2.0], [_at(0.5), None, 1.0]])]
    body = pod_billing(pods, {"bucketSize": ["hour"], "lastN": ["3"]}, NOW)
    valid(contract, "ListPodBillingResponse", body)
    amounts = {r["startTime"][11:16]: r["totalAmount"] for r in body["records"]}
    assert amounts == {"10:00": 1.0, "11:00": 1.0, "12:00": 0.5}
    assert body["metadata"]["totals"]["totalAmount"] == 2.5
    assert body["metadata"]["query"]["startTime"].startswith("2026-11-30T10:00")
    day = pod_billing(pods, {"bucketSize": ["day"], "lastN": ["7"]}, NOW)
    assert [r["totalAmount"] for r in day["records"]] == [2.5]
    other = pod_billing(pods, {"podId": ["p2"], "lastN": ["1"]}, NOW)
    assert other["records"] == [] and other["metadata"]["uniquePodCount"] == 0


@pytest.mark.parametrize(
    "query",
    [
        pytest.param({"bucketSize": ["minute"]}, id="bad-bucket"),
        pytest.param({"lastN": ["0"]}, id="lastN-zero"),
        pytest.param({"lastN": ["2"], "startTime": ["2026-11-01T00:00:00Z"]}, id="exclusive"),
        pytest.param({"startTime": ["yesterday"]}, id="bad-time"),
    ],
)
def test_billing_rejects_a_bad_query(call: Call, query: dict[str, list[str]]) -> None:
    from urllib.parse import urlencode

    response = call("GET", "/v2/billing/pods?" + urlencode(query, doseq=True))
    assert response.status == 400 and response.body["status"] == 400


def test_billing_window_without_lastN_defaults_to_thirty_days() -> None:
    start, end, bucket = window({}, NOW)
    assert bucket == "day" and end == datetime(2026, 12, 1, tzinfo=UTC)
    assert start == datetime(2026, 10, 31, tzinfo=UTC)


def test_a_live_pod_shows_up_in_billing_and_stops_billing_when_stopped(
    call: Call, contract: Contract
) -> None:
    pod = call("POST", "/v2/pods", pod_body()).body
    assert call("POST", f"/_emulator/pods/{pod['id']}/stop").status == 200
    body = valid(contract, "ListPodBillingResponse", call("GET", "/v2/billing/pods?lastN=1").body)
    [record] = body["records"]
    assert record["podId"] == pod["id"] and record["totalAmount"] >= 0
    first = record["totalAmount"]
    again = call("GET", "/v2/billing/pods?lastN=1").body["records"][0]["totalAmount"]
    assert again == first  # stopped: nothing more accrues


def test_out_of_band_terminate_edit_price_and_stock(call: Call, app: App) -> None:
    pod = call("POST", "/v2/pods", pod_body()).body
    edited = call("PATCH", f"/_emulator/pods/{pod['id']}", {"args": "by hand"})
    assert edited.status == 200 and edited.body["args"] == "by hand"
    assert call("PATCH", f"/_emulator/pods/{pod['id']}", {"cloud": "X"}).status == 400
    assert call("POST", f"/_emulator/pods/{pod['id']}/terminate").status == 200
    assert call("GET", f"/v2/pods/{pod['id']}").status == 404
    assert call("POST", "/_emulator/prices", {"gpuId": A40, "secure": 0.55}).status == 200
    gpus = call("GET", "/v2/catalog/gpus").body["gpus"]
    assert next(g for g in gpus if g["id"] == A40)["price"]["secure"] == 0.55
    created = call("POST", "/v2/pods", pod_body()).body
    assert created["cost"] == 0.55
    assert call("POST", "/_emulator/stock", {"gpuId": A40, "available": 0}).status == 200
    assert call("POST", "/v2/pods", pod_body()).status == 400
    assert call("POST", "/_emulator/prices", {"gpuId": "nope", "secure": 1}).status == 400
    assert call("POST", "/_emulator/stock", {"gpuId": A40}).status == 400
    call("POST", "/_emulator/reset")
    assert app.account.catalog.usd_per_hour(A40, "SECURE") == 0.40


def test_out_of_band_changes_survive_a_state_file_round_trip(call: Call, app: App) -> None:
    from frutebox_infra.emulator.state import Account

    call("POST", "/_emulator/prices", {"gpuId": A40, "secure": 0.61})
    call("POST", "/_emulator/volume-types", {"dataCenterId": DC, "types": ["HIGH_PERFORMANCE"]})
    again = Account.restore(app.account.initial_catalog, app.account.snapshot(), None)
    assert again.catalog.usd_per_hour(A40, "SECURE") == 0.61
    assert again.volume_types == {DC: ["HIGH_PERFORMANCE"]}
