"""The one entry to every report: a view and a format in, the text to print out."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from frutebox_infra.diff import FleetDiff
from frutebox_infra.drift import StatusView
from frutebox_infra.errors import UsageError
from frutebox_infra.plan import FleetPlan
from frutebox_infra.report import Format
from frutebox_infra.report.data import catalog_entry, plan_data
from frutebox_infra.report.diff_data import diff_data
from frutebox_infra.report.diff_markdown import diff_markdown
from frutebox_infra.report.diff_table import diff_table
from frutebox_infra.report.markdown import plan_markdown
from frutebox_infra.report.table import catalog_table, plan_table
from frutebox_infra.resolver import Resolution


@dataclass(frozen=True)
class CatalogView:
    """Every registry model as resolved: servable, or why not."""

    resolutions: tuple[Resolution, ...]


@dataclass(frozen=True)
class DiffView:
    """A change's diff and what to call its two sides (a ref, or the work tree)."""

    diff: FleetDiff
    base: str
    head: str


View = FleetPlan | CatalogView | DiffView | StatusView

CATALOG_FORMATS = (Format.TABLE, Format.JSON)
"""The catalog is a terminal view; it has no pull-request (Markdown) form."""


def render(view: View, fmt: Format) -> str:
    """The view in `fmt`: JSON with stable keys, a Markdown comment, or a terminal table."""
    if fmt is Format.JSON:
        return json.dumps(data(view), indent=2)
    markdown = fmt is Format.MARKDOWN
    if isinstance(view, StatusView):
        from frutebox_infra.report.status import status_markdown, status_table

        return status_markdown(view) if markdown else status_table(view)
    if isinstance(view, DiffView):
        show = diff_markdown if markdown else diff_table
        return show(view.diff, base=view.base, head=view.head)
    if isinstance(view, CatalogView):
        if markdown:
            formats = ", ".join(CATALOG_FORMATS)
            raise UsageError(f"the catalog has no {fmt} form; use one of {formats}")
        return catalog_table(view.resolutions)
    return plan_markdown(view) if markdown else plan_table(view)


def data(view: View) -> Any:
    """The view as plain data (what `--format json` prints)."""
    if isinstance(view, StatusView):
        from frutebox_infra.report.status import status_data

        return status_data(view)
    if isinstance(view, DiffView):
        return diff_data(view.diff, base=view.base, head=view.head)
    if isinstance(view, CatalogView):
        return [catalog_entry(r) for r in view.resolutions]
    return plan_data(view)
