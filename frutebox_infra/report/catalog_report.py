"""The catalog (`frutebox models`): every registry model as resolved, servable or why not, as
a terminal table and as versioned data; it has no pull-request form."""

from __future__ import annotations

from typing import Any

from frutebox_infra.planner import Resolution
from frutebox_infra.report import Renderers
from frutebox_infra.report.data_fields import placement_data
from frutebox_infra.report.speed_cells import SPEED_HEADERS, speed_cells
from frutebox_infra.report.text import bullets, table, usd
from frutebox_infra.views.catalog import CatalogView

CATALOG_VERSION = 1
"""Changes when a key of `catalog_data` does."""

CATALOG_HEADERS = ("MODEL", "ENGINE", "CHEAPEST", "$/H", *SPEED_HEADERS, "N", "STATUS")


def catalog_row(view: CatalogView, r: Resolution) -> list[str]:
    p = view.cheapest(r)
    problem = view.problem(r)
    return [
        r.model_id,
        r.engine or "-",
        p.label if p else "-",
        usd(p.usd_per_hour) if p else "-",
        *speed_cells(p.speed if p else None),
        str(len(r.placements)),
        "servable" if view.servable(r) else (problem.rule if problem else "no placement"),
    ]


def catalog_table(view: CatalogView) -> str:
    resolutions = view.resolutions
    servable = sum(view.servable(r) for r in resolutions)
    floor = (
        [
            f"CHEAPEST = the cheapest placement decoding at least {view.floor:g} tok/s per stream"
            " (a stack's default",
            "minDecodeTokensPerSecond); N = GPU types that fit.",
        ]
        if view.floor > 0
        else ["CHEAPEST = the cheapest placement; N = GPU types that fit."]
    )
    lines = [
        table(CATALOG_HEADERS, [catalog_row(view, r) for r in resolutions]),
        "",
        f"{servable} of {len(resolutions)} models servable.",
        *floor,
        "TOK/S = estimated decode tok/s per stream at the engine's default streams and the",
        "model's full context, AGG = all streams, $/1M = $ per 1M output tokens at full load.",
    ]
    problems = (view.problem(r) for r in resolutions)
    blocked = [str(p) for p in problems if p is not None]
    if blocked:
        lines += ["", "Why not, and the fix:", *bullets(blocked)]
    return "\n".join(lines)


def catalog_entry(view: CatalogView, r: Resolution) -> dict[str, Any]:
    m = r.model
    problem = view.problem(r)
    at_floor = view.cheapest(r)
    return {
        "id": r.model_id,
        "name": m.name if m else None,
        "capability": m.capability if m else None,
        "engine": r.engine,
        "servable": view.servable(r),
        "problem": str(problem) if problem else None,
        "problemRule": problem.rule if problem else None,
        "cheapest": placement_data(r.placements[0]) if r.placements else None,
        "cheapestAtFloor": placement_data(at_floor) if at_floor else None,
        "placements": [placement_data(p) for p in r.placements],
        "warnings": list(r.warnings_with(at_floor)),
    }


def catalog_data(view: CatalogView) -> dict[str, Any]:
    return {
        "version": CATALOG_VERSION,
        "minDecodeTokensPerSecond": view.floor,
        "models": [catalog_entry(view, r) for r in view.resolutions],
    }


CATALOG = Renderers[CatalogView](
    name="the catalog",
    table=catalog_table,
    data=catalog_data,
)
