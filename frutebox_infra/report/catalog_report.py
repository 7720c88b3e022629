"""The catalog (`frutebox models`): every registry model as resolved, servable or why not, as
a terminal table and as versioned data; it has no pull-request form."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from frutebox_infra.report import Renderers
from frutebox_infra.report.data_fields import placement_data
from frutebox_infra.report.text import bullets, table, usd
from frutebox_infra.resolver import Resolution

CATALOG_VERSION = 1
"""Changes when a key of `catalog_data` does."""

CATALOG_HEADERS = ("MODEL", "ENGINE", "CHEAPEST", "$/H", "N", "STATUS")


@dataclass(frozen=True)
class CatalogView:
    """Every registry model as resolved: servable, or why not."""

    resolutions: tuple[Resolution, ...]


def catalog_row(r: Resolution) -> list[str]:
    p = r.placements[0] if r.placements else None
    return [
        r.model_id,
        r.engine or "-",
        p.label if p else "-",
        usd(p.usd_per_hour) if p else "-",
        str(len(r.placements)),
        "servable" if r.servable else (r.problem.rule if r.problem else "no placement"),
    ]


def catalog_table(view: CatalogView) -> str:
    resolutions = view.resolutions
    servable = sum(r.servable for r in resolutions)
    lines = [
        table(CATALOG_HEADERS, [catalog_row(r) for r in resolutions]),
        "",
        f"{servable} of {len(resolutions)} models servable.",
    ]
    blocked = [str(r.problem) for r in resolutions if r.problem is not None]
    if blocked:
        lines += ["", "Why not, and the fix:", *bullets(blocked)]
    return "\n".join(lines)


def catalog_entry(r: Resolution) -> dict[str, Any]:
    m = r.model
    return {
        "id": r.model_id,
        "name": m.name if m else None,
        "capability": m.capability if m else None,
        "engine": r.engine,
        "servable": r.servable,
        "problem": str(r.problem) if r.problem else None,
        "problemRule": r.problem.rule if r.problem else None,
        "cheapest": placement_data(r.placements[0]) if r.placements else None,
        "placements": [placement_data(p) for p in r.placements],
        "warnings": list(r.warnings),
    }


def catalog_data(view: CatalogView) -> dict[str, Any]:
    return {"version": CATALOG_VERSION, "models": [catalog_entry(r) for r in view.resolutions]}


CATALOG = Renderers[CatalogView]("the catalog", catalog_table, catalog_data)
