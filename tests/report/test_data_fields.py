"""The JSON pieces several views share: a placement and a problem, keys pinned."""

from __future__ import annotations

import pytest

from frutebox_infra.estimates.speed import SpeedEstimate, SpeedUnknown
from frutebox_infra.planner.resolver import resolve
from frutebox_infra.report.data_fields import placement_data, problem_data, speed_data
from tests.factories import real_registry

SPEED_KEYS = {
    "estimated",
    "unknownReason",
    "streams",
    "decodeTokensPerSecondPerStream",
    "decodeTokensPerSecondAggregate",
    "prefillTokensPerSecond",
    "usdPerMillionOutputTokens",
    "bound",
    "assumptions",
}


def test_a_placement_names_gpu_count_vram_price_and_speed() -> None:
    resolution = resolve(real_registry(), "qwen3-8b")
    p = resolution.placements[0]
    speed = p.speed
    assert isinstance(speed, SpeedEstimate)
    assert placement_data(p) == {
        "gpuId": p.gpu.id,
        "gpuType": p.gpu.name,
        "count": p.count,
        "vramGb": p.gpu.vram_gb * p.count,
        "usdPerHour": p.usd_per_hour,
        "speed": speed_data(speed, p.serving.concurrency),
    }


def test_a_speed_estimate_is_rounded_as_shown() -> None:
    p = resolve(real_registry(), "qwen3-235b-a22b").placements[0]
    speed = p.speed
    assert isinstance(speed, SpeedEstimate) and speed.usd_per_million_output_tokens
    data = speed_data(speed, 16)
    assert data is not None and set(data) == SPEED_KEYS
    assert data["estimated"] is True and data["unknownReason"] is None and data["streams"] == 16
    assert data["decodeTokensPerSecondPerStream"] == round(speed.decode_tok_s_per_stream, 1)
    assert data["decodeTokensPerSecondAggregate"] == round(speed.decode_tok_s_aggregate, 1)
    assert data["usdPerMillionOutputTokens"] == round(speed.usd_per_million_output_tokens, 2)
    assert data["bound"] in ("memory", "compute")


@pytest.mark.parametrize(
    ("speed", "expected"),
    [
        pytest.param(None, None, id="no-tokens"),
        pytest.param(
            SpeedUnknown(reason="registry/models.yaml lacks x's architecture.hidden_size"),
            {"estimated": False, "decodeTokensPerSecondPerStream": None,
             "usdPerMillionOutputTokens": None},
            id="a-fact-missing",
        ),
    ],
)
def test_no_estimate_is_null_with_its_reason(
    speed: SpeedUnknown | None, expected: dict[str, object] | None
) -> None:
    data = speed_data(speed, 4)
    if expected is None:
        assert data is None
        return
    assert data is not None and set(data) == SPEED_KEYS
    assert data.items() >= expected.items()
    assert isinstance(speed, SpeedUnknown) and data["unknownReason"] == speed.reason


def test_a_problem_names_its_model_rule_and_fix() -> None:
    problem = resolve(real_registry(), "ghost").problem
    assert problem is not None
    data = problem_data(problem, "ghost")
    assert list(data) == ["model", "rule", "message", "fix", "text"]
    assert data["model"] == "ghost" and data["rule"] == "unknown-model"
    assert data["fix"] and data["text"] == str(problem) and "Fix:" in data["text"]
    assert problem_data(problem)["model"] is None
