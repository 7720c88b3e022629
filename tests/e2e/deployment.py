"""A throwaway Pulumi project deploying against an in-process RunPod v2 emulator on loopback."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from frutebox_infra.deploy.requests import pod_name, seed_pod_name, volume_name
from frutebox_infra.emulator.catalog import Stock, full_stock
from frutebox_infra.emulator.clock import Clock
from frutebox_infra.emulator.server import RunningEmulator, realistic_for, start
from frutebox_infra.emulator.transfers import Transfers
from frutebox_infra.runpod.command_io import scaled_waits
from tests import emulator_client
from tests.e2e.project import PulumiProject
from tests.factories import emulator_parts, real_registry

API_KEY = "rk-e2e-9f3c1d7a55"
HF_TOKEN = "hf-e2e-77b2e0c4aa"

TIME_SCALE = 100.0
"""Emulated seconds per real second: RunPod's minute quota window lasts 0.6 s, a 20 s restart
lag 0.2 s, a 64 s model load 0.64 s."""
STACKS = ("dev", "prod", "small", "fleet", "gated", "cuda")
"""Stacks the tests deploy; the account already holds someone else's pods under their names."""

FAST = {
    **scaled_waits(TIME_SCALE),
    "FRUTEBOX_RUNNING_TIMEOUT_S": "5",
    "FRUTEBOX_HEALTH_TIMEOUT_S": "4",
}
"""The deploy step's waits, on the same scaled clock, so a never-healthy pod fails in seconds."""

SMALL = {"dataCenter": "EU-RO-1", "budgetUsdPerHour": 5, "maxFallbackPremium": 2, "seeding": False}
"""A one-data-centre stack with room for a couple of small models, whose GPU pods download their
own weights: a fault queued for `pods.create` reaches the GPU pod (tests/e2e/test_seeding.py
deploys the default, seeding first)."""

SEEDED = {**SMALL, "seeding": True, "budgetUsdPerHour": 12}
"""The same with seeding on (the default): a CPU pod per model first, then the GPU pods."""

TRANSFERS = Transfers.realistic(gpu_start_s=30.0)
"""The plan's download and read speeds; the GPU pod's start shortened from 300 s to 30 s so a
pod's load fits FAST's health deadline."""


@dataclass
class Deployment:
    project: PulumiProject
    emulator: RunningEmulator

    @classmethod
    def start(
        cls,
        project: PulumiProject,
        stock: Mapping[str, int] | None = None,
        clock: Clock | None = None,
        **realism: Any,
    ) -> Deployment:
        """The realistic account (RunPod's documented unkindness, clock scaled). `stock`: free
        GPUs per GPU id in every data centre; `realism`: overrides, e.g. `cuda_versions`."""
        catalog, hub, openapi = emulator_parts()
        cells: Stock = full_stock(catalog)
        for gpu_id, count in (stock or {}).items():
            for dc in catalog.data_centers:
                cells[(gpu_id, dc)] = count
        registry = real_registry()
        options: dict[str, Any] = {
            "time_scale": TIME_SCALE,
            "transfers": TRANSFERS,
            "foreign_pod_names": tuple(
                name(stack, m.id)
                for stack in STACKS
                for m in registry.models
                for name in (pod_name, seed_pod_name)
            ),
            "foreign_volume_names": tuple(volume_name(stack) for stack in STACKS),
        }
        options.update(realism)
        emulator = start(
            catalog=catalog,
            stock=cells,
            realism=realistic_for(registry, **options),
            hub=hub,
            openapi=openapi,
            clock=clock,
        )
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
        """Our volumes: the account's foreign ones are left out."""
        return [v for v in self.state()["volumes"] if not v["deleted"] and not v["foreign"]]

    def foreign_pods(self) -> list[dict[str, Any]]:
        return emulator_client.foreign_pods(self.emulator)

    def created_bodies(self) -> list[dict[str, Any]]:
        """Bodies of GPU pod creates the emulator accepted (201), in order."""
        return [b for b in self._accepted() if "gpu" in b]

    def seed_bodies(self) -> list[dict[str, Any]]:
        """Bodies of CPU (seeding) pod creates the emulator accepted (201), in order."""
        return [b for b in self._accepted() if "cpu" in b]

    def _accepted(self) -> list[dict[str, Any]]:
        return [r["body"] for r in self.requests("pods.create") if r.get("status") == 201]

    def hub(self, **change: Any) -> None:
        """Change the emulated Hugging Face Hub, e.g. `hub(repo=R, removeFile=P)`."""
        emulator_client.hub(self.emulator, change)

    def requests(self, op: str) -> list[dict[str, Any]]:
        return emulator_client.requests(self.emulator, op)
