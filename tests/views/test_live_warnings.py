"""Preview's live warnings: price drift both sides of 5%, stock and fallbacks, volume tiers."""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from typing import Any

import pytest

from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.views.drift import LivePod, LiveVolume
from frutebox_infra.views.live_warnings import (
    LiveCatalog,
    LiveGpu,
    live_warnings,
    registry_line,
    registry_price_date,
)
from tests.factories import real_registry, settings

A4000, A5000 = "NVIDIA RTX A4000", "NVIDIA RTX A5000"
DC = "EU-RO-1"


@cache
def plan(budget: float = 10) -> FleetPlan:
    config = settings(models=["qwen3-8b"], maxFallbackPremium=2, budgetUsdPerHour=budget)
    return plan_fleet(real_registry(), config, stack="s")


def catalog(
    a4000: float = 0.17, a4000_stock: str = "HIGH", a5000_stock: str = "HIGH", **volume: tuple
) -> LiveCatalog:
    gpus = {
        A4000: LiveGpu(id=A4000, secure_usd_per_hour=a4000, stock={DC: a4000_stock}),
        A5000: LiveGpu(id=A5000, secure_usd_per_hour=0.26, stock={DC: a5000_stock}),
    }
    return LiveCatalog(gpus=gpus, volume_types={DC: volume.get("types", ("STANDARD",))})


@pytest.mark.parametrize(
    ("live_usd", "warned"),
    [
        pytest.param(0.17, False, id="same"),
        pytest.param(0.178, False, id="plus-4.7%"),
        pytest.param(0.179, True, id="plus-5.3%"),
        pytest.param(0.162, False, id="minus-4.7%"),
        pytest.param(0.161, True, id="minus-5.3%"),
    ],
)
def test_price_drift_beyond_five_percent(live_usd: float, warned: bool) -> None:
    warnings = [w for w in live_warnings(plan(), catalog(a4000=live_usd)) if "price" in w]
    assert bool(warnings) is warned
    if warned:
        assert f"${live_usd:.2f}/h" in warnings[0] and "$0.17/h" in warnings[0]


def test_out_of_stock_names_the_fallback_and_the_budget() -> None:
    [warning] = live_warnings(plan(), catalog(a4000_stock="NONE"))
    assert "qwen3-8b: 1x RTX A4000 is out of stock in EU-RO-1" in warning
    assert "would take 1x RTX A5000 at $0.26/h" in warning and "within" in warning
    [over] = live_warnings(plan(0.2), catalog(a4000_stock="NONE"))
    assert "OVER the $0.20/h budget" in over


def test_a_data_centre_missing_from_the_stock_list_has_none() -> None:
    live = LiveCatalog(
        gpus={
            A4000: LiveGpu(id=A4000, secure_usd_per_hour=0.17, stock={}),
            A5000: LiveGpu(id=A5000, secure_usd_per_hour=0.26, stock={}),
        }
    )
    [warning] = live_warnings(plan(), live)
    assert "and so is every allowed fallback" in warning


def test_in_stock_and_true_prices_say_nothing() -> None:
    assert live_warnings(plan(), catalog()) == []


def test_a_data_centre_that_cannot_host_the_volume_tier() -> None:
    [warning] = live_warnings(plan(), catalog(types=("HIGH_PERFORMANCE",)))
    assert "EU-RO-1 cannot host a STANDARD network volume" in warning


def test_the_registry_line_is_dated() -> None:
    assert registry_price_date(real_registry()) == "2026-08 to 2026-10-07"
    line = registry_line(real_registry(), "no RunPod key")
    assert line.startswith("live: no RunPod key") and "dated 2026-08 to 2026-10-07" in line


def stack_pod(pod_id: str, status: str, **changes: Any) -> LivePod:
    """qwen3-8b's planned pod, on volume v1, with `changes` applied."""
    model = plan().model("qwen3-8b")
    assert model is not None and model.placement is not None
    p = model.placement
    env = {**p.pod.env, "FRUTEBOX_OWNER": "tok12345"}
    pod = LivePod(
        pod_id, "frutebox-s-qwen3-8b", status, p.pod.image, p.pod.args, env,
        p.gpu.id, p.count, volume_id="v1",
    )  # fmt: skip
    return replace(pod, **changes)


def test_stopped_and_changed_pods_of_the_stack_are_drift_but_foreign_ones_are_not() -> None:
    volume = LiveVolume("v1", "frutebox-s-weights-tok12345", 20, DC)
    theirs = LiveVolume("v2", "frutebox-s-weights-other999", 20, DC)
    ours = stack_pod("p1", "EXITED")
    edited = stack_pod("p2", "RUNNING", args="serve -v")
    foreign = stack_pod("p3", "EXITED", volume_id="v2")  # our token, their volume
    live = replace(catalog(), pods=(ours, edited, foreign), volumes=(volume, theirs))
    warnings = live_warnings(plan(), live)
    assert warnings == [
        "drift: qwen3-8b: pod p1 is EXITED (stopped); `frutebox status --stack s` prints the"
        " command that heals it",
        "drift: qwen3-8b: pod p2 changed: args differ from the plan; `frutebox status --stack s`"
        " prints the command that heals it",
        "foreign: qwen3-8b: 1 pod(s) named frutebox-s-qwen3-8b that are not this stack's (p3);"
        " up and destroy leave them alone",
    ]


def test_a_terminated_foreign_pod_is_not_mentioned() -> None:
    volume = LiveVolume("v1", "frutebox-s-weights-tok12345", 20, DC)
    gone = stack_pod("p3", "TERMINATED", volume_id="v2")
    assert live_warnings(plan(), replace(catalog(), pods=(gone,), volumes=(volume,))) == []


def test_a_tokened_volume_name_requires_the_token_on_the_pod() -> None:
    volume = LiveVolume("v1", "frutebox-s-weights-tok12345", 20, DC)
    marked = stack_pod("p2", "EXITED")
    unmarked = replace(
        marked, id="p1", env={k: v for k, v in marked.env.items() if "OWNER" not in k}
    )
    live = replace(catalog(), pods=(unmarked, marked), volumes=(volume,))
    drift, foreign = live_warnings(plan(), live)
    assert drift.startswith("drift: qwen3-8b: pod p2 is EXITED")
    assert foreign.startswith("foreign: qwen3-8b: 1 pod(s)") and "(p1)" in foreign
