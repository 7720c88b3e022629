"""The status view: what drift compares (recorded, live, planned), what it finds per model, and
the one command line that heals it (pure; the comparison itself is `drift.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from frutebox_infra.planner import PlacementOption


class DriftKind(StrEnum):
    MISSING = "missing"
    """Recorded in the state but gone from RunPod (or planned and never created)."""
    STOPPED = "stopped"
    """The recorded pod exists but is not running (stopped, zero balance, crashed)."""
    CHANGED = "changed"
    """The live pod's image, args, env, GPU or data centre differ from the plan."""
    UNTRACKED = "untracked"
    """A pod provably this stack's (its token, its volume) that the state does not record."""
    UNHEALTHY = "unhealthy"
    """The recorded pod is RUNNING, but its health path failed every probe of the window: a
    dead host, a wedged server, a container that crash-loops. It bills and serves nothing."""


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
    ports: tuple[str, ...] = ()
    networked: bool = False
    """Global networking on (`globalNetworking.enabled`)."""


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
    private_address: str | None = None
    """`<podId>.runpod.internal:<port>` when the stack is private: no port is published, so
    nothing of ours can probe it; only the account's own pods reach it there."""


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
class Probe:
    """What the health probes of one pod saw over the window: `ok` once one answered 2xx."""

    ok: bool
    probes: int
    window_s: float
    last: int | None
    """The last probe's HTTP status; None when nothing answered."""
    path: str = "/"


@dataclass(frozen=True)
class StatusView:
    stack: str
    models: tuple[ModelStatus, ...]
    untracked: tuple[LivePod, ...]
    foreign: tuple[LivePod, ...]
    """Same-named pods that are not this stack's: shown, never touched."""
    volume: VolumeStatus
    spend: tuple[Spend, ...]
    untracked_volumes: tuple[LiveVolume, ...] = ()
    """Volumes named with this stack's token that the state does not record: a duplicate of an
    ambiguous create, billing storage for nothing."""
    foreign_volumes: tuple[LiveVolume, ...] = ()
    """Volumes named like this stack's without its token: someone else's, never touched."""
    untracked_volumes_usd_per_month: float = 0.0
    """What the untracked volumes bill a month, at the registry's storage prices."""

    @property
    def drifted(self) -> bool:
        return (
            bool(self.untracked or self.untracked_volumes or self.volume.missing)
            or any(m.drift for m in self.models)
        )

    @property
    def heal(self) -> str | None:
        """The one command line that brings `status` back to in sync, or None."""
        return heal_command(self)


REPLACED = frozenset({DriftKind.MISSING, DriftKind.STOPPED, DriftKind.CHANGED, DriftKind.UNHEALTHY})
"""Drift a `pulumi up --replace` of the pod heals: the delete finds or terminates the pod, the
create makes a new one (an unhealthy pod's new one lands on another host)."""


def heal_command(view: StatusView) -> str | None:
    """One shell line: remove untracked pods and volumes, then `pulumi up` replacing drifted
    pods."""
    if not view.drifted:
        return None
    parts: list[str] = []
    if view.untracked or view.untracked_volumes:
        parts.append(f"frutebox status --stack {view.stack} --terminate-untracked")
    replaced = [
        f"--replace '{m.urn}'"
        for m in view.models
        if m.drift in REPLACED and m.recorded_pod_id and m.planned is not None
    ]
    if any(m.drift for m in view.models):
        parts.append(" ".join([f"pulumi up --stack {view.stack} --yes", *replaced]))
    # A missing volume alone has no one-line heal: it is protected (see the status notes).
    return " && ".join(parts) or None
