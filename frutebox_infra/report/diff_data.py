"""A config change's cost/fit difference as plain data with stable camelCase keys (JSON)."""

from __future__ import annotations

from typing import Any

from frutebox_infra.diff import Amount, FleetDiff, ModelChange, ModelSnapshot
from frutebox_infra.report.data import problem_data

DIFF_SCHEMA_VERSION = 1

SNAPSHOT_KEYS = {
    "engine": "engine",
    "image": "image",
    "gpu": "gpuType",
    "gpu_count": "gpuCount",
    "usd_per_hour_best": "usdPerHourBest",
    "usd_per_hour_worst": "usdPerHourWorst",
    "fallbacks": "fallbacks",
    "context_tokens": "contextTokens",
    "full_context_sequences": "fullContextSequences",
    "configured_sequences": "configuredSequences",
    "problems": "problems",
}
"""Snapshot field -> JSON key; `changedFields` uses the same keys."""


def amount_data(a: Amount) -> dict[str, float]:
    return {"before": a.before, "after": a.after, "delta": a.delta}


def snapshot_data(s: ModelSnapshot | None) -> dict[str, Any] | None:
    if s is None:
        return None
    out = {key: getattr(s, name) for name, key in SNAPSHOT_KEYS.items()}
    out["problems"] = list(s.problems)
    return out


def model_change_data(m: ModelChange) -> dict[str, Any]:
    return {
        "id": m.model_id,
        "change": str(m.change),
        "changedFields": [SNAPSHOT_KEYS[f] for f in m.changed_fields],
        "before": snapshot_data(m.before),
        "after": snapshot_data(m.after),
        "usdPerHourBest": amount_data(m.usd_per_hour_best),
        "usdPerHourWorst": amount_data(m.usd_per_hour_worst),
    }


def diff_data(d: FleetDiff, *, base: str, head: str) -> dict[str, Any]:
    size = d.volume_size_gb
    return {
        "version": DIFF_SCHEMA_VERSION,
        "stack": d.stack,
        "base": base,
        "head": head,
        "baseExists": d.base_exists,
        "headExists": d.head_exists,
        "ok": d.ok,
        "models": [model_change_data(m) for m in d.changes],
        "unchanged": list(d.unchanged),
        "cost": {
            "usdPerHourBest": amount_data(d.usd_per_hour_best),
            "usdPerHourWorst": amount_data(d.usd_per_hour_worst),
            "usdPerMonthBest": amount_data(d.usd_per_month_best),
            "usdPerMonthWorst": amount_data(d.usd_per_month_worst),
        },
        "volume": {
            "sizeGb": {
                "before": int(size.before),
                "after": int(size.after),
                "delta": int(size.delta),
            },
            "usdPerMonth": amount_data(d.volume_usd_per_month),
            "shrinkIgnored": d.volume_shrink_ignored,
        },
        "budget": {
            "maxUsdPerHour": amount_data(d.budget_usd_per_hour),
            "withinBudget": d.within_budget,
            "headroomUsdPerHour": d.budget_headroom_usd_per_hour,
        },
        "problems": [problem_data(p) for p in d.problems],
        "warnings": list(d.warnings),
    }
