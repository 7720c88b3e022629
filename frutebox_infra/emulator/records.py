"""Pods and network volumes as the emulated account stores them, and as the API shows them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

LIVE = frozenset({"PROVISIONING", "STARTING", "RUNNING"})
# Stopped (EXITED) and terminated pods have released their GPUs.
HOLDS_GPUS = frozenset({"PROVISIONING", "STARTING", "RUNNING", "ERROR"})
ACTIONS = {
    "PROVISIONING": ["stop", "terminate"],
    "STARTING": ["stop", "terminate"],
    "RUNNING": ["stop", "restart", "terminate"],
    "EXITED": ["start", "terminate"],
    "ERROR": ["start", "terminate"],
    "TERMINATED": [],
}
RESTART_FIELDS = frozenset({"image", "args", "env", "ports", "disk", "registry", "mounts"})


@dataclass(frozen=True)
class RawBody:
    """An answer that is not one JSON document: Ollama's NDJSON progress, a proxy's text."""

    content_type: str
    data: bytes

    @classmethod
    def ndjson(cls, events: list[dict[str, Any]]) -> RawBody:
        lines = "".join(json.dumps(event) + "\n" for event in events)
        return cls("application/x-ndjson", lines.encode())


def timestamp(at_s: float) -> str:
    """Epoch seconds as `createdAt` and `startedAt` show them: whole seconds, UTC."""
    return datetime.fromtimestamp(at_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class PodRecord:
    """A pod as the account remembers it; `body` is the create body with PATCHes applied."""

    id: str
    name: str
    body: dict[str, Any]
    status: str
    data_center_id: str
    cost_per_hour: float
    created_at: str
    started_at: str | None = None
    fault: str | None = None
    pulled: list[str] = field(default_factory=list)
    billed: list[list[Any]] = field(default_factory=list)
    """[start, end or None, USD per hour] while the pod held GPUs (billing.py reads it)."""
    # Realism, in the clock's epoch seconds: a state file outlives a restart of the emulator.
    created_wall: float = 0.0
    listed_wall: float | None = None
    """From when `GET /v2/pods` shows it; None: the account's listing lag after its create."""
    started_wall: float | None = None
    restart_at_wall: float | None = None
    networked: bool = False
    """Global networking as of the container's last start: a PATCH of `globalNetworking`
    "takes effect on the next pod start/restart", not live."""
    cuda: str | None = None
    foreign: bool = False
    load_s: float = 0.0
    logs: list[list[str]] = field(default_factory=list)
    """[source, line] in order: `container` (the process's output) or `system` (RunPod's own
    lines, e.g. `start container` each time it starts the container)."""
    # A container that exits at start (containers.py): the line it prints as it exits, when
    # its current crash loop began, and how many exits and restarts the log shows so far.
    crash: str | None = None
    crash_epoch: float | None = None
    exits: int = 0
    restarts: int = 0
    container_up: bool = True
    """False between a crash and RunPod's restart: the pod is RUNNING, its runtime gone."""
    host_dead: bool = False
    """The machine under the pod died: RUNNING still, no runtime, the proxy answers 502."""
    transfer: dict[str, Any] | None = None
    """What the pod moves onto its volume after it starts (volume_files.py), as JSON."""
    seeding: dict[str, Any] | None = None
    """A seeding pod's jobs as its seeder runs them (seeder_pod.py), as JSON."""
    hooked: bool = False
    """Its image's Python found the gateway's start hook on the volume and ran it (gateway.py
    `hook_failure`): the published port is the gateway's."""
    counters: dict[str, float] = field(default_factory=dict)
    """The engine's counters since its container started (counters.py): zeroed at each start;
    an engine counting in a multiprocess directory on the volume counts there instead."""
    history: list[str] = field(default_factory=list)
    """ComfyUI's executed prompt ids since its container started."""
    served: list[list[Any]] = field(default_factory=list)
    """[time, output tokens, prompt tokens, prompts] per request served; never reset."""

    def log(self, line: str, source: str = "container") -> None:
        self.logs.append([source, line])

    def entries(self, source: str | None = None) -> list[tuple[str, str]]:
        """The log's (source, line) of one source (both when None), oldest first."""
        return [(e[0], e[1]) for e in self.logs if source is None or e[0] == source]

    def lines(self, source: str | None = None) -> list[str]:
        return [line for _, line in self.entries(source)]

    @property
    def crash_looping(self) -> bool:
        return self.crash is not None and self.crash_epoch is not None

    @property
    def serving_process(self) -> bool:
        """A container of this pod runs its process now (RUNNING, up, on a live host)."""
        return self.status == "RUNNING" and self.container_up and not self.host_dead

    @property
    def gpu(self) -> tuple[str, int] | None:
        gpu = self.body.get("gpu")
        return (gpu["id"], gpu.get("count", 1)) if isinstance(gpu, dict) else None

    @property
    def volume_id(self) -> str | None:
        network = (self.body.get("mounts") or {}).get("network") or []
        return str(network[0]["volumeId"]) if network else None

    def uptime(self, now: float) -> int | float:
        """Real seconds since the container started, at `now`; under a second (a scaled
        clock's restarts) in milliseconds, else whole seconds."""
        if self.started_wall is None:
            return 0
        seconds = max(0.0, now - self.started_wall)
        return int(seconds) if seconds >= 1 else round(seconds, 3)

    def loading(self, now: float) -> bool:
        """Started, but its server has not finished loading at `now`."""
        return self.started_wall is not None and now - self.started_wall < self.load_s

    def global_networking(self) -> dict[str, Any]:
        """Schema `PodGlobalNetworking`: the address and name only while it is on."""
        if not self.networked:
            return {"enabled": False}
        octets = sum(map(ord, self.id))
        return {
            "enabled": True,
            "ip": f"10.65.{octets // 256 % 256}.{octets % 256}",
            "internalDns": f"{self.id}.runpod.internal",
        }

    def view(self, now: float) -> dict[str, Any]:
        """The pod as GET /v2/pods/{id} shows it at `now` (schema `Pod`)."""
        b = self.body
        running = self.serving_process
        ports = list(b.get("ports") or [])
        pod: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "status": self.status,
            "actions": ACTIONS[self.status],
            "image": b.get("image", ""),
            "args": b.get("args", ""),
            "disk": b.get("disk", 20),
            "mounts": b.get("mounts") or {},
            "ports": ports,
            "env": b.get("env") or {},
            "registry": b.get("registry"),
            "cloud": b.get("cloud", "SECURE"),
            "dataCenterId": self.data_center_id,
            "cudaVersion": (self.cuda or "12.8") if self.gpu else None,
            "ssh": {
                "proxy": {
                    "host": "ssh.runpod.io",
                    "port": 22,
                    "username": f"{self.id}-emu",
                    "command": f"ssh {self.id}-emu@ssh.runpod.io",
                },
                "direct": None,
            },
            "template": None,
            "cost": self.cost_per_hour if self.status in HOLDS_GPUS else 0.0,
            "locked": bool(b.get("locked", False)),
            "globalNetworking": self.global_networking(),
            "runtime": {
                "uptime": self.uptime(now),
                "ports": [
                    {
                        "private": int(p.split("/")[0]),
                        "public": None,
                        "type": p.split("/")[-1],
                        "ip": None,
                    }
                    for p in ports
                ],
            }
            if running
            else None,
            "createdAt": self.created_at,
            "startedAt": self.started_at,
        }
        if self.gpu:
            pod["gpu"] = {"id": self.gpu[0], "count": self.gpu[1]}
        else:
            cpu = b["cpu"]
            pod["cpu"] = {**cpu, "memory": cpu.get("memory", 4 * cpu["vcpuCount"])}
        return pod


@dataclass
class VolumeRecord:
    """A network volume; `size` in GB."""

    id: str
    name: str
    size: int
    data_center: str
    type: str = "STANDARD"
    deleted: bool = False
    created_wall: float = 0.0
    listed_wall: float | None = None
    """From when `GET /v2/network-volumes` shows it; None: the account's listing lag after
    its create."""
    foreign: bool = False
    files: dict[str, list[int]] = field(default_factory=dict)
    """Path below the mount -> [size, bytes present]: what pods wrote there (volume_files.py)."""
    refs: dict[str, str] = field(default_factory=dict)
    """Small text files (a Hugging Face cache's refs/<branch>) by path."""
    counter_dirs: dict[str, dict[str, float]] = field(default_factory=dict)
    """prometheus_client multiprocess directories (path below the mount) and the counters the
    files in each add up to: made by a launch script, kept across pods (counters.py)."""

    def view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "size": self.size,
            "dataCenter": self.data_center,
            "type": self.type,
        }
