"""Plain-data pieces more than one view's JSON shares: a placement, its speed and a problem."""

from __future__ import annotations

from typing import Any

from frutebox_infra.planner import PlacementOption, PlanProblem, Speed, SpeedUnknown


def placement_data(p: PlacementOption) -> dict[str, Any]:
    return {
        "gpuId": p.gpu.id,
        "gpuType": p.gpu.name,
        "count": p.count,
        "vramGb": p.total_vram_gb,
        "usdPerHour": p.usd_per_hour,
        "speed": speed_data(p.speed, p.serving.concurrency),
    }


def speed_data(speed: Speed, streams: int) -> dict[str, Any] | None:
    """The estimate at `streams` streams; None for a model that decodes no tokens, and the
    reason (figures null) where a fact is missing."""
    if speed is None:
        return None
    if isinstance(speed, SpeedUnknown):
        return {
            "estimated": False,
            "unknownReason": speed.reason,
            "streams": streams,
            "decodeTokensPerSecondPerStream": None,
            "decodeTokensPerSecondAggregate": None,
            "prefillTokensPerSecond": None,
            "usdPerMillionOutputTokens": None,
            "bound": None,
            "assumptions": [],
        }
    usd = speed.usd_per_million_output_tokens
    return {
        "estimated": True,
        "unknownReason": None,
        "streams": streams,
        "decodeTokensPerSecondPerStream": round(speed.decode_tok_s_per_stream, 1),
        "decodeTokensPerSecondAggregate": round(speed.decode_tok_s_aggregate, 1),
        "prefillTokensPerSecond": round(speed.prefill_tok_s, 1),
        "usdPerMillionOutputTokens": None if usd is None else round(usd, 2),
        "bound": speed.bound,
        "assumptions": list(speed.assumptions),
    }


def problem_data(p: PlanProblem, model: str | None = None) -> dict[str, Any]:
    return {"model": model, "rule": p.rule, "message": p.message, "fix": p.fix, "text": str(p)}
