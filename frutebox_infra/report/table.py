"""The plan and the catalog as text a person reads in a terminal or a preview log."""

from __future__ import annotations

from collections.abc import Sequence

from frutebox_infra.deploy_requests import pod_name
from frutebox_infra.plan import HOURS_PER_MONTH, FleetPlan, ModelPlan
from frutebox_infra.report.text import bullets, table, usd
from frutebox_infra.resolver import Resolution


def fit_cell(m: ModelPlan) -> str:
    if m.placement is None:
        return "-"
    f = m.placement.fit
    if m.shared_with:
        # What it would hold alone on the card overstates a member: the pod's fit is the
        # members' sum, shown under the table.
        return f"{f.weights_gb_per_gpu:.0f}G shared pod"
    return f"{f.weights_gb_per_gpu:.0f}G {f.summary}"


IMAGE_CELL_WIDTH = 12


def image_cell(m: ModelPlan, empty: str = "-") -> str:
    image = m.resolution.image
    if image is None:
        return empty
    tag = image.tag or "untagged"
    if len(tag) > IMAGE_CELL_WIDTH:
        # The version sits at the end of a long tag: keep that end.
        tag = "…" + tag[-(IMAGE_CELL_WIDTH - 1) :]
    return tag + ("" if image.pinned else " (unpinned)")


PLAN_HEADERS = ("MODEL", "ENGINE", "IMAGE", "GPU", "VRAM", "FIT", "$/H", "$/H MAX", "FB")


def plan_row(m: ModelPlan, *, empty: str = "-") -> list[str]:
    """One model's cells, in PLAN_HEADERS order; `empty` fills what an unplaced model lacks."""
    p = m.placement
    if p is None:
        return [m.model_id, m.resolution.engine or empty, image_cell(m, empty)] + [empty] * 6
    return [
        m.model_id,
        m.resolution.engine or empty,
        image_cell(m),
        p.label,
        f"{p.total_vram_gb}G",
        fit_cell(m),
        usd(m.usd_per_hour_best),
        usd(m.usd_per_hour_worst),
        str(len(m.fallbacks)),
    ]


def plan_table(plan: FleetPlan) -> str:
    rows = [plan_row(m) for m in plan.models]
    headers = list(PLAN_HEADERS)
    s = plan.settings
    v = plan.volume
    contents = "of files" if v.engines_gb else "weights"
    lines = [
        f"frutebox plan: stack {plan.stack}, {s.cloud} cloud in {s.data_center}",
        "",
        table(headers, rows) if rows else "(no models armed)",
        "",
        f"volume  {v.size_gb} GB {v.tier} ({v.contents_gb:g} GB {contents}"
        f" + {s.volume_headroom:.0%} headroom; grows, never shrinks): {usd(v.usd_per_month)}/month",
        *(
            [f"        ({v.weights_gb:g} GB weights, {v.engines_gb:g} GB engine installs)"]
            if v.engines_gb
            else []
        ),
        f"pods    {usd(plan.usd_per_hour_best)}/h best, {usd(plan.usd_per_hour_worst)}/h worst"
        f" (fallbacks up to {s.max_fallback_premium:g}x the cheapest)",
        f"fleet   {usd(plan.usd_per_month_best)}/month best, {usd(plan.usd_per_month_worst)}/month"
        f" worst ({HOURS_PER_MONTH} h + volume)",
        f"budget  {usd(s.budget_usd_per_hour)}/h: "
        + (
            f"within, {usd(plan.budget_headroom_usd_per_hour)}/h headroom"
            if plan.within_budget
            else f"OVER by {usd(-plan.budget_headroom_usd_per_hour)}/h"
        ),
        "FIT = weights per GPU (GB; llama.cpp: the GPU holding the most layers), then",
        "      full-context sequences held / configured; coarse-fit = architecture unknown,",
        "      so only weights per GPU x 1.15 is checked against the engine's memory cap.",
    ]
    lines += shared_pod_lines(plan)
    lines += _listed("warnings", plan.warnings)
    lines += _listed(
        "PROBLEMS (preview fails, nothing is created)", [str(p) for p in plan.problems]
    )
    return "\n".join(lines)


def shared_pod_lines(plan: FleetPlan) -> list[str]:
    """Which models share which pod, its fit as the sum of its members, and the saving."""
    shared = [p for p in plan.pods if p.shared]
    if not plan.settings.colocate:
        return []
    lines = ["", f"shared pods ({len(plan.pods)} pods for {len(plan.models)} models):"]
    for pod in shared:
        c = pod.placement
        parts = " + ".join(
            f"{mid} {f.needed_gb:.1f}" for mid, f in zip(pod.model_ids, c.member_fits, strict=True)
        )
        rule = "sum" if pod.sharing == "sum" else "largest: the engine swaps them"
        lines.append(
            f"  {pod_name(plan.stack, pod.anchor)}: {c.label},"
            f" {usd(pod.usd_per_hour_best)}/h vs {usd(pod.alone_usd_per_hour)}/h apart"
        )
        lines.append(
            f"    fit {c.needed_gb:.1f} of {c.available_gb:.1f} GB per GPU ({rule}: {parts})"
        )
    if not shared:
        lines.append("  none: no group of compatible models is cheaper than a pod each")
    lines.append(
        f"  co-location saves {usd(plan.colocation_saving_usd_per_hour)}/h against one pod per"
        " model;"
    )
    lines.append("  a member's $/H is its share of its pod's, in proportion to the memory it needs")
    return lines


def catalog_table(resolutions: Sequence[Resolution]) -> str:
    rows = []
    for r in resolutions:
        p = r.placements[0] if r.placements else None
        rows.append(
            [
                r.model_id,
                r.engine or "-",
                p.label if p else "-",
                usd(p.usd_per_hour) if p else "-",
                str(len(r.placements)),
                "servable" if r.servable else (r.problem.rule if r.problem else "no placement"),
            ]
        )
    headers = ["MODEL", "ENGINE", "CHEAPEST", "$/H", "N", "STATUS"]
    servable = sum(r.servable for r in resolutions)
    lines = [table(headers, rows), "", f"{servable} of {len(resolutions)} models servable."]
    blocked = [r for r in resolutions if r.problem is not None]
    if blocked:
        lines += ["", "Why not, and the fix:"]
        lines += bullets([str(r.problem) for r in blocked])
    return "\n".join(lines)


def _listed(title: str, items: Sequence[str]) -> list[str]:
    if not items:
        return []
    return ["", f"{title}:", *bullets(items)]
