"""CPU pods: the flavors sold (`GET /v2/catalog/cpus`), the rules a CPU create meets, and
billing as CPU compute."""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

import pytest

from frutebox_infra.emulator.catalog import Catalog
from frutebox_infra.emulator.clock import ManualClock
from frutebox_infra.emulator.cpus import admit_cpu, cpu_types
from frutebox_infra.emulator.errors import CAPACITY_DETAIL, ApiProblem
from tests.emulator.conftest import Call, valid
from tests.factories import real_registry

CATALOG = Catalog.builtin()


def cpu_pod(flavor: str = "cpu3c", vcpus: int = 2, **body: Any) -> dict[str, Any]:
    return {"name": "seed", "image": "python:3", "disk": 10,
            "cpu": {"id": flavor, "vcpuCount": vcpus}, **body}  # fmt: skip


def test_the_catalog_is_the_registrys_flavors_at_their_prices(call: Call) -> None:
    body = valid("ListCpuTypesResponse", call("GET", "/v2/catalog/cpus").body)
    by_id = {c["id"]: c for c in body["cpus"]}
    for flavor in real_registry().cpu_flavors:
        shown = by_id[flavor.id]
        assert shown["price"]["securePerVcpu"] == flavor.usd_per_vcpu_hour
        assert shown["vcpu"] == {"min": flavor.vcpu_min, "max": flavor.vcpu_max}
        assert shown["ramGbPerVcpu"] == flavor.ram_gb_per_vcpu
        assert "availability" not in shown
    assert by_id["cpu3c"]["name"] == "Compute-Optimized" and by_id["cpu3c"]["group"] == "Gen 3"
    one = valid("CpuType", call("GET", "/v2/catalog/cpus/cpu3g").body)
    assert one["id"] == "cpu3g"
    assert call("GET", "/v2/catalog/cpus/cpu9z").status == 404


def test_availability_needs_a_product_and_names_the_data_centres(call: Call) -> None:
    query = {"include": "AVAILABILITY", "product": "POD", "vcpuCount": "2"}
    body = valid("ListCpuTypesResponse", call("GET", "/v2/catalog/cpus?" + urlencode(query)).body)
    cheap = next(c for c in body["cpus"] if c["id"] == "cpu3c")
    assert cheap["availability"] == "HIGH"
    assert {d["id"] for d in cheap["dataCenters"]} == set(CATALOG.data_centers)
    too_many = cpu_types(CATALOG, {"include": ["AVAILABILITY"], "product": ["POD"],
                                   "vcpuCount": ["64"]})  # fmt: skip
    assert {c["availability"] for c in too_many} == {"NONE"}


@pytest.mark.parametrize(
    ("query", "message"),
    [
        pytest.param({"include": ["AVAILABILITY"]}, "product is required", id="no-product"),
        pytest.param({"product": ["POD"]}, "only with it", id="product-alone"),
        pytest.param({"include": ["AVAILABILITY"], "product": ["GPU"]}, "unknown product",
                     id="unknown-product"),
        pytest.param({"vcpuCount": ["4"]}, "only with include=AVAILABILITY", id="vcpus-alone"),
        pytest.param({"include": ["AVAILABILITY"], "product": ["POD"], "vcpuCount": ["6"]},
                     "power of two", id="vcpus-not-a-power-of-two"),
    ],
)  # fmt: skip
def test_a_bad_catalog_query_is_400(query: dict[str, list[str]], message: str) -> None:
    with pytest.raises(ApiProblem, match=message) as caught:
        cpu_types(CATALOG, query)
    assert caught.value.status == 400


@pytest.mark.parametrize(
    ("body", "usd_per_hour"),
    [
        pytest.param(cpu_pod(), 0.06, id="two-vcpus-of-cpu3c"),
        pytest.param(cpu_pod(vcpus=32, disk=320), 0.96, id="the-most-vcpus-and-disk"),
        pytest.param(cpu_pod("cpu3g", 4, disk=40), 0.16, id="cpu3g"),
    ],
)
def test_a_cpu_create_lands_at_the_flavors_price(body: dict[str, Any], usd_per_hour: float) -> None:
    dc, usd, memory = admit_cpu(body, CATALOG, ["EU-RO-1"])
    assert (dc, usd) == ("EU-RO-1", pytest.approx(usd_per_hour))
    flavor = CATALOG.cpus[body["cpu"]["id"]]
    assert memory == flavor.ram_gb_per_vcpu * body["cpu"]["vcpuCount"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(cpu_pod("cpu9z"), "unknown CPU flavor", id="unknown-flavor"),
        pytest.param(cpu_pod(vcpus=6), "power of two", id="not-a-power-of-two"),
        pytest.param(cpu_pod(vcpus=64), "takes 2 to 32 vCPUs", id="above-the-flavors-range"),
        pytest.param(cpu_pod(disk=21), "above 20 GB", id="disk-above-the-cap"),
        pytest.param({**cpu_pod(), "disk": 50}, "above 20 GB", id="default-disk-too-big"),
    ],
)
def test_a_cpu_create_outside_the_flavors_rules_is_400(body: dict[str, Any], message: str) -> None:
    with pytest.raises(ApiProblem, match=message) as caught:
        admit_cpu(body, CATALOG, ["EU-RO-1"])
    assert caught.value.status == 400


def test_a_flavor_not_offered_in_the_data_centre_has_no_capacity() -> None:
    flavor = replace(CATALOG.cpus["cpu3c"], data_centers=("US-TX-3",))
    only_texas = Catalog(CATALOG.gpus, CATALOG.data_centers, {"cpu3c": flavor})
    with pytest.raises(ApiProblem) as caught:
        admit_cpu(cpu_pod(), only_texas, ["EU-RO-1"])
    assert caught.value.detail == CAPACITY_DETAIL
    assert admit_cpu(cpu_pod(), only_texas, [])[0] == "US-TX-3"


def test_a_cpu_pod_bills_as_cpu_until_terminated(call: Call, clock: ManualClock) -> None:
    pod = call("POST", "/v2/pods", cpu_pod()).body
    assert pod["cpu"] == {"id": "cpu3c", "vcpuCount": 2, "memory": 4}  # 2 GB per vCPU
    clock.advance(3600)
    assert call("DELETE", f"/v2/pods/{pod['id']}").status == 204
    clock.advance(3600)
    body = valid(
        "ListPodBillingResponse", call("GET", "/v2/billing/pods?lastN=3&bucketSize=hour").body
    )
    totals = body["metadata"]["totals"]
    assert totals["cpuAmount"] == pytest.approx(0.06) and totals["gpuAmount"] == 0
    assert totals["totalAmount"] == pytest.approx(0.06)
