"""The catalog: prices from the registry when present, built-ins otherwise, and --stock parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

from frutebox_infra.emulator.catalog import (
    BUILTIN_DATA_CENTERS,
    Catalog,
    CatalogError,
    gpu_types,
    load_catalog,
    parse_stock,
)
from frutebox_infra.emulator.server import REGISTRY_DIR

CATALOG = Catalog.builtin()


def test_the_builtin_table_covers_the_spec_gpus_and_data_centres() -> None:
    assert CATALOG.usd_per_hour("NVIDIA H100 80GB HBM3", "SECURE") == 2.69
    assert CATALOG.usd_per_hour("NVIDIA H200", "COMMUNITY") == 3.59
    assert CATALOG.usd_per_hour("NVIDIA A40", "COMMUNITY") == 0.40  # no community price known
    assert {"EU-RO-1", "EU-SE-1", "US-TX-3", "US-KS-2", "EU-CZ-1", "CA-MTL-1"} <= set(
        BUILTIN_DATA_CENTERS
    )


def test_prices_come_from_a_registry_directory(tmp_path: Path) -> None:
    (tmp_path / "gpus.yaml").write_text(
        "gpus:\n"
        "  - id: NVIDIA A40\n    name: A40\n    vram_gb: 48\n    max_count: 4\n"
        "    price_usd_per_hour: {secure: 0.5, community: 0.3, source: test}\n"
    )
    (tmp_path / "datacenters.yaml").write_text("data_centers:\n  - {id: AP-JP-1, name: Japan}\n")
    catalog = load_catalog(tmp_path)
    assert list(catalog.gpus) == ["NVIDIA A40"]
    assert catalog.gpus["NVIDIA A40"].max_count == 4
    assert catalog.usd_per_hour("NVIDIA A40", "COMMUNITY") == 0.3
    assert "AP-JP-1" in catalog.data_centers and "EU-RO-1" in catalog.data_centers


def test_the_project_registry_loads_if_present() -> None:
    if not (REGISTRY_DIR / "gpus.yaml").is_file():
        pytest.skip("registry/gpus.yaml not present")
    catalog = load_catalog(REGISTRY_DIR)
    assert "NVIDIA H100 80GB HBM3" in catalog.gpus
    assert all(g.secure_usd_per_hour > 0 for g in catalog.gpus.values())


def test_a_broken_price_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "gpus.yaml").write_text("gpus:\n  - id: NVIDIA A40\n")
    with pytest.raises(CatalogError, match="--registry none"):
        load_catalog(tmp_path)
    assert load_catalog(None) == Catalog.builtin()


def test_stock_specs() -> None:
    stock = parse_stock(["NVIDIA A40=2", "NVIDIA A100-SXM4-80GB=3@EU-SE-1"], CATALOG)
    assert stock[("NVIDIA A40", "US-TX-3")] == 2
    assert stock[("NVIDIA A100-SXM4-80GB", "EU-SE-1")] == 3
    assert stock[("NVIDIA A100-SXM4-80GB", "EU-RO-1")] == 0
    assert stock[("NVIDIA H200", "EU-RO-1")] == 0


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param("NVIDIA A40", "expected GPU_ID=N", id="no-count"),
        pytest.param("NVIDIA A40=lots", "expected GPU_ID=N", id="not-a-number"),
        pytest.param("NVIDIA GTX 1=1", "unknown GPU id", id="gpu"),
        pytest.param("NVIDIA A40=1@MARS-1", "unknown data centre", id="dc"),
    ],
)
def test_bad_stock_specs_are_named(spec: str, message: str) -> None:
    with pytest.raises(CatalogError, match=message):
        parse_stock([spec], CATALOG)


def test_gpu_types_levels() -> None:
    stock = {("NVIDIA A40", "EU-RO-1"): 20, ("NVIDIA A40", "EU-SE-1"): 5}
    a40 = next(g for g in gpu_types(CATALOG, stock, availability=True) if g["id"] == "NVIDIA A40")
    assert a40["availability"] == "HIGH"
    assert [(d["id"], d["availability"]) for d in a40["dataCenters"]] == [
        ("EU-RO-1", "HIGH"),
        ("EU-SE-1", "MEDIUM"),
    ]
