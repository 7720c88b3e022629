"""Recorded (stack outputs) vs live (RunPod) vs planned: per model, what drifted and how to heal.

Pure: the shell (`status.py`) reads the outputs and the API and hands plain values in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from frutebox_infra.deploy_contract import OWNER_ENV
from frutebox_infra.deploy_requests import pod_name
from frutebox_infra.plan import FleetPlan, ModelPlan
from frutebox_infra.ranking import PlacementOption
from frutebox_infra.settings import PROJECT

STOPPED_STATUSES = frozenset({"EXITED", "ERROR"})
"""A pod in these states bills its disk but serves nothing: `stopped`."""

OWNERSHIP_ENV_PREFIX = "FRUTEBOX_"
"""Env keys the deploy step adds (the ownership token); never a hand edit."""


class DriftKind(StrEnum):
    MISSING = "missing"
    """Recorded in the state but gone from RunPod (or planned and never created)."""
    STOPPED = "stopped"
    """The recorded pod exists but is not running (stopped, zero balance, crashed)."""
    CHANGED = "changed"
    """The live pod's image, args, env, GPU or data centre differ from the plan."""
    UNTRACKED = "untracked"
    """A pod provably this stack's (its token, its volume) that the state does not record."""


@dataclass(frozen=True)
class RecordedPod:
    """One entry of the stack's `pods` output."""

    model_id: str
    name: str
    pod_id: str
    gpu_id: str
    gpu_count: int
    usd_per_hour: float


@dataclass(frozen=True)
class Recorded:
    """What the last `pulumi up` recorded: its `pods` and `volume` outputs."""

    pods: Mapping[str, RecordedPod] = field(default_factory=dict)
    volume_id: str | None = None
    volume_size_gb: int | None = None
    owner: str | None = None
    """The stack's ownership token, when the state records one."""


@dataclass(frozen=True)
class LivePod:
    """A pod as `GET /v2/pods` shows it now; `usd_per_hour` is its billed rate."""

    id: str
    name: str
    status: str
    image: str = ""
    args: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    gpu_id: str | None = None
    gpu_count: int = 0
    usd_per_hour: float = 0.0
    data_center_id: str | None = None
    volume_id: str | None = None
    started_at: datetime | None = None


@dataclass(frozen=True)
class LiveVolume:
    id: str
    name: str
    size_gb: int
    data_center: str
    type: str | None = None


@dataclass(frozen=True)
class Spend:
    """Pod spend billed over the last `hours` next to what the plan costs for as long."""

    hours: int
    billed_usd: float
    planned_usd: float


@dataclass(frozen=True)
class ModelStatus:
    model_id: str
    pod_name: str
    recorded_pod_id: str | None
    live: LivePod | None
    planned: PlacementOption | None
    drift: DriftKind | None
    details: tuple[str, ...]
    urn: str
    healthy: bool | None = None
    uptime_s: float | None = None


@dataclass(frozen=True)
class VolumeStatus:
    recorded_id: str | None
    live: LiveVolume | None
    planned_size_gb: int
    planned_data_center: str

    @property
    def missing(self) -> bool:
        return self.recorded_id is not None and self.live is None


@dataclass(frozen=True)
class StatusView:
    stack: str
    models: tuple[ModelStatus, ...]
    untracked: tuple[LivePod, ...]
    foreign: tuple[LivePod, ...]
    """Same-named pods that are not this stack's: shown, never touched."""
    volume: VolumeStatus
    spend: tuple[Spend, ...]

    @property
    def drifted(self) -> bool:
        return bool(self.untracked or self.volume.missing) or any(m.drift for m in self.models)

    @property
    def heal(self) -> str | None:
        """The one command line that brings `status` back to in sync, or None."""
        return heal_command(self)


def pod_urn(stack: str, model_id: str) -> str:
    """The URN of a model's pod command (fleet.py: ModelServer `<id>` -> Command `<id>-pod`)."""
    return (
        f"urn:pulumi:{stack}::{PROJECT}::frutebox:index:ModelServer$command:local:Command"
        f"::{model_id}-pod"
    )


def is_ours(pod: LivePod, owner: str | None, volume_id: str | None) -> bool:
    """Proof that a pod belongs to this stack; the one place that decides.

    Names are not unique on RunPod, so a name never proves it. Where the stack has an
    ownership token (`owner`), the pod must carry it in `OWNER_ENV`; where the stack's volume
    is known, the pod must mount it; with neither known, nothing is provably ours.
    """
    if owner is None and volume_id is None:
        return False
    token_ok = owner is None or pod.env.get(OWNER_ENV) == owner
    volume_ok = volume_id is None or pod.volume_id == volume_id
    return token_ok and volume_ok


def _env_changes(
    planned: Mapping[str, str], live: Mapping[str, str], secret: Iterable[str]
) -> list[str]:
    skip = set(secret)
    keys = {
        k for k in (*planned, *live) if k not in skip and not k.startswith(OWNERSHIP_ENV_PREFIX)
    }
    return sorted(k for k in keys if planned.get(k) != live.get(k))


def changes(model: ModelPlan, pod: LivePod, data_center: str) -> tuple[str, ...]:
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
    env = _env_changes(spec.env, pod.env, spec.secret_env)
    if env:
        found.append(f"env {', '.join(env)} differ from the plan")
    if pod.data_center_id is not None and pod.data_center_id != data_center:
        found.append(f"data centre {pod.data_center_id} != planned {data_center}")
    return tuple(found)


def _model_status(
    plan: FleetPlan,
    model_id: str,
    recorded: RecordedPod | None,
    live_by_id: Mapping[str, LivePod],
    now: datetime,
) -> ModelStatus:
    model = plan.model(model_id)
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
        details = changes(model, live, plan.settings.data_center)
        drift = DriftKind.CHANGED if details else None
    uptime = None
    if live is not None and live.status == "RUNNING" and live.started_at is not None:
        uptime = max(0.0, (now - live.started_at).total_seconds())
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
    model_ids = [m.model_id for m in plan.models] + [
        mid for mid in recorded.pods if plan.model(mid) is None
    ]
    models = tuple(
        _model_status(plan, mid, recorded.pods.get(mid), by_id, now) for mid in model_ids
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
    live_volume = next((v for v in live_volumes if v.id == recorded.volume_id), None)
    volume = VolumeStatus(
        recorded.volume_id, live_volume, plan.volume.size_gb, plan.settings.data_center
    )
    spend = tuple(
        Spend(hours, round(usd, 4), round(plan.usd_per_hour_best * hours, 4))
        for hours, usd in sorted((billed_usd or {}).items())
    )
    return StatusView(plan.stack, models, tuple(untracked), tuple(foreign), volume, spend)


def heal_command(view: StatusView) -> str | None:
    """One shell line: terminate untracked pods, then `pulumi up` replacing drifted pods."""
    if not view.drifted:
        return None
    parts: list[str] = []
    if view.untracked:
        parts.append(f"frutebox status --stack {view.stack} --terminate-untracked")
    replace = [
        f"--replace '{m.urn}'"
        for m in view.models
        if m.drift in (DriftKind.MISSING, DriftKind.STOPPED, DriftKind.CHANGED)
        and m.recorded_pod_id
        and m.planned is not None
    ]
    if any(m.drift for m in view.models):
        parts.append(" ".join([f"pulumi up --stack {view.stack} --yes", *replace]))
    # A missing volume alone has no one-line heal: it is protected (see the status notes).
    return " && ".join(parts) or None
