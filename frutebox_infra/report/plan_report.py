"""The plan: a terminal table (also preview's log), Markdown for a pull request, and plain data
with stable camelCase keys (`--format json`, the stack's `plan` output)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from frutebox_infra.planner import (
    HOURS_PER_MONTH,
    Exposure,
    FleetPlan,
    ModelPlan,
    ModelWindow,
    PlacementOption,
    PodGroup,
)
from frutebox_infra.report import Renderers
from frutebox_infra.report.bringup_report import (
    bringup_lines,
    bringup_markdown,
    model_bringup_data,
    seeding_data,
)
from frutebox_infra.report.data_fields import placement_data, problem_data
from frutebox_infra.report.speed_cells import SPEED_HEADERS, speed_cells
from frutebox_infra.report.text import bullets, sequences_label, table, usd
from frutebox_infra.views.plan import PlanView

PLAN_VERSION = 1
"""Changes when a key of `plan_data` does."""

IMAGE_CELL_WIDTH = 12
PLAN_HEADERS = ("MODEL", "ENGINE", "IMAGE", "GPU", "VRAM", "FIT", "$/H", "$/H MAX", "FB")
SPEED_TABLE_HEADERS = ("MODEL", "GPU", "STREAMS", *SPEED_HEADERS, "FLOOR")


# --- table -------------------------------------------------------------------------------


def fit_cell(m: ModelPlan) -> str:
    if m.placement is None:
        return "-"
    f = m.placement.fit
    if m.shared_with:
        # What it would hold alone on the card overstates a member: the pod's fit is the
        # members' sum, shown under the table.
        return f"{f.weights_gb_per_gpu:.0f}G shared pod"
    if f.full_context_sequences is None:
        held = "coarse-fit" if f.fits else "no fit (coarse)"
    else:
        held = sequences_label(f.full_context_sequences, f.configured_sequences)
    return f"{f.weights_gb_per_gpu:.0f}G {held}"


def image_cell(m: ModelPlan, empty: str = "-") -> str:
    image = m.resolution.image
    if image is None:
        return empty
    tag = image.tag or "untagged"
    if len(tag) > IMAGE_CELL_WIDTH:
        # The version sits at the end of a long tag: keep that end.
        tag = "…" + tag[-(IMAGE_CELL_WIDTH - 1) :]
    return tag + ("" if image.pinned else " (unpinned)")


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


def speed_row(m: ModelPlan, *, empty: str = "-") -> list[str]:
    """One placed model's speed cells, in SPEED_TABLE_HEADERS order."""
    p = m.placement
    assert p is not None
    tokens = p.speed is not None
    return [
        m.model_id,
        p.label,
        str(p.serving.concurrency) if tokens else empty,
        *speed_cells(p.speed, empty),
        f"{m.min_decode_tok_s:g}" if tokens and m.min_decode_tok_s > 0 else empty,
    ]


def plan_table(view: PlanView) -> str:
    plan = view.plan
    rows = [plan_row(m) for m in plan.models]
    s = plan.settings
    v = plan.volume
    contents = "of files" if v.engines_gb else "weights"
    lines = [
        f"frutebox plan: stack {plan.stack}, {s.cloud} cloud in {s.data_center}",
        "",
        table(PLAN_HEADERS, rows) if rows else "(no models armed)",
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
        f" worst ({_month_basis(plan)} + volume)",
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
    lines += reach_lines(plan)
    lines += speed_lines(plan)
    lines += window_lines(plan)
    lines += shared_pod_lines(view)
    lines += bringup_lines(view)
    lines += _listed("warnings", plan.warnings)
    lines += _listed(
        "PROBLEMS (preview fails, nothing is created)", [str(p) for p in plan.problems]
    )
    return "\n".join(lines)


def _month_basis(plan: FleetPlan) -> str:
    if not plan.windows:
        return f"{HOURS_PER_MONTH} h"
    return (
        f"{HOURS_PER_MONTH} h, or for a model with an armed window only its armed hours plus a"
        " bring-up per opening"
    )


def _when(at: datetime | None) -> str:
    return "?" if at is None else at.strftime("%a %Y-%m-%d %H:%M %Z")


def window_state(w: ModelWindow) -> str:
    if w.armed_now is None:
        return "no time given"
    if w.armed_now:
        return f"armed now, until {_when(w.until)}"
    return f"not armed now (no pod; its weights stay on the volume), until {_when(w.until)}"


def window_lines(plan: FleetPlan) -> list[str]:
    """Per windowed model: its window, armed now or not and until when, its month."""
    if not plan.windows:
        return []
    lines = ["", "armed windows (the month counts only armed hours plus a bring-up per opening):"]
    for w in plan.windows:
        lines.append(
            f"  {w.model_id}: `{w.window}`: {window_state(w)}; {w.hours_per_month:.0f} h/month,"
            f" {w.openings_per_month:.0f} openings at {w.rearm_s / 60:.1f} GPU-min each"
        )
    return lines


REACH_WIDTH = 100
"""The reach lines are wrapped to this many characters, as the tables are."""


def reach_lines(plan: FleetPlan) -> list[str]:
    """Per placed model, who can reach its URL: the stack's key, or anyone and why."""
    placed = [(m.model_id, e) for m in plan.models if m.placement and (e := plan.exposure_of(m))]
    if not placed:
        return []
    width = max(len(model_id) for model_id, _ in placed)
    head = (
        "reach   exposure private: no port is published; each model answers only the"
        " account's own GPU pods, over global networking (the key: `pulumi stack output"
        " servingKey --show-secrets`)"
        if plan.private
        else "reach   who can use each model's URL (the key: `pulumi stack output servingKey"
        " --show-secrets`)"
    )
    return [
        "",
        *textwrap.wrap(head, width=REACH_WIDTH, subsequent_indent="        "),
        *(
            textwrap.fill(
                f"  {model_id:<{width}}  {e.text}",
                width=REACH_WIDTH,
                subsequent_indent=" " * (width + 4),
            )
            for model_id, e in placed
        ),
        *(
            ["  a gateway pod checks the pinned gateway at every start; its seeding pod places",
             "  it first (an unseeded pod fetches it: a few seconds of GPU time)"]
            if any(e.keyed for _, e in placed)
            else []
        ),
    ]


def speed_lines(plan: FleetPlan) -> list[str]:
    """The placed models' estimated speed, what it assumes, and what the floor refused."""
    placed = [m for m in plan.models if m.placement is not None]
    if not placed:
        return []
    lines = ["", table(SPEED_TABLE_HEADERS, [speed_row(m) for m in placed]), *speed_legend(plan)]
    refused = [f"{m.model_id}: {b}" for m in plan.models for b in m.below_floor]
    if refused:
        lines += ["", "below the speed floor (refused, cheaper than what was taken):"]
        lines += bullets(refused)
    return lines


def speed_legend(plan: FleetPlan) -> list[str]:
    s = plan.settings
    lengths = (
        f"requests of {s.prompt_tokens} prompt + {s.output_tokens} output tokens, prefills paid"
        if s.prompt_tokens is not None
        else "each stream holding its full context"
    )
    rank = "$ per 1M output tokens" if s.rank_by == "usdPerMillionTokens" else "$/h"
    return [
        "TOK/S = estimated decode tok/s per stream with STREAMS decoding at once (AGG: all of"
        " them),",
        f"      {lengths}; $/1M = $ per 1M output tokens at full load;",
        "      ? = no estimate; FLOOR = least TOK/S a placement must reach",
        f"      (minDecodeTokensPerSecond); those that meet it are ranked by {rank}.",
    ]


def shared_pod_lines(view: PlanView) -> list[str]:
    """Which models share which pod, its fit as the sum of its members, and the saving."""
    plan = view.plan
    if not plan.settings.colocate:
        return []
    shared = [p for p in plan.pods if p.shared]
    lines = ["", f"shared pods ({len(plan.pods)} pods for {len(plan.models)} models):"]
    for pod in shared:
        c = pod.placement
        parts = " + ".join(
            f"{mid} {f.needed_gb:.1f}" for mid, f in zip(pod.model_ids, c.member_fits, strict=True)
        )
        rule = "sum" if pod.sharing == "sum" else "largest: the engine swaps them"
        lines.append(
            f"  {view.pod_name(pod)}: {c.label},"
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


def _listed(title: str, items: Sequence[str]) -> list[str]:
    if not items:
        return []
    return ["", f"{title}:", *bullets(items)]


# --- markdown ----------------------------------------------------------------------------


def plan_markdown(view: PlanView) -> str:
    plan = view.plan
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
        f" {usd(plan.usd_per_month_worst)}/month worst"
        + (f" ({_month_basis(plan)} + volume)" if plan.windows else ""),
        f"- **Budget:** {usd(s.budget_usd_per_hour)}/h — "
        + ("within budget" if plan.within_budget else "**over budget**"),
    ]
    lines += speed_markdown(plan)
    windows = window_lines(plan)
    if windows:
        lines += ["", f"- **{windows[1].strip()}**"] + [f"  - {w.strip()}" for w in windows[2:]]
    shared = shared_pod_lines(view)
    if shared:
        lines += ["", f"- **{shared[1].strip()}**"] + [f"  - {line.strip()}" for line in shared[2:]]
    lines += bringup_markdown(view)
    if plan.warnings:
        lines += ["", "<details><summary>Warnings</summary>", ""]
        lines += [f"- {w}" for w in plan.warnings]
        lines += ["", "</details>"]
    if plan.problems:
        lines += ["", "**Problems:**", ""] + [f"- {p}" for p in plan.problems]
    return "\n".join(lines) + "\n"


def speed_markdown(plan: FleetPlan) -> list[str]:
    placed = [m for m in plan.models if m.placement is not None]
    if not placed:
        return []
    lines = [
        "",
        "| model | GPU | streams | tok/s per stream | tok/s all streams | $ per 1M output |"
        " floor |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for m in placed:
        model, *rest = speed_row(m, empty="—")
        lines.append("| " + " | ".join([f"`{model}`", *rest]) + " |")
    lines += ["", "Speed is the speed model's estimate at the configured streams and context."]
    refused = [f"`{m.model_id}`: {b}" for m in plan.models for b in m.below_floor]
    if refused:
        lines += ["", "**Below the speed floor** (refused):", ""] + [f"- {r}" for r in refused]
    return lines


# --- data --------------------------------------------------------------------------------


def fit_data(p: PlacementOption) -> dict[str, Any]:
    f = p.fit
    seqs = f.full_context_sequences
    return {
        "fits": f.fits,
        "exact": f.exact,
        "weightsGbPerGpu": round(f.weights_gb_per_gpu, 2),
        "memoryBudgetGbPerGpu": round(f.memory_budget_gb_per_gpu, 2),
        "kvBytesPerToken": f.kv_bytes_per_token,
        "kvTokens": f.kv_tokens,
        "fullContextSequences": None if seqs is None else round(seqs, 2),
        "configuredSequences": f.configured_sequences,
        "layersOnWorstGpu": f.layers_on_worst_gpu,
    }


def launch_data(p: PlacementOption) -> dict[str, Any]:
    """What the pod will run, exactly as the deploy step sends it; env by name only, since
    values may be long scripts and secrets are filled in at deploy time."""
    pod = p.pod
    return {
        "image": pod.image,
        "args": pod.args,
        "envNames": sorted({*pod.env, *pod.secret_env, *pod.serving_key_env}),
        "secretEnvNames": sorted({*pod.secret_env, *pod.serving_key_env}),
        "ports": pod.ports,
        "healthPath": pod.health_path,
        "expectedFiles": list(pod.expected_files),
    }


def exposure_data(exposure: Exposure | None) -> dict[str, Any] | None:
    """Who can reach the model: `key` (its gateway asks for the stack's key), `anyone`, or on
    a private stack without a gateway `ownPods` (the account's own pods, no key)."""
    if exposure is None:
        return None
    open_to = "ownPods" if exposure.private else "anyone"
    data: dict[str, Any] = {
        "reachableBy": "key" if exposure.keyed else open_to,
        "gateway": exposure.keyed,
        "reason": exposure.reason,
    }
    if exposure.private:
        data |= {"network": "private", "address": exposure.address, "from": "ownPods"}
    return data


def model_plan_data(
    m: ModelPlan, pod: str | None = None, plan: FleetPlan | None = None
) -> dict[str, Any]:
    """`pod`: the name of the pod serving it (members of a shared pod have the same)."""
    seeding = plan.seeding if plan is not None else None
    r = m.resolution
    serving = r.serving
    return {
        "id": m.model_id,
        "podName": pod,
        "engine": r.engine,
        "image": r.image.reference if r.image else None,
        "imagePinned": r.image.pinned if r.image else None,
        "contextTokens": serving.context_tokens if serving and serving.token_context else None,
        "placement": placement_data(m.placement) if m.placement else None,
        "fallbacks": [placement_data(p) for p in m.fallbacks],
        "fit": fit_data(m.placement) if m.placement else None,
        "launch": launch_data(m.placement) if m.placement else None,
        "exposure": exposure_data(plan.exposure_of(m) if plan is not None else r.exposure),
        "minDecodeTokensPerSecond": m.min_decode_tok_s,
        "belowFloor": [{**placement_data(b.placement), "text": str(b)} for b in m.below_floor],
        "usdPerHourBest": round(m.usd_per_hour_best, 2),
        "usdPerHourWorst": round(m.usd_per_hour_worst, 2),
        "bringup": model_bringup_data(seeding.of(m.model_id) if seeding else None),
        "problems": [problem_data(p, m.model_id) for p in m.problems],
        "warnings": list(m.warnings),
    }


def pod_data(pod: PodGroup, name: str) -> dict[str, Any]:
    """One pod (`name`: the one RunPod knows it by): its members (the anchor first), its fit
    as their sum, and what sharing saves."""
    chosen = pod.placement
    return {
        "name": name,
        "engine": pod.engine,
        "models": list(pod.model_ids),
        "shared": pod.shared,
        "gpuId": chosen.gpu.id,
        "count": chosen.count,
        "neededGbPerGpu": chosen.needed_gb,
        "availableGbPerGpu": chosen.available_gb,
        "memberNeededGbPerGpu": {
            mid: round(f.needed_gb, 2)
            for mid, f in zip(pod.model_ids, chosen.member_fits, strict=True)
        },
        "sharing": str(pod.sharing) if pod.shared and pod.sharing else None,
        "usdPerHourBest": pod.usd_per_hour_best,
        "usdPerHourWorst": pod.usd_per_hour_worst,
        "usdPerHourApart": pod.alone_usd_per_hour,
        "savingUsdPerHour": pod.saving_usd_per_hour,
    }


def window_data(w: ModelWindow) -> dict[str, Any]:
    return {
        "model": w.model_id,
        "window": w.window,
        "armedNow": w.armed_now,
        "until": w.until.isoformat() if w.until else None,
        "hoursPerMonth": round(w.hours_per_month, 1),
        "openingsPerMonth": round(w.openings_per_month, 1),
        "rearmSeconds": round(w.rearm_s),
    }


def plan_data(view: PlanView) -> dict[str, Any]:
    plan = view.plan
    s = plan.settings
    pod_names = view.pod_names
    return {
        "version": PLAN_VERSION,
        "stack": plan.stack,
        "dataCenter": s.data_center,
        "cloud": str(s.cloud),
        "exposure": s.exposure,
        "models": [model_plan_data(m, pod_names.get(m.model_id), plan) for m in plan.models],
        **({"windows": [window_data(w) for w in plan.windows]} if plan.windows else {}),
        "pods": [pod_data(p, view.pod_name(p)) for p in plan.pods],
        "volume": {
            "sizeGb": plan.volume.size_gb,
            "weightsGb": plan.volume.weights_gb,
            "engineInstallsGb": plan.volume.engines_gb,
            "usdPerMonth": plan.volume.usd_per_month,
            "dataCenter": plan.volume.data_center,
            "type": plan.volume.tier,
        },
        "cost": {
            "usdPerHourBest": plan.usd_per_hour_best,
            "usdPerHourWorst": plan.usd_per_hour_worst,
            "usdPerMonthBest": plan.usd_per_month_best,
            "usdPerMonthWorst": plan.usd_per_month_worst,
            "colocationSavingUsdPerHour": plan.colocation_saving_usd_per_hour,
        },
        "budget": {
            "maxUsdPerHour": s.budget_usd_per_hour,
            "withinBudget": plan.within_budget,
            "headroomUsdPerHour": plan.budget_headroom_usd_per_hour,
        },
        "speed": {
            "minDecodeTokensPerSecond": s.min_decode_tok_s,
            "rankBy": s.rank_by,
            "promptTokens": s.prompt_tokens,
            "outputTokens": s.output_tokens,
        },
        "seeding": seeding_data(view),
        "problems": [problem_data(p) for p in plan.problems],
        "warnings": list(plan.warnings),
    }


PLAN = Renderers[PlanView](
    name="the plan",
    table=plan_table,
    data=plan_data,
    markdown=plan_markdown,
)
