"""A placement's speed as table cells: tok/s per stream, aggregate tok/s, $ per 1M output."""

from __future__ import annotations

from frutebox_infra.planner import Speed, SpeedEstimate

SPEED_HEADERS = ("TOK/S", "AGG", "$/1M")
UNKNOWN = "?"
"""An estimate a fact is missing for (the plan's warnings or `--format json` say which)."""


def speed_cells(speed: Speed, empty: str = "-") -> list[str]:
    """The three cells, in SPEED_HEADERS order; `empty` where no tokens are decoded."""
    if speed is None:
        return [empty] * 3
    if not isinstance(speed, SpeedEstimate):
        return [UNKNOWN] * 3
    usd = speed.usd_per_million_output_tokens
    return [
        per_stream_text(speed),
        f"{speed.decode_tok_s_aggregate:.0f}",
        UNKNOWN if usd is None else f"${usd:,.2f}",
    ]


def per_stream_text(speed: SpeedEstimate) -> str:
    return f"{speed.decode_tok_s_per_stream:.1f}"
