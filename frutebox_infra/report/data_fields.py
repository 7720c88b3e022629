"""Plain-data pieces more than one view's JSON shares: a placement and a problem."""

from __future__ import annotations

from typing import Any

from frutebox_infra.ranking import PlacementOption
from frutebox_infra.resolver import PlanProblem


def placement_data(p: PlacementOption) -> dict[str, Any]:
    return {
        "gpuId": p.gpu.id,
        "gpuType": p.gpu.name,
        "count": p.count,
        "vramGb": p.total_vram_gb,
        "usdPerHour": p.usd_per_hour,
    }


def problem_data(p: PlanProblem, model: str | None = None) -> dict[str, Any]:
    return {"model": model, "rule": p.rule, "message": p.message, "fix": p.fix, "text": str(p)}
