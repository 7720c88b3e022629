"""A placement's speed as three table cells, and what stands in when there is no figure."""

from __future__ import annotations

import pytest

from frutebox_infra.estimates.speed import SpeedEstimate, SpeedUnknown
from frutebox_infra.planner.placement_speed import Speed
from frutebox_infra.report.speed_cells import SPEED_HEADERS, UNKNOWN, speed_cells


def estimate(per_stream: float, aggregate: float, usd: float | None) -> SpeedEstimate:
    return SpeedEstimate(
        decode_tok_s_per_stream=per_stream,
        decode_tok_s_aggregate=aggregate,
        prefill_tok_s=5_000.0,
        decode_step_ms=40.0,
        bound="memory",
        usd_per_million_output_tokens=usd,
    )


@pytest.mark.parametrize(
    ("speed", "cells"),
    [
        pytest.param(estimate(26.84, 429.4, 5.949), ["26.8", "429", "$5.95"], id="estimate"),
        pytest.param(estimate(9.0, 1_234.6, 1_234.5), ["9.0", "1235", "$1,234.50"], id="thousands"),
        pytest.param(estimate(30.0, 30.0, None), ["30.0", "30", UNKNOWN], id="no-price"),
        pytest.param(SpeedUnknown(reason="no parameter count"), [UNKNOWN] * 3, id="unknown"),
        pytest.param(None, ["-"] * 3, id="no-tokens"),
    ],
)
def test_cells_follow_the_headers(speed: Speed, cells: list[str]) -> None:
    assert speed_cells(speed) == cells
    assert len(cells) == len(SPEED_HEADERS)


def test_a_view_chooses_what_stands_for_no_tokens() -> None:
    assert speed_cells(None, empty="") == ["", "", ""]
    assert speed_cells(estimate(1.0, 1.0, 1.0), empty="") == ["1.0", "1", "$1.00"]
