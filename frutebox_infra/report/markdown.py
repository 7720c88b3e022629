"""The plan as Markdown, for a pull-request comment."""

from __future__ import annotations

from frutebox_infra.plan import FleetPlan
from frutebox_infra.report.table import plan_row, shared_pod_lines
from frutebox_infra.report.text import usd


def plan_markdown(plan: FleetPlan) -> str:
    s = plan.settings
    verdict = "✅ ready to deploy" if plan.ok else "❌ preview fails"
    lines = [
        f"### frutebox plan: `{plan.stack}` — {verdict}",
        "",
        "| model | engine | image | GPU | VRAM | fit | $/h | $/h max | fallbacks |",
        "|---|---|---|---|---|---|---:|---:|---:|",
    ]
    for m in plan.models:
        model, *rest = plan_row(m, empty="—")
        lines.append("| " + " | ".join([f"`{model}`", *rest]) + " |")
    v = plan.volume
    lines += [
        "",
        f"- **Volume:** {v.size_gb} GB in {s.data_center}, {usd(v.usd_per_month)}/month",
        f"- **Pods:** {usd(plan.usd_per_hour_best)}/h best, {usd(plan.usd_per_hour_worst)}/h worst",
        f"- **Fleet:** {usd(plan.usd_per_month_best)}/month best,"
        f" {usd(plan.usd_per_month_worst)}/month worst",
        f"- **Budget:** {usd(s.budget_usd_per_hour)}/h — "
        + ("within budget" if plan.within_budget else "**over budget**"),
    ]
    shared = shared_pod_lines(plan)
    if shared:
        lines += ["", f"- **{shared[1].strip()}**"] + [f"  - {line.strip()}" for line in shared[2:]]
    if plan.warnings:
        lines += ["", "<details><summary>Warnings</summary>", ""]
        lines += [f"- {w}" for w in plan.warnings]
        lines += ["", "</details>"]
    if plan.problems:
        lines += ["", "**Problems:**", ""] + [f"- {p}" for p in plan.problems]
    return "\n".join(lines) + "\n"
