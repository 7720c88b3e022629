"""What the emulated account sells: GPU types and prices, data centres, and stock per cell."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

DEFAULT_STOCK = 64


class CatalogError(ValueError):
    """A price file or --stock value the emulator cannot use; the message says which and why."""


@dataclass(frozen=True)
class GpuType:
    """A GPU type on sale; prices are USD per GPU per hour, memory in GB."""

    id: str
    name: str
    memory_gb: int
    max_count: int
    secure_usd_per_hour: float
    community_usd_per_hour: float | None = None


BUILTIN_GPUS = (
    GpuType("NVIDIA RTX A4000", "RTX A4000", 16, 8, 0.17),
    GpuType("NVIDIA RTX A5000", "RTX A5000", 24, 8, 0.26),
    GpuType("NVIDIA A40", "A40", 48, 8, 0.40),
    GpuType("NVIDIA RTX A6000", "RTX A6000", 48, 8, 0.49),
    GpuType("NVIDIA A100 80GB PCIe", "A100 PCIe", 80, 8, 1.19),
    GpuType("NVIDIA A100-SXM4-80GB", "A100 SXM", 80, 8, 1.29),
    GpuType("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000", 96, 8, 2.09),
    GpuType("NVIDIA H100 80GB HBM3", "H100 SXM", 80, 8, 2.69),
    GpuType("NVIDIA H200", "H200 SXM", 141, 8, 4.59, 3.59),
)
BUILTIN_DATA_CENTERS = {
    "EU-RO-1": "Romania",
    "EU-SE-1": "Sweden",
    "EU-CZ-1": "Czech Republic",
    "US-TX-3": "Texas",
    "US-KS-2": "Kansas",
    "CA-MTL-1": "Montreal",
}


@dataclass(frozen=True)
class Catalog:
    """What the emulated account can buy, and where."""

    gpus: Mapping[str, GpuType]
    data_centers: Mapping[str, str]

    @classmethod
    def builtin(cls) -> Catalog:
        return cls({g.id: g for g in BUILTIN_GPUS}, dict(BUILTIN_DATA_CENTERS))

    def usd_per_hour(self, gpu_id: str, cloud: str) -> float:
        gpu = self.gpus[gpu_id]
        if cloud == "COMMUNITY" and gpu.community_usd_per_hour is not None:
            return gpu.community_usd_per_hour
        return gpu.secure_usd_per_hour


Stock = dict[tuple[str, str], int]


def full_stock(catalog: Catalog, per_cell: int = DEFAULT_STOCK) -> Stock:
    return {(g, dc): per_cell for g in catalog.gpus for dc in catalog.data_centers}


def _yaml_rows(path: Path, key: str) -> list[dict[str, Any]] | None:
    if not path.is_file():
        return None
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    rows = data.get(key) if isinstance(data, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise CatalogError(f"{path}: expected a list under {key!r}")
    return rows


def load_catalog(registry_dir: Path | None) -> Catalog:
    """Prices and GPU types from gpus.yaml, data centres from datacenters.yaml, else built-ins."""
    catalog = Catalog.builtin()
    if registry_dir is None:
        return catalog
    gpus, data_centers = dict(catalog.gpus), dict(catalog.data_centers)
    try:
        gpu_rows = _yaml_rows(registry_dir / "gpus.yaml", "gpus")
        if gpu_rows is not None:
            gpus = {}
            for row in gpu_rows:
                price = row["price_usd_per_hour"]
                community = price.get("community")
                gpus[row["id"]] = GpuType(
                    id=row["id"],
                    name=str(row.get("name", row["id"])),
                    memory_gb=int(row.get("vram_gb", 0)),
                    max_count=int(row.get("max_count", 8)),
                    secure_usd_per_hour=float(price["secure"]),
                    community_usd_per_hour=None if community is None else float(community),
                )
        for row in _yaml_rows(registry_dir / "datacenters.yaml", "data_centers") or []:
            data_centers[row["id"]] = str(row.get("name", row["id"]))
    except (KeyError, TypeError, ValueError, yaml.YAMLError) as exc:
        raise CatalogError(
            f"{registry_dir}: cannot read GPU prices or data centres ({exc!r});"
            " fix the file or pass --registry none for built-in prices"
        ) from exc
    return Catalog(gpus, data_centers)


def parse_stock(specs: Sequence[str], catalog: Catalog) -> Stock:
    """`GPU_ID=N[@DC]`: N GPUs free in DC (every data centre without @DC); unnamed cells: 0."""
    stock: Stock = {(g, dc): 0 for g in catalog.gpus for dc in catalog.data_centers}
    for spec in specs:
        gpu_id, sep, rest = spec.rpartition("=")
        count_text, _, dc = rest.partition("@")
        if not sep or not count_text.isdigit():
            raise CatalogError(f"--stock {spec!r}: expected GPU_ID=N or GPU_ID=N@DATA_CENTER")
        if gpu_id not in catalog.gpus:
            raise CatalogError(
                f"--stock {spec!r}: unknown GPU id; known: {', '.join(catalog.gpus)}"
            )
        if dc and dc not in catalog.data_centers:
            raise CatalogError(
                f"--stock {spec!r}: unknown data centre; known: {', '.join(catalog.data_centers)}"
            )
        for cell in [dc] if dc else list(catalog.data_centers):
            stock[(gpu_id, cell)] = int(count_text)
    return stock


def _level(available: int) -> str:
    if available <= 0:
        return "NONE"
    return "LOW" if available < 4 else "MEDIUM" if available < 16 else "HIGH"


def gpu_types(catalog: Catalog, stock: Stock, *, availability: bool) -> list[dict[str, Any]]:
    """The catalog as GET /v2/catalog/gpus shows it (schema `GpuType`)."""
    gpus = []
    for g in catalog.gpus.values():
        community = g.community_usd_per_hour
        item: dict[str, Any] = {
            "id": g.id,
            "name": g.name,
            "pool": None,
            "manufacturer": "NVIDIA",
            "memory": g.memory_gb,
            "secure": True,
            "community": community is not None,
            "price": {"secure": g.secure_usd_per_hour, "community": community or 0.0},
            "maxCount": {"secure": g.max_count, "community": g.max_count if community else 0},
        }
        if availability:
            cells = [(dc, stock.get((g.id, dc), 0)) for dc in catalog.data_centers]
            item["availability"] = _level(sum(n for _, n in cells))
            item["dataCenters"] = [
                {"id": dc, "name": catalog.data_centers[dc], "availability": _level(n)}
                for dc, n in cells
                if n > 0
            ]
        gpus.append(item)
    return gpus
