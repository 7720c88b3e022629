"""Bring-up in the plan's views: per model the seed time and cost and the GPU time billed before
it serves, and the stack's first deploy; as table lines, Markdown lines and data."""

from __future__ import annotations

from typing import Any

from frutebox_infra.planner import ModelSeeding, Seeding
from frutebox_infra.report.text import table, usd
from frutebox_infra.views.plan import PlanView

HEADERS = ("MODEL", "WEIGHTS", "SEED", "SEED $", "GPU BEFORE SERVING", "GPU $", "NO SEEDING")


def duration(seconds: float) -> str:
    """Seconds as a person reads them: 45s, 7m12s, 2h05m."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def money(value: float) -> str:
    """USD to the cent; a non-zero amount below half a cent is not shown as free."""
    return "<$0.01" if 0 < value < 0.005 else usd(value)


def assumptions(view: PlanView) -> str:
    a = view.bringup_assumptions
    return (
        f"GPU start {a.gpu_start_s} s, CPU start {a.cpu_start_s} s, download"
        f" {a.download_mb_per_s} MB/s, {a.volume_type} volume read {a.volume_read_mb_per_s:g} MB/s"
    )


def _row(m: ModelSeeding, seeding: Seeding) -> list[str]:
    b = m.bringup
    cpu = seeding.cpu
    seed = f"{duration(b.seed_s)} {cpu.flavor.id}" if m.seeded and cpu else "-"
    return [
        m.model_id,
        f"{b.weights_gb:g} GB",
        seed,
        money(b.seed_usd) if m.seeded else "-",
        duration(b.gpu_before_serving_s),
        money(b.gpu_before_serving_usd),
        money(b.gpu_without_seeding_usd),
    ]


def bringup_lines(view: PlanView) -> list[str]:
    """The table's bring-up section: what a first deploy costs before every model serves."""
    seeding = view.plan.seeding
    if seeding is None or not seeding.models:
        return []
    rows = [_row(m, seeding) for m in seeding.models]
    lines = ["", f"bring-up, first deploy ({assumptions(view)}):", table(HEADERS, rows)]
    lines.append(first_deploy_line(seeding))
    lines += [f"  {m.model_id}: not seeded: {m.why_not}" for m in seeding.models if m.why_not]
    return lines


def first_deploy_line(seeding: Seeding) -> str:
    d = seeding.first_deploy
    if not any(m.seeded for m in seeding.models):
        return f"first deploy: GPU {usd(d.gpu_before_serving_usd)} before every model serves"
    cpu = seeding.cpu
    flavor = f" ({cpu.flavor.id}, {cpu.vcpus} vCPUs, {usd(cpu.usd_per_hour)}/h)" if cpu else ""
    return (
        f"first deploy: seeding {money(d.seed_usd)}{flavor} + GPU"
        f" {money(d.gpu_before_serving_usd)} before serving = {money(d.total_usd)};"
        f" GPU {money(d.gpu_without_seeding_usd)} without seeding ({d.gpu_saved_fraction:.0%} less)"
    )


def bringup_markdown(view: PlanView) -> list[str]:
    seeding = view.plan.seeding
    if seeding is None or not seeding.models:
        return []
    lines = [
        "",
        f"**Bring-up, first deploy** ({assumptions(view)}):",
        "",
        "| model | weights | seed | seed $ | GPU before serving | GPU $ | no seeding |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for m in seeding.models:
        model, *rest = _row(m, seeding)
        lines.append("| " + " | ".join([f"`{model}`", *rest]) + " |")
    lines += ["", f"- **{first_deploy_line(seeding)}**"]
    lines += [f"- `{m.model_id}` not seeded: {m.why_not}" for m in seeding.models if m.why_not]
    return lines


def model_bringup_data(m: ModelSeeding | None) -> dict[str, Any] | None:
    if m is None:
        return None
    b = m.bringup
    return {
        "seeded": m.seeded,
        "notSeededReason": m.why_not,
        "weightsGb": round(b.weights_gb, 2),
        "seedSeconds": round(b.seed_s),
        "seedUsd": b.seed_usd,
        "seedTimeoutSeconds": m.timeout_s,
        "gpuBeforeServingSeconds": round(b.gpu_before_serving_s),
        "gpuBeforeServingUsd": b.gpu_before_serving_usd,
        "gpuWithoutSeedingSeconds": round(b.gpu_without_seeding_s),
        "gpuWithoutSeedingUsd": b.gpu_without_seeding_usd,
    }


def seeding_data(view: PlanView) -> dict[str, Any] | None:
    seeding = view.plan.seeding
    if seeding is None:
        return None
    a, d, cpu = view.bringup_assumptions, seeding.first_deploy, seeding.cpu
    return {
        "enabled": seeding.on,
        "cpuFlavor": cpu.flavor.id if cpu else None,
        "vcpus": cpu.vcpus if cpu else None,
        "cpuUsdPerHour": cpu.usd_per_hour if cpu else None,
        "noCpuReason": seeding.no_cpu,
        "assumptions": {
            "gpuStartSeconds": a.gpu_start_s,
            "cpuStartSeconds": a.cpu_start_s,
            "downloadMBps": a.download_mb_per_s,
            "volumeReadMBps": a.volume_read_mb_per_s,
        },
        "firstDeploy": {
            "cpuPodSeconds": round(d.cpu_pod_s),
            "seedUsd": d.seed_usd,
            "gpuBeforeServingUsd": d.gpu_before_serving_usd,
            "gpuWithoutSeedingUsd": d.gpu_without_seeding_usd,
            "totalUsd": d.total_usd,
            "gpuSavedFraction": round(d.gpu_saved_fraction, 4),
        },
    }
