"""RunPod's payloads as read: v2 field names, what we derive from them, and whatever the API
adds later ignored rather than fatal."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from frutebox_infra.runpod.wire import GpuOffer, NetworkVolume, Pod, PodList, VolumeList
from tests.runpod.conftest import VOLUME_ID, pod


def test_a_pod_reads_its_v2_names_and_ignores_new_fields() -> None:
    read = Pod.model_validate(pod(status="RUNNING") | {"startedAt": "t0", "newField": {"x": 1}})
    assert (read.data_center_id, read.started_at, read.volume_id) == ("EU-RO-1", "t0", VOLUME_ID)
    assert read.gpu is not None and (read.gpu.id, read.gpu.count) == ("NVIDIA A40", 1)
    assert "newField" not in read.model_dump()


@pytest.mark.parametrize(
    ("mounts", "expected"),
    [
        pytest.param({"network": [{"volumeId": "v1", "path": "/w"}]}, "v1", id="mounted"),
        pytest.param({}, None, id="no-mounts"),
        pytest.param({"network": []}, None, id="empty"),
        pytest.param({"network": {"volumeId": "v1"}}, None, id="not-a-list"),
        pytest.param({"network": [{"path": "/w"}]}, None, id="no-volume-id"),
    ],
)
def test_a_pods_volume_is_its_first_network_mount(
    mounts: dict[str, Any], expected: str | None
) -> None:
    assert Pod.model_validate(pod() | {"mounts": mounts}).volume_id == expected


@pytest.mark.parametrize(
    ("runtime", "expected"),
    [
        pytest.param({"uptime": 12}, 12.0, id="int"),
        pytest.param({"uptime": 1.5}, 1.5, id="float"),
        pytest.param({"uptime": "12"}, None, id="not-a-number"),
        pytest.param({}, None, id="missing"),
        pytest.param(None, None, id="no-runtime"),
    ],
)
def test_uptime_only_when_the_api_gives_a_number(
    runtime: dict[str, Any] | None, expected: float | None
) -> None:
    assert Pod.model_validate(pod() | {"runtime": runtime}).uptime_s == expected


def test_payloads_are_frozen() -> None:
    read = Pod.model_validate(pod())
    with pytest.raises(ValidationError):
        read.status = "RUNNING"  # type: ignore[misc]


def test_the_list_envelopes_read_their_documented_keys() -> None:
    vol = {"id": "v", "name": "w", "size": 50, "dataCenter": "EU-RO-1"}
    assert [p.id for p in PodList.model_validate({"pods": [pod("a")]}).pods] == ["a"]
    listed = VolumeList.model_validate({"networkVolumes": [vol]}).network_volumes
    assert listed == [NetworkVolume.model_validate(vol)] and listed[0].type is None
    with pytest.raises(ValidationError):
        VolumeList.model_validate({"volumes": [vol]})


def test_a_gpu_offer_reads_prices_stock_and_cuda() -> None:
    offer = GpuOffer.model_validate(
        {
            "id": "NVIDIA A40",
            "price": {"secure": 0.4, "community": 0.2},
            "dataCenters": [{"id": "EU-RO-1", "availability": "LOW"}],
            "cudaVersions": [{"version": "12.8", "available": True}],
        }
    )
    assert (offer.price.secure, offer.availability) == (0.4, None)
    assert [(d.id, d.availability) for d in offer.data_centers] == [("EU-RO-1", "LOW")]
    assert [(c.version, c.available) for c in offer.cuda_versions] == [("12.8", True)]
