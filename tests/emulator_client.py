"""What a test reads from and scripts into a running emulator, through its `/_emulator/` routes."""

from __future__ import annotations

from typing import Any

import httpx

from frutebox_infra.emulator import layout, volume_files
from frutebox_infra.emulator.server import RunningEmulator
from frutebox_infra.recipes.base import PodSpec
from frutebox_infra.runpod.tls import tls_context

TIMEOUT_S = 10
LOOPBACK = httpx.Client(
    timeout=TIMEOUT_S,
    verify=tls_context(),
    limits=httpx.Limits(max_keepalive_connections=0),
)
"""One client for every test's calls to an emulator or a stand-in server on loopback: a client
of its own per call (`httpx.get`) would load the CA bundle each time. It keeps no connection
between calls, so stopping a server never waits on one of its idle connections."""


def state(emulator: RunningEmulator) -> dict[str, Any]:
    """Pods, volumes and every request the emulator answered, with its status."""
    response = LOOPBACK.get(f"{emulator.url}/_emulator/state", timeout=TIMEOUT_S)
    response.raise_for_status()
    result: dict[str, Any] = response.json()
    return result


def fault(emulator: RunningEmulator, *faults: dict[str, Any]) -> None:
    """Queue faults, e.g. `{"op": "pods.create", "action": "never-healthy"}`."""
    url = f"{emulator.url}/_emulator/faults"
    LOOPBACK.post(url, json=list(faults), timeout=TIMEOUT_S).raise_for_status()


def hub(emulator: RunningEmulator, change: dict[str, Any]) -> dict[str, Any]:
    """Change the emulated Hub or Ollama library (`/_emulator/hub`): a source gone or gated."""
    response = LOOPBACK.post(f"{emulator.url}/_emulator/hub", json=change, timeout=TIMEOUT_S)
    response.raise_for_status()
    result: dict[str, Any] = response.json()
    return result


def place_releases(emulator: RunningEmulator, volume_id: str, pod: PodSpec) -> None:
    """`pod`'s release archives on its emulated volume, as its seeding CPU pod places them:
    for a test that creates a seeded pod without running its seed (its launch only checks
    them, and crash-loops without them)."""
    volume = emulator.app.account.volumes[volume_id]
    for kept in pod.archives:
        path = layout.below_mount(kept.path)
        assert path is not None, kept.path
        size = int(kept.size_gb * 1e9)
        volume_files.write(volume, path, size, size)


def live_pods(emulator: RunningEmulator) -> list[dict[str, Any]]:
    """Our live pods: the realistic account's foreign pods (colliding names) are left out."""
    return [
        p
        for p in state(emulator)["pods"]
        if p["status"] != "TERMINATED" and not p["emulator"]["foreign"]
    ]


def foreign_pods(emulator: RunningEmulator) -> list[dict[str, Any]]:
    """Someone else's pods the account held before the test, in whatever state they are now."""
    return [p for p in state(emulator)["pods"] if p["emulator"]["foreign"]]


def requests(emulator: RunningEmulator, op: str) -> list[dict[str, Any]]:
    """The requests the emulator answered for one operation, e.g. `pods.create`, in order."""
    return [r for r in state(emulator)["requests"] if r["op"] == op]
