"""The catalog (`frutebox models`): a table within 100 columns that explains every blocked
model, and versioned JSON with every registry model, keys pinned."""

from __future__ import annotations

import json
from typing import Any

import pytest

from frutebox_infra.recipes import ServeOptions
from frutebox_infra.report.catalog_report import (
    CATALOG_VERSION,
    CatalogView,
    catalog_data,
    catalog_table,
)
from frutebox_infra.resolver import resolve
from tests.factories import real_registry

ISSUE_CATALOG = {"id", "engine", "servable", "problem", "cheapest", "placements"}
CATALOG_KEYS = ISSUE_CATALOG | {"name", "capability", "problemRule", "warnings"}
PLACEMENT_KEYS = {"gpuId", "gpuType", "count", "vramGb", "usdPerHour"}


def view(token: bool = False) -> CatalogView:
    reg = real_registry()
    options = ServeOptions(hf_token_configured=token)
    return CatalogView(tuple(resolve(reg, m.id, options) for m in reg.models))


def catalog(token: bool = False) -> dict[str, Any]:
    """`models --format json` as a client reads it (strict JSON: no NaN or Infinity)."""
    return json.loads(json.dumps(catalog_data(view(token)), allow_nan=False))  # type: ignore[no-any-return]


# --- table -------------------------------------------------------------------------------


def test_the_table_counts_servable_models_and_names_each() -> None:
    v = view()
    text = catalog_table(v)
    servable = sum(r.servable for r in v.resolutions)
    assert 0 < servable < len(v.resolutions)
    assert f"{servable} of {len(v.resolutions)} models servable" in text
    for r in v.resolutions:
        assert r.model_id in text


def test_the_table_explains_every_blocked_model_in_full_within_100_columns() -> None:
    v = view()
    text = catalog_table(v)
    assert all(len(line) <= 100 for line in text.splitlines())
    unwrapped = " ".join(
        line.strip() for line in text.split("Why not, and the fix:")[1].splitlines()
    )
    blocked = [r for r in v.resolutions if r.problem is not None]
    assert blocked
    for r in blocked:
        assert r.problem is not None
        assert r.problem.rule in text and r.problem.fix in unwrapped


def test_a_catalog_with_nothing_blocked_has_no_why_not_section() -> None:
    servable = CatalogView(tuple(r for r in view().resolutions if r.problem is None))
    text = catalog_table(servable)
    n = len(servable.resolutions)
    assert f"{n} of {n} models servable." in text and "Why not" not in text


# --- data --------------------------------------------------------------------------------


def test_the_json_is_versioned_and_its_keys_are_pinned() -> None:
    data = catalog()
    assert list(data) == ["version", "models"]
    assert data["version"] == CATALOG_VERSION == 1
    for entry in data["models"]:
        assert entry.keys() >= ISSUE_CATALOG
        assert set(entry) == CATALOG_KEYS
        if entry["cheapest"] is not None:
            assert set(entry["cheapest"]) == PLACEMENT_KEYS
            assert entry["cheapest"] == entry["placements"][0]
        for p in entry["placements"]:
            assert set(p) == PLACEMENT_KEYS


def test_the_json_lists_every_registry_model_in_order() -> None:
    assert [e["id"] for e in catalog()["models"]] == [m.id for m in real_registry().models]


@pytest.mark.parametrize(
    "token", [pytest.param(False, id="no-token"), pytest.param(True, id="token")]
)
def test_each_unservable_model_says_the_rule_and_the_fix(token: bool) -> None:
    entries = catalog(token)["models"]
    assert any(e["servable"] for e in entries) and not all(e["servable"] for e in entries)
    for entry in entries:
        if entry["servable"]:
            assert entry["problem"] is None and entry["cheapest"] is not None
            assert entry["engine"]
        else:
            assert entry["cheapest"] is None and entry["placements"] == []
            assert entry["problemRule"] and f"[{entry['problemRule']}]" in entry["problem"]
            assert "Fix:" in entry["problem"]


def test_the_catalog_says_why_the_known_gaps_are_gaps() -> None:
    by_id = {e["id"]: e for e in catalog()["models"]}
    assert by_id["stable-audio-open-1.0"]["problemRule"] == "gated-no-token"
    assert by_id["flux.1-schnell"]["problemRule"] == "no-recipe"
    assert by_id["glm-5.2"]["problemRule"] == "no-recipe"
    assert by_id["llama-3.2-1b"]["servable"] is True
