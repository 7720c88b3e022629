"""Recorded (stack outputs) vs live (RunPod) vs planned: per model, what drifted and how to heal.

Pure: the shell (`status_read.py`) reads the outputs and the API and hands plain values in;
the values and the view are `drift_view.py`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime

from frutebox_infra.deploy.contract import owns_pod, volume_owned
from frutebox_infra.deploy.requests import pod_name, volume_name
from frutebox_infra.planner import FleetPlan, ModelPlan
from frutebox_infra.planner.resolver import internal_address
from frutebox_infra.stack.settings import PROJECT
from frutebox_infra.views.status_view import (
    DriftKind,
    LivePod,
    LiveVolume,
    ModelStatus,
    Probe,
    Recorded,
    RecordedPod,
    Spend,
    StatusView,
    VolumeStatus,
    heal_command,
)

__all__ = [
    "HEALTH_PROBES",
    "HEALTH_WINDOW_S",
    "DriftKind",
    "LivePod",
    "LiveVolume",
    "ModelStatus",
    "Probe",
    "Recorded",
    "RecordedPod",
    "Spend",
    "StatusView",
    "VolumeStatus",
    "changes",
    "compute_status",
    "heal_command",
    "is_ours",
    "other_volumes",
    "pod_urn",
    "with_health",
]

STOPPED_STATUSES = frozenset({"EXITED", "ERROR"})
"""A pod in these states bills its disk but serves nothing: `stopped`."""

HEALTH_PROBES = 3
"""Probes of a RUNNING pod's health path before it counts as `unhealthy`, spread over the
window: one slow answer or a proxy hiccup is no drift; a host that died answers none."""
HEALTH_WINDOW_S = 20.0
"""The window those probes span by default (`frutebox status --health-window` sets it)."""

OWNERSHIP_ENV_PREFIX = "FRUTEBOX_"
"""Env keys the deploy step adds (the ownership token); never a hand edit."""


def pod_urn(stack: str, model_id: str) -> str:
    """The URN of a model's pod command (fleet.py: ModelServer `<id>` -> Command `<id>-pod`)."""
    return (
        f"urn:pulumi:{stack}::{PROJECT}::frutebox:index:ModelServer$command:local:Command"
        f"::{model_id}-pod"
    )


def is_ours(pod: LivePod, owner: str | None, volume_id: str | None) -> bool:
    """Proof that a pod belongs to this stack: the contract's `owns_pod`, which the deploy
    step's sweep at the end of each `up` applies too."""
    return owns_pod(pod.env, pod.volume_id, owner=owner, volume_id=volume_id)


def _env_changes(
    planned: Mapping[str, str], live: Mapping[str, str], secret: Iterable[str]
) -> list[str]:
    skip = set(secret)
    keys = {
        k for k in (*planned, *live) if k not in skip and not k.startswith(OWNERSHIP_ENV_PREFIX)
    }
    return sorted(k for k in keys if planned.get(k) != live.get(k))


def exposure_changes(pod: LivePod, *, private: bool) -> list[str]:
    """A pod exposed otherwise than the stack's `exposure` says (a hand edit, a switch that
    did not finish)."""
    if not private:
        private_now = pod.networked and not pod.ports
        return ["is private (no port published), but the stack is public"] if private_now else []
    found = [f"publishes {', '.join(pod.ports)}, but the stack is private"] if pod.ports else []
    if not pod.networked:
        found.append("global networking is off, but the stack is private")
    return found


def changes(
    model: ModelPlan, pod: LivePod, data_center: str, *, private: bool = False
) -> tuple[str, ...]:
    """What differs between a live pod and the plan's placement for the same GPU."""
    placement = next(
        (p for p in model.candidates if (p.gpu.id, p.count) == (pod.gpu_id, pod.gpu_count)), None
    )
    if placement is None:
        wanted = ", ".join(f"{p.count}x {p.gpu.id}" for p in model.candidates) or "none"
        return (f"GPU {pod.gpu_count}x {pod.gpu_id} is not a planned placement ({wanted})",)
    spec = placement.pod
    found: list[str] = []
    if pod.image != spec.image:
        found.append(f"image {pod.image!r} != planned {spec.image!r}")
    if pod.args != spec.args:
        found.append("args differ from the plan")
    env = _env_changes(spec.env, pod.env, (*spec.secret_env, *spec.serving_key_env))
    if env:
        found.append(f"env {', '.join(env)} differ from the plan")
    if pod.data_center_id is not None and pod.data_center_id != data_center:
        found.append(f"data centre {pod.data_center_id} != planned {data_center}")
    found += exposure_changes(pod, private=private)
    return tuple(found)


def _model_status(
    plan: FleetPlan,
    model_id: str,
    model: ModelPlan | None,
    recorded: RecordedPod | None,
    live_by_id: Mapping[str, LivePod],
    now: datetime,
) -> ModelStatus:
    """`model`: the plan's model of that id, None when it is recorded but no longer armed."""
    live = live_by_id.get(recorded.pod_id) if recorded and recorded.pod_id else None
    drift: DriftKind | None = None
    details: tuple[str, ...] = ()
    if model is None:
        drift, details = DriftKind.CHANGED, ("disarmed in the config; `pulumi up` removes it",)
    elif recorded is None or not recorded.pod_id:
        drift, details = DriftKind.MISSING, ("planned but never created; `pulumi up` creates it",)
    elif live is None or live.status == "TERMINATED":
        drift, details = DriftKind.MISSING, (f"pod {recorded.pod_id} is gone from RunPod",)
    elif live.status in STOPPED_STATUSES:
        drift, details = DriftKind.STOPPED, (f"pod {live.id} is {live.status}",)
    else:
        details = changes(model, live, plan.settings.data_center, private=plan.private)
        drift = DriftKind.CHANGED if details else None
    uptime = None
    if live is not None and live.status == "RUNNING" and live.started_at is not None:
        uptime = max(0.0, (now - live.started_at).total_seconds())
    address = None
    if plan.private and model is not None and model.placement is not None and live is not None:
        address = internal_address(model.placement.pod.port, live.id)
    return ModelStatus(
        model_id=model_id,
        pod_name=recorded.name if recorded else pod_name(plan.stack, model_id),
        recorded_pod_id=recorded.pod_id if recorded else None,
        live=live,
        planned=model.placement if model else None,
        drift=drift,
        details=details,
        urn=pod_urn(plan.stack, model_id),
        uptime_s=uptime,
        private_address=address,
    )


def compute_status(
    plan: FleetPlan,
    recorded: Recorded,
    live_pods: Iterable[LivePod],
    live_volumes: Iterable[LiveVolume],
    *,
    now: datetime,
    billed_usd: Mapping[int, float] | None = None,
) -> StatusView:
    """Compare the three; `billed_usd` maps a window in hours to the pod spend billed in it."""
    pods = list(live_pods)
    by_id = {p.id: p for p in pods}
    # Looked up once by id: asking the plan per model would scan every model for each one.
    # A model outside its armed window has no pod by plan: not missing.
    planned = {m.model_id: m for m in plan.models if m.model_id not in plan.dormant}
    model_ids = [*planned, *(mid for mid in recorded.pods if mid not in planned)]
    models = tuple(
        _model_status(plan, mid, planned.get(mid), recorded.pods.get(mid), by_id, now)
        for mid in model_ids
    )
    tracked = {r.pod_id for r in recorded.pods.values()}
    names = {pod_name(plan.stack, mid) for mid in model_ids}
    untracked, foreign = [], []
    for pod in pods:
        if pod.id in tracked or pod.status == "TERMINATED":
            continue
        if is_ours(pod, recorded.owner, recorded.volume_id):
            untracked.append(pod)
        elif pod.name in names:
            foreign.append(pod)
    volumes = list(live_volumes)
    live_volume = next((v for v in volumes if v.id == recorded.volume_id), None)
    volume = VolumeStatus(
        recorded.volume_id, live_volume, plan.volume.size_gb, plan.settings.data_center
    )
    spend = tuple(
        Spend(hours, round(usd, 4), round(plan.usd_per_hour_best * hours, 4))
        for hours, usd in sorted((billed_usd or {}).items())
    )
    ours, theirs = other_volumes(plan.stack, recorded, volumes)
    facts = plan.volume.facts
    storage = sum(facts.usd_per_month(v.size_gb, v.type or "STANDARD") for v in ours)
    return StatusView(
        plan.stack,
        models,
        tuple(untracked),
        tuple(foreign),
        volume,
        spend,
        ours,
        theirs,
        round(storage, 2),
    )


def other_volumes(
    stack: str, recorded: Recorded, volumes: Iterable[LiveVolume]
) -> tuple[tuple[LiveVolume, ...], tuple[LiveVolume, ...]]:
    """(untracked, foreign): volumes named like the stack's that the state does not record.

    Ours is named `<base>-<the stack's token>`: only the token, kept in our state, proves it;
    one named `<base>` or `<base>-<another token>` is someone else's.
    """
    base = volume_name(stack)
    untracked: list[LiveVolume] = []
    foreign: list[LiveVolume] = []
    for v in volumes:
        owned = volume_owned(v.name, base=base, owner=recorded.owner)
        if v.id == recorded.volume_id or owned is None:
            continue
        (untracked if owned else foreign).append(v)
    return tuple(untracked), tuple(foreign)


def with_health(view: StatusView, probes: Mapping[str, Probe]) -> StatusView:
    """The view with each probed model's health; a RUNNING pod whose probes all failed, and
    that has no other drift, is `unhealthy`."""
    models = []
    for m in view.models:
        probe = probes.get(m.model_id)
        if probe is None:
            models.append(m)
            continue
        m = replace(m, healthy=probe.ok)
        if not probe.ok and m.drift is None and m.live is not None:
            answer = f"HTTP {probe.last}" if probe.last is not None else "no answer"
            detail = (
                f"pod {m.live.id} is {m.live.status} but {probe.path} failed all {probe.probes}"
                f" probes over {probe.window_s:g}s (last: {answer}): it bills and serves nothing"
            )
            m = replace(m, drift=DriftKind.UNHEALTHY, details=(detail,))
        models.append(m)
    return replace(view, models=tuple(models))


