"""`GET /v2/catalog/datacenters`: each data centre's region, volume tiers, global networking and
GPU stock; its `globalNetwork` filter."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from frutebox_infra.emulator.catalog import Catalog, Stock, level

VOLUME_TYPES = ("STANDARD", "HIGH_PERFORMANCE")
REGIONS = {"EU": "EUROPE", "EUR": "EUROPE", "US": "NORTH_AMERICA", "CA": "NORTH_AMERICA"}


def region(dc_id: str) -> str:
    prefix = dc_id.split("-", 1)[0]
    return REGIONS.get(prefix, "ASIA" if prefix == "AP" else "UNKNOWN")


def data_centers(
    catalog: Catalog,
    stock: Stock,
    volume_types: Mapping[str, list[str]],
    *,
    gpu_availability: bool,
    global_network: bool | None = None,
) -> list[dict[str, Any]]:
    """Schema `DataCenter`; `volume_types` overrides a data centre's tiers (default: both);
    `global_network` keeps only the data centres that do (True) or do not (False) offer it."""
    out = []
    for dc, name in catalog.data_centers.items():
        if global_network is not None and (dc in catalog.networked) != global_network:
            continue
        item: dict[str, Any] = {
            "id": dc,
            "name": name,
            "region": region(dc),
            "networkVolumeTypes": list(volume_types.get(dc, VOLUME_TYPES)),
            "compliance": [],
            "globalNetwork": dc in catalog.networked,
        }
        if gpu_availability:
            item["gpuAvailability"] = [
                {"id": g.id, "name": g.name, "availability": level(stock.get((g.id, dc), 0))}
                for g in catalog.gpus.values()
            ]
        out.append(item)
    return out
