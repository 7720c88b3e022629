"""What a test reads from and scripts into a running emulator, through its `/_emulator/` routes."""

from __future__ import annotations

from typing import Any

import httpx

from frutebox_infra.emulator.server import RunningEmulator

TIMEOUT_S = 10


def state(emulator: RunningEmulator) -> dict[str, Any]:
    """Pods, volumes and every request the emulator answered, with its status."""
    response = httpx.get(f"{emulator.url}/_emulator/state", timeout=TIMEOUT_S)
    response.raise_for_status()
    result: dict[str, Any] = response.json()
    return result


def fault(emulator: RunningEmulator, *faults: dict[str, Any]) -> None:
    """Queue faults, e.g. `{"op": "pods.create", "action": "never-healthy"}`."""
    url = f"{emulator.url}/_emulator/faults"
    httpx.post(url, json=list(faults), timeout=TIMEOUT_S).raise_for_status()


def hub(emulator: RunningEmulator, change: dict[str, Any]) -> dict[str, Any]:
    """Change the emulated Hub or Ollama library (`/_emulator/hub`): a source gone or gated."""
    response = httpx.post(f"{emulator.url}/_emulator/hub", json=change, timeout=TIMEOUT_S)
    response.raise_for_status()
    result: dict[str, Any] = response.json()
    return result


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
