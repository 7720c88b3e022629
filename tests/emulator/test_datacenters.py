"""Data centres as `GET /v2/catalog/datacenters` lists them: region, volume tiers, GPU stock."""

from __future__ import annotations

import pytest

from frutebox_infra.emulator.catalog import Catalog
from frutebox_infra.emulator.datacenters import VOLUME_TYPES, data_centers, region
from frutebox_infra.emulator.routes import App
from tests.emulator.conftest import Call, valid

A40, DC = "NVIDIA A40", "EU-RO-1"
CATALOG = Catalog.builtin()


@pytest.mark.parametrize(
    ("dc", "expected"),
    [
        pytest.param("EU-RO-1", "EUROPE", id="eu"),
        pytest.param("EUR-IS-1", "EUROPE", id="eur"),
        pytest.param("US-TX-3", "NORTH_AMERICA", id="us"),
        pytest.param("CA-MTL-1", "NORTH_AMERICA", id="ca"),
        pytest.param("AP-JP-1", "ASIA", id="ap"),
        pytest.param("OC-AU-1", "UNKNOWN", id="unmapped"),
    ],
)
def test_the_region_follows_the_ids_prefix(dc: str, expected: str) -> None:
    assert region(dc) == expected


def test_every_catalog_centre_is_listed_with_both_tiers_unless_overridden() -> None:
    centres = data_centers(CATALOG, {}, {DC: ["STANDARD"]}, gpu_availability=False)
    assert [c["id"] for c in centres] == list(CATALOG.data_centers)
    tiers = {c["id"]: c["networkVolumeTypes"] for c in centres}
    assert tiers[DC] == ["STANDARD"]
    assert {tuple(t) for dc, t in tiers.items() if dc != DC} == {VOLUME_TYPES}
    assert all("gpuAvailability" not in c for c in centres)


def test_gpu_availability_is_the_stock_level_of_each_gpu_in_the_centre() -> None:
    stock = {(A40, DC): 3, ("NVIDIA H200", DC): 16}
    [ro] = [c for c in data_centers(CATALOG, stock, {}, gpu_availability=True) if c["id"] == DC]
    levels = {g["id"]: g["availability"] for g in ro["gpuAvailability"]}
    assert (levels[A40], levels["NVIDIA H200"], levels["NVIDIA RTX A4000"]) == (
        "LOW",
        "HIGH",
        "NONE",
    )


def test_the_route_shows_the_accounts_tiers_and_stock(call: Call, app: App) -> None:
    app.account.stock = {(A40, DC): 2}
    plain = valid("ListDataCentersResponse", call("GET", "/v2/catalog/datacenters").body)
    ro = next(d for d in plain["dataCenters"] if d["id"] == DC)
    assert ro["region"] == "EUROPE" and "gpuAvailability" not in ro
    assert ro["networkVolumeTypes"] == list(app.account.realism.tiers(DC))
    assert call("POST", "/_emulator/volume-types", {"dataCenterId": DC, "types": []}).status == 200
    body = call("GET", "/v2/catalog/datacenters?include=GPU_AVAILABILITY").body
    valid("ListDataCentersResponse", body)
    ro = next(d for d in body["dataCenters"] if d["id"] == DC)
    assert ro["networkVolumeTypes"] == []
    stock = {g["id"]: g["availability"] for g in ro["gpuAvailability"]}
    assert stock[A40] == "LOW" and stock["NVIDIA H200"] == "NONE"
