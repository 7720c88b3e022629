"""The catalog: the registry's GPUs, prices and data centres, and --stock parsing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from frutebox_infra.emulator.catalog import (
    Catalog,
    gpu_types,
    load_catalog,
    parse_stock,
)
from frutebox_infra.plumbing.errors import ConfigError
from frutebox_infra.plumbing.paths import REGISTRY_DIR
from tests.factories import real_registry

CATALOG = Catalog.builtin()


def test_the_catalog_sells_the_registry_gpus_at_registry_prices() -> None:
    registry = real_registry()
    assert set(CATALOG.gpus) == {g.id for g in registry.gpus}
    for gpu in registry.gpus:
        assert CATALOG.usd_per_hour(gpu.id, "SECURE") == gpu.price_usd_per_hour.secure
    assert CATALOG.usd_per_hour("NVIDIA H200", "COMMUNITY") == 3.59
    # No community price recorded: the emulator charges the secure one.
    assert CATALOG.usd_per_hour("NVIDIA A40", "COMMUNITY") == 0.40
    assert set(CATALOG.data_centers) == {d.id for d in registry.data_centers}


def test_prices_come_from_the_registry_directory_given(tmp_path: Path) -> None:
    shutil.copytree(REGISTRY_DIR, tmp_path / "registry")
    gpus = tmp_path / "registry" / "gpus.yaml"
    gpus.write_text(gpus.read_text().replace("secure: 0.40", "secure: 0.55"))
    assert load_catalog(tmp_path / "registry").usd_per_hour("NVIDIA A40", "SECURE") == 0.55
    assert load_catalog(None) == Catalog.builtin()


def test_a_broken_registry_is_a_clear_error(tmp_path: Path) -> None:
    shutil.copytree(REGISTRY_DIR, tmp_path / "registry")
    (tmp_path / "registry" / "gpus.yaml").write_text("gpus:\n  - id: NVIDIA A40\n")
    with pytest.raises(ConfigError, match=r"gpus\.yaml"):
        load_catalog(tmp_path / "registry")


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
    with pytest.raises(ConfigError, match=message):
        parse_stock([spec], CATALOG)


def test_gpu_types_levels() -> None:
    stock = {("NVIDIA A40", "EU-RO-1"): 20, ("NVIDIA A40", "EU-SE-1"): 5}
    a40 = next(g for g in gpu_types(CATALOG, stock, availability=True) if g["id"] == "NVIDIA A40")
    assert a40["availability"] == "HIGH"
    assert [(d["id"], d["availability"]) for d in a40["dataCenters"]] == [
        ("EU-RO-1", "HIGH"),
        ("EU-SE-1", "MEDIUM"),
    ]
