"""`frutebox status`: recorded vs live vs planned as a terminal table, Markdown for a job
summary, and plain data with stable camelCase keys."""

from __future__ import annotations

from typing import Any

from frutebox_infra.report import Renderers
from frutebox_infra.report.text import markdown_rows, table, usd
from frutebox_infra.views.status_view import LivePod, LiveVolume, ModelStatus, StatusView

STATUS_VERSION = 1
"""Changes when a key of `status_data` changes or goes; a key added beside them keeps it."""
STATUS_HEADERS = (
    "MODEL",
    "POD",
    "LIVE",
    "UPTIME",
    "HEALTH",
    "GPU",
    "$/H LIVE",
    "$/H PLAN",
    "DRIFT",
)


def _uptime(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes = int(seconds // 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m"


def _health(m: ModelStatus) -> str:
    if m.private_address is not None and m.healthy is None:
        return "not probed"
    return "-" if m.healthy is None else "ok" if m.healthy else "failing"


def model_row(m: ModelStatus) -> list[str]:
    live = m.live
    gpu = f"{live.gpu_count}x {live.gpu_id}" if live and live.gpu_id else "-"
    if m.planned is not None:
        planned_gpu = f"{m.planned.count}x {m.planned.gpu.id}"
        gpu = gpu if gpu == planned_gpu else f"{gpu} (plan {planned_gpu})"
    return [
        m.model_id,
        m.recorded_pod_id or "-",
        live.status if live else "gone" if m.recorded_pod_id else "-",
        _uptime(m.uptime_s),
        _health(m),
        gpu,
        usd(live.usd_per_hour) if live else "-",
        usd(m.planned.usd_per_hour) if m.planned else "-",
        str(m.drift) if m.drift else "in sync",
    ]


def _pod_line(pod: LivePod) -> str:
    return f"{pod.name} ({pod.id}, {pod.status}, {pod.gpu_count}x {pod.gpu_id})"


def _volume_of(volume: LiveVolume) -> str:
    tier = volume.type or "default tier"
    return f"{volume.name} ({volume.id}, {volume.size_gb} GB {tier} in {volume.data_center})"


def _notes(view: StatusView) -> list[str]:
    notes = [f"{m.model_id}: {m.drift}: {'; '.join(m.details)}" for m in view.models if m.drift]
    notes += [
        f"{m.model_id}: private, not probed: it publishes no port, so nothing outside"
        f" RunPod can ask it; only the account's own pods reach it, at {m.private_address}"
        for m in view.models
        if m.private_address is not None
    ]
    notes += [f"untracked (carries this stack's mark): {_pod_line(p)}" for p in view.untracked]
    if view.untracked_volumes:
        notes += [
            f"untracked volume (named with this stack's token, not in the state):"
            f" {_volume_of(v)}"
            for v in view.untracked_volumes
        ]
        notes.append(
            f"untracked volumes bill {usd(view.untracked_volumes_usd_per_month)}/month for"
            " nothing; `--terminate-untracked` deletes them"
        )
    notes += [f"foreign, same name, not touched: {_pod_line(p)}" for p in view.foreign]
    notes += [
        f"foreign volume, named like ours without our token, not touched: {_volume_of(v)}"
        for v in view.foreign_volumes
    ]
    if view.volume.missing:
        notes.append(
            f"volume {view.volume.recorded_id} is missing from RunPod: the weights are gone and"
            " every pod that mounts it fails; it is protected, so recreating it is explicit"
            " (`pulumi state unprotect <its urn>`, then `pulumi up --replace <its urn>`)"
        )
    return notes


def _volume_line(view: StatusView) -> str:
    v = view.volume
    if v.live is None:
        where = "missing from RunPod" if v.missing else "not recorded yet"
        plan = f"plan: {v.planned_size_gb} GB in {v.planned_data_center}"
        return f"{v.recorded_id or '-'} {where} ({plan})"
    live = v.live
    return (
        f"{live.id} {live.size_gb} GB {live.type or 'default tier'} in {live.data_center}"
        f" (plan: {v.planned_size_gb} GB in {v.planned_data_center})"
    )


def _period(hours: int) -> str:
    return f"{hours // 24} days" if hours % 24 == 0 and hours > 24 else f"{hours} h"


def _spend_lines(view: StatusView) -> list[str]:
    return [
        f"last {_period(s.hours)}: {usd(s.billed_usd)} billed to the recorded pods,"
        f" {usd(s.planned_usd)} planned"
        for s in view.spend
    ]


def _verdict(view: StatusView) -> str:
    return "drift" if view.drifted else "in sync"


def status_table(view: StatusView) -> str:
    rows = [model_row(m) for m in view.models]
    lines = [table(STATUS_HEADERS, rows, width=120), "", f"volume  {_volume_line(view)}"]
    lines += [f"spend   {line}" for line in _spend_lines(view)]
    lines += ["", f"stack {view.stack}: {_verdict(view)}"]
    lines += [f"  - {n}" for n in _notes(view)]
    if view.heal:
        lines += ["", "heal with:", f"  {view.heal}"]
    return "\n".join(lines)


def status_markdown(view: StatusView) -> str:
    mark = "❌ drift" if view.drifted else "✅ in sync"
    lines = [f"### frutebox status: `{view.stack}` — {mark}", ""]
    lines += markdown_rows(STATUS_HEADERS, [model_row(m) for m in view.models])
    lines += ["", f"- **Volume:** {_volume_line(view)}"]
    lines += [f"- **Spend:** {line}" for line in _spend_lines(view)]
    notes = _notes(view)
    if notes:
        lines += ["", "**Drift and other pods:**", ""] + [f"- {n}" for n in notes]
    if view.heal:
        lines += ["", "Heal with:", "", "```sh", view.heal, "```"]
    return "\n".join(lines) + "\n"


def _pod_data(pod: LivePod | None) -> dict[str, Any] | None:
    if pod is None:
        return None
    return {
        "id": pod.id,
        "name": pod.name,
        "status": pod.status,
        "gpuId": pod.gpu_id,
        "gpuCount": pod.gpu_count,
        "usdPerHour": pod.usd_per_hour,
        "dataCenterId": pod.data_center_id,
    }


def _volume_data(volume: LiveVolume) -> dict[str, Any]:
    return {
        "id": volume.id,
        "name": volume.name,
        "sizeGb": volume.size_gb,
        "type": volume.type,
        "dataCenter": volume.data_center,
    }


def status_data(view: StatusView) -> dict[str, Any]:
    v = view.volume
    return {
        "version": STATUS_VERSION,
        "stack": view.stack,
        "inSync": not view.drifted,
        "models": [
            {
                "model": m.model_id,
                "podName": m.pod_name,
                "recordedPodId": m.recorded_pod_id,
                "live": _pod_data(m.live),
                "uptimeSeconds": m.uptime_s,
                "healthy": m.healthy,
                **(
                    {"private": {"address": m.private_address, "probed": False}}
                    if m.private_address is not None
                    else {}
                ),
                "planned": None
                if m.planned is None
                else {
                    "gpuId": m.planned.gpu.id,
                    "gpuCount": m.planned.count,
                    "usdPerHour": m.planned.usd_per_hour,
                },
                "drift": str(m.drift) if m.drift else None,
                "details": list(m.details),
                "urn": m.urn,
            }
            for m in view.models
        ],
        "untracked": [_pod_data(p) for p in view.untracked],
        "foreign": [_pod_data(p) for p in view.foreign],
        "untrackedVolumes": [_volume_data(v) for v in view.untracked_volumes],
        "foreignVolumes": [_volume_data(v) for v in view.foreign_volumes],
        "volume": {
            "recordedId": v.recorded_id,
            "missing": v.missing,
            "sizeGb": v.live.size_gb if v.live else None,
            "type": v.live.type if v.live else None,
            "dataCenter": v.live.data_center if v.live else None,
            "plannedSizeGb": v.planned_size_gb,
        },
        "spend": [
            {"hours": s.hours, "billedUsd": s.billed_usd, "plannedUsd": s.planned_usd}
            for s in view.spend
        ],
        "heal": view.heal,
    }


STATUS = Renderers[StatusView](
    name="the status",
    table=status_table,
    data=status_data,
    markdown=status_markdown,
)
