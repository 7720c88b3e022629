"""Admitting a pod create: RunPod's rules beyond the schema, where it lands, what it costs."""

from __future__ import annotations

from typing import Any

import pytest

from frutebox_infra.emulator.admission import Admitted, admit_pod, check_image, take_gpus
from frutebox_infra.emulator.catalog import Catalog, Stock, full_stock
from frutebox_infra.emulator.errors import CAPACITY_DETAIL, ApiProblem
from frutebox_infra.emulator.realism import Realism
from frutebox_infra.emulator.records import VolumeRecord
from tests.emulator.conftest import network, pod_body

CATALOG = Catalog.builtin()
A40 = "NVIDIA A40"
VOLUMES = {
    "v-se": VolumeRecord("v-se", "w", 50, "EU-SE-1"),
    "v-gone": VolumeRecord("v-gone", "w", 50, "EU-RO-1", deleted=True),
}


def admit(body: dict[str, Any], stock: Stock | None = None, **realism: Any) -> Admitted:
    return admit_pod(
        body,
        catalog=CATALOG,
        stock=full_stock(CATALOG) if stock is None else stock,
        volumes=VOLUMES,
        realism=Realism.realistic(**realism) if realism else Realism.fast(),
    )


@pytest.mark.parametrize(
    ("body", "status", "detail"),
    [
        pytest.param(pod_body(cpu={"id": "cpu5c", "vcpuCount": 2}), 400, "exactly one",
                     id="gpu+cpu"),
        pytest.param({"name": "p", "image": "i"}, 400, "exactly one", id="neither"),
        pytest.param(pod_body(templateId="t1"), 404, "template t1 not found", id="template"),
        pytest.param(pod_body(gpu={"id": "NVIDIA GTX 9000", "count": 1}), 400, "unknown GPU",
                     id="unknown-gpu"),
        pytest.param(pod_body(gpu={"id": A40, "count": 9}), 400, "at most 8", id="count"),
        pytest.param(pod_body(dataCenterIds=["MARS-1"]), 400, "unknown data center(s) MARS-1",
                     id="unknown-dc"),
        pytest.param(pod_body(mounts=network("nope")), 400, "does not exist", id="no-volume"),
        pytest.param(pod_body(mounts=network("v-gone")), 400, "does not exist", id="deleted"),
        pytest.param(pod_body(mounts=network("v-se")), 400, "dataCenterIds must include it",
                     id="volume-elsewhere"),
        pytest.param(pod_body(mounts=network("v-se"), dataCenterIds=["EU-SE-1"],
                              cloud="COMMUNITY"), 400, "SECURE", id="volume-community"),
        pytest.param(pod_body(mounts={**network("v-se"), "persistent": {"size": 1, "path": "/p"}}),
                     400, "mutually exclusive", id="two-mount-kinds"),
        pytest.param({"name": "p", "image": "i", "cpu": {"id": "cpu5c", "vcpuCount": 2},
                      "mounts": {"persistent": {"size": 1, "path": "/p"}}}, 400,
                     "not allowed on CPU pods", id="cpu-persistent"),
        pytest.param(pod_body(gpu={"id": A40, "allowedCudaVersions": ["12.8"],
                                   "minCudaVersion": "12.1"}), 400, "exclusive", id="cuda"),
    ],
)  # fmt: skip
def test_rules_the_schema_cannot_express(body: dict[str, Any], status: int, detail: str) -> None:
    stock = full_stock(CATALOG)
    with pytest.raises(ApiProblem) as caught:
        admit(body, stock)
    assert (caught.value.status, detail in caught.value.detail) == (status, True)
    assert stock == full_stock(CATALOG)  # a refused create takes nothing


def test_a_network_volume_pins_the_pod_to_its_data_centre() -> None:
    admitted = admit(pod_body(mounts=network("v-se"), dataCenterIds=["EU-RO-1", "EU-SE-1"]))
    assert admitted.data_center == "EU-SE-1"


def test_gpu_count_defaults_to_one_unless_the_account_requires_it() -> None:
    assert admit(pod_body(gpu={"id": A40})).body["gpu"]["count"] == 1
    with pytest.raises(ApiProblem, match=r"gpu\.count is required"):
        admit(pod_body(gpu={"id": A40}), require_gpu_count=True)


def test_the_request_is_kept_as_a_copy() -> None:
    request = pod_body(gpu={"id": A40})
    admit(request)
    assert request["gpu"] == {"id": A40}


@pytest.mark.parametrize(
    ("free", "taken"),
    [pytest.param(2, True, id="exactly-enough"), pytest.param(1, False, id="one-short")],
)
def test_a_pod_takes_its_gpus_only_where_enough_are_free(free: int, taken: bool) -> None:
    stock = {(A40, "EU-RO-1"): free}
    if taken:
        assert take_gpus(stock, CATALOG, A40, 2, ["EU-RO-1"]) == "EU-RO-1"
        assert stock == {(A40, "EU-RO-1"): 0}
    else:
        with pytest.raises(ApiProblem, match=CAPACITY_DETAIL):
            take_gpus(stock, CATALOG, A40, 2, ["EU-RO-1"])
        assert stock == {(A40, "EU-RO-1"): 1}


def test_without_data_centres_any_centre_with_room_serves() -> None:
    stock = {(A40, dc): 0 for dc in CATALOG.data_centers} | {(A40, "US-TX-3"): 1}
    assert take_gpus(stock, CATALOG, A40, 1, []) == "US-TX-3"


def test_cost_is_the_clouds_gpu_price_times_the_count_and_cpus_by_the_vcpu() -> None:
    two = admit(pod_body(gpu={"id": "NVIDIA H100 80GB HBM3", "count": 2}))
    assert two.usd_per_hour == pytest.approx(2 * 3.49)  # registry secure H100 price
    community = admit(pod_body(gpu={"id": "NVIDIA H200", "count": 1}, cloud="COMMUNITY"))
    assert community.usd_per_hour == pytest.approx(3.59)
    cpu = admit({"name": "p", "image": "i", "disk": 20, "cpu": {"id": "cpu3c", "vcpuCount": 4}})
    assert (cpu.usd_per_hour, cpu.cuda, cpu.data_center) == (
        pytest.approx(4 * 0.03),  # registry cpu3c, per vCPU-hour
        None,
        next(iter(CATALOG.data_centers)),
    )


def test_the_load_grows_with_the_mounted_volume_and_shrinks_with_the_time_scale() -> None:
    on_volume = pod_body(mounts=network("v-se"), dataCenterIds=["EU-SE-1"])
    assert admit(on_volume, load_base_s=30.0, load_s_per_gb=2.0).load_s == 30 + 2 * 50
    assert admit(pod_body(), load_base_s=30.0, load_s_per_gb=2.0).load_s == 30
    assert admit(on_volume, load_base_s=30.0, load_s_per_gb=2.0, time_scale=10.0).load_s == 13
    assert admit(on_volume).load_s == 0


def test_an_image_outside_the_known_ones_is_422_and_any_image_passes_without_a_list() -> None:
    check_image(Realism.fast(), "anything:1")
    realism = Realism.realistic(known_images=frozenset({"ollama/ollama:0.35.1"}))
    check_image(realism, "ollama/ollama:0.35.1")
    with pytest.raises(ApiProblem) as caught:
        check_image(realism, "nosuch/image:9")
    assert caught.value.status == 422 and caught.value.errors is None
