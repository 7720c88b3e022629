"""registry/gpus.yaml's Secure prices next to RunPod's live catalog, per GPU (pure).

The shell (`prices.py`) fetches the catalog and hands it in; the report renders the result.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from frutebox_infra.catalog.schema import Registry
from frutebox_infra.views.live_warnings import LiveCatalog, price_drift


@dataclass(frozen=True)
class PriceRow:
    """One GPU type; prices in USD per GPU per hour, None where a side does not name one."""

    gpu_id: str
    name: str
    registry_usd: float | None
    live_usd: float | None

    @property
    def drift(self) -> float | None:
        """The live price's relative difference from the registry's."""
        if self.registry_usd is None or not self.live_usd:
            return None
        return price_drift(self.registry_usd, self.live_usd)

    @property
    def differs(self) -> bool:
        """A live price exists and is not the registry's: `--write` would take it."""
        return (
            self.live_usd is not None and self.live_usd > 0 and self.live_usd != self.registry_usd
        )


@dataclass(frozen=True)
class PriceComparison:
    """Every registry GPU, in registry order."""

    rows: tuple[PriceRow, ...]

    @property
    def changed(self) -> Mapping[str, float]:
        """GPU id -> the live price, for the GPUs whose price differs."""
        return {r.gpu_id: float(r.live_usd) for r in self.rows if r.differs and r.live_usd}


def compare_prices(registry: Registry, live: LiveCatalog) -> PriceComparison:
    rows = []
    for gpu in registry.gpus:
        offer = live.gpus.get(gpu.id)
        rows.append(
            PriceRow(
                gpu.id,
                gpu.name,
                gpu.price_usd_per_hour.secure,
                offer.secure_usd_per_hour if offer else None,
            )
        )
    return PriceComparison(tuple(rows))
