"""The OpenAPI validator: $refs resolve inside the document and errors read like the API's."""

from __future__ import annotations

from frutebox_infra.emulator.openapi import load_openapi
from tests.emulator.conftest import OPENAPI


def test_the_packaged_document_is_the_v2_contract() -> None:
    document = load_openapi()
    assert document["info"]["version"] == "2.0.0"
    assert "/v2/pods" in document["paths"]


def test_a_valid_create_body_has_no_errors() -> None:
    body = {
        "name": "p",
        "image": "i",
        "args": "a",
        "env": {"K": "v"},
        "ports": ["8080/http"],
        "disk": 20,
        "gpu": {"id": "NVIDIA A40", "count": 1},
        "cloud": "SECURE",
        "dataCenterIds": ["EU-RO-1"],
        "mounts": {"network": [{"volumeId": "v", "path": "/w"}]},
    }
    assert OPENAPI.errors("CreatePodRequest", body) == []


def test_unevaluated_properties_through_all_of_are_reported() -> None:
    assert OPENAPI.errors("CreatePodRequest", {"name": "p", "image": "i", "entrypoint": "x"}) == [
        "$: Unevaluated properties are not allowed ('entrypoint' was unexpected)"
    ]
    assert OPENAPI.errors(
        "CreatePodRequest", {"name": "p", "image": "i", "gpu": {"id": "g", "type": "x"}}
    ) == ["$.gpu: Unevaluated properties are not allowed ('type' was unexpected)"]


def test_a_deeper_error_is_not_buried_under_unevaluated_noise() -> None:
    errors = OPENAPI.errors("CreatePodRequest", {"name": "p", "image": "i", "gpu": {"id": 3}})
    assert errors == ["$.gpu.id: 3 is not of type 'string'"]


def test_image_is_required_without_a_template() -> None:
    assert OPENAPI.errors("CreatePodRequest", {"name": "p", "templateId": "t"}) == []
    assert OPENAPI.errors("CreatePodRequest", {"name": "p"}) == [
        "$: 'image' is a required property"
    ]


def test_volume_size_bounds() -> None:
    base = {"name": "w", "dataCenter": "EU-RO-1"}
    assert OPENAPI.errors("CreateNetworkVolumeRequest", {**base, "size": 10}) == []
    assert OPENAPI.errors("CreateNetworkVolumeRequest", {**base, "size": 4096}) == []
    assert OPENAPI.errors("CreateNetworkVolumeRequest", {**base, "size": 9}) != []
    assert OPENAPI.errors("CreateNetworkVolumeRequest", {**base, "size": 4097}) != []
