"""The catalog (`frutebox models`): a table within 100 columns that explains every blocked
model, and versioned JSON with every registry model, keys pinned."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from frutebox_infra.planner.resolver import resolve
from frutebox_infra.recipes import ServeOptions
from frutebox_infra.report.catalog_report import CATALOG_VERSION, catalog_data, catalog_table
from frutebox_infra.views.catalog import CatalogView, catalog_view
from tests.factories import real_registry
from tests.report.test_data_fields import SPEED_KEYS

ISSUE_CATALOG = {"id", "engine", "servable", "problem", "cheapest", "placements"}
CATALOG_KEYS = ISSUE_CATALOG | {
    "name", "capability", "problemRule", "warnings", "cheapestAtFloor",
}  # fmt: skip
PLACEMENT_KEYS = {"gpuId", "gpuType", "count", "vramGb", "usdPerHour", "speed"}


def view(token: bool = False, floor: float = 20.0) -> CatalogView:
    """The catalog as `frutebox models` builds it, at the stack default floor."""
    reg = real_registry()
    options = ServeOptions(hf_token_configured=token)
    resolutions = tuple(resolve(reg, m.id, options) for m in reg.models)
    return catalog_view(resolutions, floor)


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
    servable = CatalogView(resolutions=tuple(r for r in view().resolutions if r.problem is None))
    text = catalog_table(servable)
    n = len(servable.resolutions)
    assert f"{n} of {n} models servable." in text and "Why not" not in text


# --- data --------------------------------------------------------------------------------


def test_the_json_is_versioned_and_its_keys_are_pinned() -> None:
    data = catalog()
    assert list(data) == ["version", "minDecodeTokensPerSecond", "models"]
    assert data["version"] == CATALOG_VERSION == 1
    for entry in data["models"]:
        assert entry.keys() >= ISSUE_CATALOG
        assert set(entry) == CATALOG_KEYS
        if entry["cheapest"] is not None:
            assert set(entry["cheapest"]) == PLACEMENT_KEYS
            assert entry["cheapest"] == entry["placements"][0]
        if entry["cheapestAtFloor"] is not None:
            assert set(entry["cheapestAtFloor"]) == PLACEMENT_KEYS
        for p in entry["placements"]:
            assert set(p) == PLACEMENT_KEYS
            assert p["speed"] is None or set(p["speed"]) == SPEED_KEYS


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


# --- the floor -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("floor", "model", "taken"),
    [
        # qwen3-235b-a22b: 4x RTX PRO 6000 decodes 18.5 tok/s per stream at 16, 2x H200 26.8.
        pytest.param(0.0, "qwen3-235b-a22b", "4x RTX PRO 6000", id="no-floor-cheapest"),
        pytest.param(18.4, "qwen3-235b-a22b", "4x RTX PRO 6000", id="just-under-its-speed"),
        pytest.param(18.6, "qwen3-235b-a22b", "2x H200 SXM", id="just-over-its-speed"),
        pytest.param(20.0, "sdxl-1.0", "1x RTX A4000", id="diffusion-has-no-floor"),
    ],
)
def test_the_cheapest_shown_is_the_cheapest_that_meets_the_floor(
    floor: float, model: str, taken: str
) -> None:
    entry = next(e for e in catalog_data(view(floor=floor))["models"] if e["id"] == model)
    at_floor = entry["cheapestAtFloor"]
    assert f"{at_floor['count']}x {at_floor['gpuType']}" == taken
    assert entry["cheapest"] == entry["placements"][0]
    row = next(line for line in catalog_table(view(floor=floor)).splitlines()
               if line.startswith(model + " "))  # fmt: skip
    assert taken in row


def test_a_model_no_placement_of_which_meets_the_floor_is_not_servable_and_says_why() -> None:
    entry = next(e for e in catalog_data(view(floor=200))["models"] if e["id"] == "kimi-k2.6")
    assert entry["servable"] is False and entry["cheapestAtFloor"] is None
    assert entry["problemRule"] == "below-speed-floor"
    assert "8x A100 PCIe: 13.4 tok/s per stream at 8 streams < 200" in entry["problem"]
    assert "frutebox-infra:minDecodeTokensPerSecond" in entry["problem"]


def test_the_table_shows_the_speed_of_the_placement_it_names() -> None:
    v = view()
    cells = (re.split(r"\s{2,}", line) for line in catalog_table(v).splitlines()[2:] if line)
    rows = {c[0]: c for c in cells}
    r = next(r for r in v.resolutions if r.model_id == "qwen-3.6-27b")
    p = v.cheapest(r)
    assert p is not None
    speed = p.speed
    assert speed is not None and hasattr(speed, "decode_tok_s_per_stream")
    assert f"{speed.decode_tok_s_per_stream:.1f}" in rows["qwen-3.6-27b"]
    assert f"${speed.usd_per_million_output_tokens:.2f}" in rows["qwen-3.6-27b"]
    assert rows["mistral-large-3"][4:7] == ["?", "?", "?"]  # no hidden_size: no estimate
    assert rows["sdxl-1.0"][4:7] == ["-", "-", "-"]  # a diffusion model decodes no tokens
