"""One `render(view, format)` for every report: each view in each of its formats."""

from __future__ import annotations

import json

import pytest

from frutebox_infra.diff import diff_plans
from frutebox_infra.errors import UsageError
from frutebox_infra.plan import FleetPlan, plan_fleet
from frutebox_infra.report import Format
from frutebox_infra.report.data import catalog_entry, plan_data
from frutebox_infra.report.diff_data import diff_data
from frutebox_infra.report.diff_markdown import diff_markdown
from frutebox_infra.report.diff_table import diff_table
from frutebox_infra.report.markdown import plan_markdown
from frutebox_infra.report.render import CATALOG_FORMATS, CatalogView, DiffView, render
from frutebox_infra.report.table import catalog_table, plan_table
from frutebox_infra.resolver import resolve
from tests.factories import real_registry, settings


def plan(*models: str) -> FleetPlan:
    return plan_fleet(real_registry(), settings(models=list(models)), stack="test")


def catalog() -> CatalogView:
    registry = real_registry()
    return CatalogView(tuple(resolve(registry, m.id) for m in registry.models))


def test_a_plan_renders_through_its_formatters() -> None:
    p = plan("qwen3-8b", "sdxl-1.0")
    assert render(p, Format.TABLE) == plan_table(p)
    assert render(p, Format.MARKDOWN) == plan_markdown(p)
    assert json.loads(render(p, Format.JSON)) == plan_data(p)


def test_a_diff_renders_with_its_side_labels() -> None:
    view = DiffView(diff_plans(plan("qwen3-8b"), plan("qwen3-8b", "sdxl-1.0")), "main", "pr")
    labels = {"base": "main", "head": "pr"}
    assert render(view, Format.TABLE) == diff_table(view.diff, **labels)
    assert render(view, Format.MARKDOWN) == diff_markdown(view.diff, **labels)
    data = json.loads(render(view, Format.JSON))
    assert data == diff_data(view.diff, **labels)
    assert (data["base"], data["head"]) == ("main", "pr")


def test_the_catalog_renders_as_a_table_or_json_only() -> None:
    view = catalog()
    assert CATALOG_FORMATS == (Format.TABLE, Format.JSON)
    assert render(view, Format.TABLE) == catalog_table(view.resolutions)
    assert json.loads(render(view, Format.JSON)) == [catalog_entry(r) for r in view.resolutions]
    with pytest.raises(UsageError, match="catalog has no markdown form"):
        render(view, Format.MARKDOWN)
