"""One `render(view, format)` for every report: each view type has its renderers, each of its
formats renders, JSON always carries a `version`, and a format a view lacks is one UsageError."""

from __future__ import annotations

import json
from typing import Any, get_args

import pytest

from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.planner.resolver import resolve
from frutebox_infra.plumbing.errors import UsageError
from frutebox_infra.report import Format, Renderers
from frutebox_infra.report.catalog_report import CATALOG
from frutebox_infra.report.diff_report import DIFF
from frutebox_infra.report.plan_report import PLAN
from frutebox_infra.report.prices_report import PRICES
from frutebox_infra.report.render import RENDERERS, View, formats, render
from frutebox_infra.report.status_report import STATUS
from frutebox_infra.report.usage_report import USAGE
from frutebox_infra.views.catalog import CatalogView
from frutebox_infra.views.diff import DiffView, diff_plans
from frutebox_infra.views.live_warnings import LiveCatalog, LiveGpu
from frutebox_infra.views.plan import PlanView
from frutebox_infra.views.price_compare import PriceComparison, compare_prices
from frutebox_infra.views.status_view import StatusView
from tests.factories import real_registry, settings
from tests.views.test_drift import IN_SYNC, status
from tests.views.test_usage import view as usage


def plan(*models: str) -> FleetPlan:
    return plan_fleet(real_registry(), settings(models=list(models)), stack="test")


def catalog() -> CatalogView:
    registry = real_registry()
    return CatalogView(resolutions=tuple(resolve(registry, m.id) for m in registry.models))


def prices() -> PriceComparison:
    registry = real_registry()
    gpu = registry.gpus[0]
    return compare_prices(
        registry, LiveCatalog(gpus={gpu.id: LiveGpu(id=gpu.id, secure_usd_per_hour=9.99)})
    )


VIEWS: list[tuple[Any, Renderers[Any], tuple[Format, ...]]] = [
    (PlanView(plan=plan("qwen3-8b", "sdxl-1.0")), PLAN, tuple(Format)),
    (catalog(), CATALOG, (Format.TABLE, Format.JSON)),
    (
        DiffView(
            diff=diff_plans(plan("qwen3-8b"), plan("qwen3-8b", "sdxl-1.0")), base="main", head="pr"
        ),
        DIFF,
        tuple(Format),
    ),
    (status(IN_SYNC), STATUS, tuple(Format)),
    (prices(), PRICES, (Format.TABLE, Format.JSON)),
    (usage(), USAGE, tuple(Format)),
]
IDS = ["plan", "catalog", "diff", "status", "prices", "usage"]


def test_every_view_type_has_renderers_and_nothing_else_does() -> None:
    assert set(RENDERERS) == set(get_args(View))
    assert {type(view) for view, _, _ in VIEWS} == set(RENDERERS)
    assert StatusView in RENDERERS


@pytest.mark.parametrize(("view", "renderers", "offered"), VIEWS, ids=IDS)
def test_each_format_a_view_offers_renders_through_its_module(
    view: View, renderers: Renderers[Any], offered: tuple[Format, ...]
) -> None:
    assert RENDERERS[type(view)] is renderers
    assert formats(type(view)) == renderers.formats == offered
    assert render(view, Format.TABLE) == renderers.table(view)
    assert json.loads(render(view, Format.JSON)) == renderers.data(view)
    if Format.MARKDOWN in offered:
        assert renderers.markdown is not None
        assert render(view, Format.MARKDOWN) == renderers.markdown(view)


@pytest.mark.parametrize(("view", "renderers", "offered"), VIEWS, ids=IDS)
def test_every_json_output_starts_with_its_version(
    view: View, renderers: Renderers[Any], offered: tuple[Format, ...]
) -> None:
    data = json.loads(render(view, Format.JSON))
    assert next(iter(data)) == "version" and data["version"] == 1


@pytest.mark.parametrize(
    ("view", "name"),
    [pytest.param(catalog(), "the catalog", id="catalog"),
     pytest.param(prices(), "the price comparison", id="prices")],
)  # fmt: skip
def test_a_format_a_view_lacks_is_the_same_usage_error(view: View, name: str) -> None:
    with pytest.raises(UsageError) as error:
        render(view, Format.MARKDOWN)
    assert str(error.value) == f"{name} has no markdown form; use one of table, json"


def test_a_diff_renders_with_its_side_labels() -> None:
    view = VIEWS[2][0]
    data = json.loads(render(view, Format.JSON))
    assert (data["base"], data["head"]) == ("main", "pr")
    assert "main → pr" in render(view, Format.TABLE)
    assert "`main` → `pr`" in render(view, Format.MARKDOWN)
