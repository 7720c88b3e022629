"""`frutebox prices`: the registry's Secure prices against the live catalog's, as a terminal
table and as versioned data; it has no pull-request form (`--write` makes the pull request)."""

from __future__ import annotations

from typing import Any

from frutebox_infra.report import Renderers
from frutebox_infra.report.text import table
from frutebox_infra.views.live_warnings import PRICE_TOLERANCE
from frutebox_infra.views.price_compare import PriceComparison, PriceRow

PRICES_VERSION = 1
"""Changes when a key of `prices_data` does."""

PRICES_HEADERS = ("GPU", "REGISTRY $/H", "LIVE SECURE $/H", "DIFF", "")


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:.2f}"


def _beyond_tolerance(r: PriceRow) -> bool:
    return r.drift is not None and abs(r.drift) > PRICE_TOLERANCE


def price_row(r: PriceRow) -> list[str]:
    return [
        r.name,
        _money(r.registry_usd),
        _money(r.live_usd),
        "-" if r.drift is None else f"{r.drift:+.1%}",
        f"over {PRICE_TOLERANCE:.0%}" if _beyond_tolerance(r) else "",
    ]


def prices_table(view: PriceComparison) -> str:
    return table(PRICES_HEADERS, [price_row(r) for r in view.rows])


def prices_data(view: PriceComparison) -> dict[str, Any]:
    return {
        "version": PRICES_VERSION,
        "toleranceRatio": PRICE_TOLERANCE,
        "gpus": [
            {
                "id": r.gpu_id,
                "name": r.name,
                "registryUsdPerHour": r.registry_usd,
                "liveSecureUsdPerHour": r.live_usd,
                "driftRatio": None if r.drift is None else round(r.drift, 4),
                "beyondTolerance": _beyond_tolerance(r),
                "differs": r.differs,
            }
            for r in view.rows
        ],
    }


PRICES = Renderers[PriceComparison](
    name="the price comparison",
    table=prices_table,
    data=prices_data,
)
