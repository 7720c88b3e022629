"""The one entry to every report: a view and a format in, the text to print out.

Each view type maps to the `Renderers` of its module; a view is added by writing its module
and giving it a row in RENDERERS.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from frutebox_infra.plumbing.errors import UsageError
from frutebox_infra.report import Format, Renderers
from frutebox_infra.report.catalog_report import CATALOG
from frutebox_infra.report.diff_report import DIFF
from frutebox_infra.report.plan_report import PLAN
from frutebox_infra.report.prices_report import PRICES
from frutebox_infra.report.status_report import STATUS
from frutebox_infra.report.usage_report import USAGE
from frutebox_infra.views.catalog import CatalogView
from frutebox_infra.views.diff import DiffView
from frutebox_infra.views.plan import PlanView
from frutebox_infra.views.price_compare import PriceComparison
from frutebox_infra.views.status_view import StatusView
from frutebox_infra.views.usage import UsageView

View = PlanView | CatalogView | DiffView | StatusView | PriceComparison | UsageView

RENDERERS: Mapping[type, Renderers[Any]] = {
    PlanView: PLAN,
    CatalogView: CATALOG,
    DiffView: DIFF,
    StatusView: STATUS,
    PriceComparison: PRICES,
    UsageView: USAGE,
}


def renderers(view_type: type) -> Renderers[Any]:
    return RENDERERS[view_type]


def formats(view_type: type) -> tuple[Format, ...]:
    """The formats a view offers, for its command's `--format` choices."""
    return renderers(view_type).formats


def render(view: View, fmt: Format) -> str:
    """The view in `fmt`: JSON with stable keys, a Markdown comment, or a terminal table."""
    r = renderers(type(view))
    if fmt is Format.JSON:
        return json.dumps(r.data(view), indent=2)
    show = r.markdown if fmt is Format.MARKDOWN else r.table
    if show is None:
        offered = ", ".join(r.formats)
        raise UsageError(f"{r.name} has no {fmt} form; use one of {offered}")
    return show(view)
