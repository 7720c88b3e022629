"""Preview's live look on a private stack: RunPod's catalog (`globalNetwork` per data centre)
against registry/datacenters.yaml, read from the emulator, which serves the same facts."""

from __future__ import annotations

import pytest

from frutebox_infra.commands.live_look import fetch_catalog
from frutebox_infra.emulator.server import RunningEmulator
from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.stack.endpoints import resolve_endpoint
from frutebox_infra.views.live_warnings import LiveCatalog, live_warnings
from tests.factories import real_registry, settings

MODEL = "qwen-3.6-27b"


def plan_in(dc: str, exposure: str = "private") -> FleetPlan:
    config = settings(models=[MODEL], dataCenter=dc, exposure=exposure, budgetUsdPerHour=100)
    return plan_fleet(real_registry(), config, stack="s")


def networking(dc: str, offered: bool) -> LiveCatalog:
    return LiveCatalog(gpus={}, global_network={dc: offered})


def test_the_live_catalog_agrees_with_the_registry(emulator: RunningEmulator) -> None:
    endpoint = resolve_endpoint({"RUNPOD_API_URL": emulator.url, "RUNPOD_API_KEY": "k"})
    live = fetch_catalog(endpoint, 5.0)
    registry = real_registry()
    assert {dc for dc, on in live.global_network.items() if on} == set(
        registry.networked_data_centers
    )
    assert set(live.global_network) == {d.id for d in registry.data_centers}
    for dc in live.global_network:
        assert not [w for w in live_warnings(plan_in(dc), live) if "global networking" in w]


def test_a_centre_the_catalog_no_longer_offers_it_in_is_a_warning() -> None:
    [warning] = [w for w in live_warnings(plan_in("EU-RO-1"), networking("EU-RO-1", False))
                 if "global networking" in w]  # fmt: skip
    assert "EU-RO-1 does not offer it now" in warning and "would be refused" in warning


def test_a_centre_the_catalog_offers_it_in_now_names_the_registry_fix() -> None:
    [warning] = [w for w in live_warnings(plan_in("EUR-IS-1"), networking("EUR-IS-1", True))
                 if "global networking" in w]  # fmt: skip
    assert "lists EUR-IS-1 with it now" in warning and "add it there" in warning


@pytest.mark.parametrize("offered", [True, False])
def test_a_public_stack_is_not_warned(offered: bool) -> None:
    live = networking("EU-RO-1", offered)
    plan = plan_in("EU-RO-1", "public")
    assert not [w for w in live_warnings(plan, live) if "global networking" in w]
