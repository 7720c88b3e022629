"""A throwaway Pulumi project deploying against an in-process RunPod v2 emulator on loopback."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from frutebox_infra.emulator.catalog import Catalog, Stock, full_stock
from frutebox_infra.emulator.server import RunningEmulator, start
from tests import emulator_client
from tests.e2e.project import PulumiProject

API_KEY = "rk-e2e-9f3c1d7a55"
HF_TOKEN = "hf-e2e-77b2e0c4aa"

FAST = {
    "FRUTEBOX_POLL_INTERVAL_S": "0.05",
    "FRUTEBOX_RETRY_BACKOFF_S": "0.01",
    "FRUTEBOX_RUNNING_TIMEOUT_S": "5",
    "FRUTEBOX_HEALTH_TIMEOUT_S": "3",
}
"""The deploy step's waits, shortened so a never-healthy pod fails in seconds."""

SMALL = {"dataCenter": "EU-RO-1", "budgetUsdPerHour": 5, "maxFallbackPremium": 2}
"""A one-data-centre stack with room for a couple of small models."""


@dataclass
class Deployment:
    project: PulumiProject
    emulator: RunningEmulator

    @classmethod
    def start(cls, project: PulumiProject, stock: Mapping[str, int] | None = None) -> Deployment:
        """`stock`: free GPUs per GPU id in every data centre; unnamed ids keep the default."""
        catalog = Catalog.builtin()
        cells: Stock = full_stock(catalog)
        for gpu_id, count in (stock or {}).items():
            for dc in catalog.data_centers:
                cells[(gpu_id, dc)] = count
        emulator = start(catalog=catalog, stock=cells)
        project.extra_env.update(
            FAST,
            RUNPOD_API_URL=emulator.url,
            RUNPOD_API_KEY=API_KEY,
            RUNPOD_PROXY_URL_TEMPLATE=emulator.app.proxy_url_template,
        )
        return cls(project, emulator)

    def stop(self) -> None:
        self.emulator.stop()

    def fault(self, *faults: dict[str, Any]) -> None:
        emulator_client.fault(self.emulator, *faults)

    def state(self) -> dict[str, Any]:
        return emulator_client.state(self.emulator)

    def live_pods(self) -> list[dict[str, Any]]:
        return emulator_client.live_pods(self.emulator)

    def volumes(self) -> list[dict[str, Any]]:
        return [v for v in self.state()["volumes"] if not v["deleted"]]

    def created_bodies(self) -> list[dict[str, Any]]:
        """Bodies of POST /v2/pods that the emulator accepted (201), in order."""
        return [r["body"] for r in self.requests("pods.create") if r.get("status") == 201]

    def requests(self, op: str) -> list[dict[str, Any]]:
        return emulator_client.requests(self.emulator, op)
