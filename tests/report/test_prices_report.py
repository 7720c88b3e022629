"""The price comparison as a table (drift beyond the tolerance flagged, the bound on both sides)
and as versioned JSON with pinned keys."""

from __future__ import annotations

import json

import pytest

from frutebox_infra.report.prices_report import PRICES_VERSION, prices_data, prices_table
from frutebox_infra.views.live_warnings import PRICE_TOLERANCE
from frutebox_infra.views.price_compare import PriceComparison, PriceRow

ROWS = (
    PriceRow("a4000", "NVIDIA RTX A4000", 0.17, 0.21),
    PriceRow("h200", "NVIDIA H200", 3.59, None),
)


def test_the_table_shows_both_prices_and_the_drift() -> None:
    lines = prices_table(PriceComparison(ROWS)).splitlines()
    assert lines[0].split() == ["GPU", "REGISTRY", "$/H", "LIVE", "SECURE", "$/H", "DIFF"]
    assert lines[2].split() == ["NVIDIA", "RTX", "A4000", "$0.17", "$0.21", "+23.5%", "over", "5%"]
    assert lines[3].split() == ["NVIDIA", "H200", "$3.59", "-", "-"]


@pytest.mark.parametrize(
    ("live_usd", "flagged"),
    [
        pytest.param(21.0, False, id="at-the-tolerance"),
        pytest.param(21.01, True, id="beyond-it"),
        pytest.param(19.0, False, id="at-it-cheaper"),
        pytest.param(18.99, True, id="beyond-it-cheaper"),
    ],
)
def test_only_drift_beyond_the_tolerance_is_flagged(live_usd: float, flagged: bool) -> None:
    view = PriceComparison((PriceRow("g", "G", 20.0, live_usd),))
    assert prices_table(view).splitlines()[2].endswith("over 5%") is flagged
    assert prices_data(view)["gpus"][0]["beyondTolerance"] is flagged


def test_the_json_is_versioned_and_its_keys_are_pinned() -> None:
    data = json.loads(json.dumps(prices_data(PriceComparison(ROWS)), allow_nan=False))
    assert list(data) == ["version", "toleranceRatio", "gpus"]
    assert data["version"] == PRICES_VERSION == 1 and data["toleranceRatio"] == PRICE_TOLERANCE
    assert [list(g) for g in data["gpus"]] == [[
        "id", "name", "registryUsdPerHour", "liveSecureUsdPerHour", "driftRatio",
        "beyondTolerance", "differs",
    ]] * 2  # fmt: skip
    dearer, absent = data["gpus"]
    assert (dearer["id"], dearer["liveSecureUsdPerHour"], dearer["driftRatio"]) == (
        "a4000", 0.21, 0.2353,
    )  # fmt: skip
    assert dearer["differs"] is True and dearer["beyondTolerance"] is True
    assert absent["liveSecureUsdPerHour"] is None and absent["driftRatio"] is None
    assert absent["differs"] is False and absent["beyondTolerance"] is False
