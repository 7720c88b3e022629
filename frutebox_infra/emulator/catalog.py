"""What the emulated account sells: GPU types and prices, data centres, and stock per cell."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from frutebox_infra.catalog.files import load_registry
from frutebox_infra.catalog.schema import CpuFlavor, Gpu, Registry
from frutebox_infra.plumbing.errors import ConfigError
from frutebox_infra.plumbing.paths import REGISTRY_DIR

DEFAULT_STOCK = 64


@dataclass(frozen=True)
class Catalog:
    """What the emulated account can buy, and where."""

    gpus: Mapping[str, Gpu]
    data_centers: Mapping[str, str]
    cpus: Mapping[str, CpuFlavor] = field(default_factory=dict)
    """CPU pod flavors (GET /v2/catalog/cpus)."""
    networked: frozenset[str] = frozenset()
    """The data centres that offer global networking (their catalog entry's `globalNetwork`),
    as registry/datacenters.yaml records them."""

    @classmethod
    def from_registry(cls, registry: Registry) -> Catalog:
        """The account sells exactly the registry's GPUs and CPU flavors, at its prices, in
        its data centres."""
        gpus = {g.id: g for g in registry.gpus}
        cpus = {f.id: f for f in registry.cpu_flavors}
        names = {d.id: d.name for d in registry.data_centers}
        return cls(gpus, names, cpus, frozenset(registry.networked_data_centers))

    @classmethod
    def builtin(cls) -> Catalog:
        """The project's own registry: one home for every GPU and price fact."""
        return cls.from_registry(load_registry())

    def with_price(self, gpu_id: str, secure: float) -> Catalog:
        """The same catalog with one GPU's Secure price changed (RunPod repricing)."""
        gpu = self.gpus[gpu_id]
        price = replace(gpu.price_usd_per_hour, secure=secure)
        gpus = {**self.gpus, gpu_id: replace(gpu, price_usd_per_hour=price)}
        return replace(self, gpus=gpus)

    def usd_per_hour(self, gpu_id: str, cloud: str) -> float:
        """The cloud's price; where no community price was recorded, the secure one."""
        price = self.gpus[gpu_id].price_usd_per_hour
        if cloud == "COMMUNITY" and price.community is not None:
            return price.community
        return price.secure or 0.0


Stock = dict[tuple[str, str], int]


def full_stock(catalog: Catalog, per_cell: int = DEFAULT_STOCK) -> Stock:
    return {(g, dc): per_cell for g in catalog.gpus for dc in catalog.data_centers}


def load_catalog(registry_dir: Path | None) -> Catalog:
    """The catalog of the registry in `registry_dir` (None: the project's registry)."""
    return Catalog.from_registry(load_registry(registry_dir or REGISTRY_DIR))


def parse_stock(specs: Sequence[str], catalog: Catalog) -> Stock:
    """`GPU_ID=N[@DC]`: N GPUs free in DC (every data centre without @DC); unnamed cells: 0."""
    stock: Stock = {(g, dc): 0 for g in catalog.gpus for dc in catalog.data_centers}
    for spec in specs:
        gpu_id, sep, rest = spec.rpartition("=")
        count_text, _, dc = rest.partition("@")
        if not sep or not count_text.isdigit():
            raise ConfigError(f"--stock {spec!r}: expected GPU_ID=N or GPU_ID=N@DATA_CENTER")
        if gpu_id not in catalog.gpus:
            raise ConfigError(f"--stock {spec!r}: unknown GPU id; known: {', '.join(catalog.gpus)}")
        if dc and dc not in catalog.data_centers:
            raise ConfigError(
                f"--stock {spec!r}: unknown data centre; known: {', '.join(catalog.data_centers)}"
            )
        for cell in [dc] if dc else list(catalog.data_centers):
            stock[(gpu_id, cell)] = int(count_text)
    return stock


def level(available: int) -> str:
    if available <= 0:
        return "NONE"
    return "LOW" if available < 4 else "MEDIUM" if available < 16 else "HIGH"


def gpu_types(catalog: Catalog, stock: Stock, *, availability: bool) -> list[dict[str, Any]]:
    """The catalog as GET /v2/catalog/gpus shows it (schema `GpuType`)."""
    gpus = []
    for g in catalog.gpus.values():
        community = g.price_usd_per_hour.community
        item: dict[str, Any] = {
            "id": g.id,
            "name": g.name,
            "pool": None,
            "manufacturer": "NVIDIA",
            "memory": g.vram_gb,
            "secure": True,
            "community": community is not None,
            "price": {
                "secure": catalog.usd_per_hour(g.id, "SECURE"),
                "community": community or 0.0,
            },
            "maxCount": {"secure": g.max_count, "community": g.max_count if community else 0},
        }
        if availability:
            cells = [(dc, stock.get((g.id, dc), 0)) for dc in catalog.data_centers]
            item["availability"] = level(sum(n for _, n in cells))
            item["dataCenters"] = [
                {"id": dc, "name": catalog.data_centers[dc], "availability": level(n)}
                for dc, n in cells
                if n > 0
            ]
        gpus.append(item)
    return gpus
