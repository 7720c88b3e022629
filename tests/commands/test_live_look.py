"""The preview's live look against the emulator: warnings, no key, and a RunPod that is silent."""

from __future__ import annotations

import socket
from typing import NoReturn

import httpx
import pytest

from frutebox_infra.commands import live_look as live
from frutebox_infra.commands.live_look import live_lines
from frutebox_infra.emulator.server import RunningEmulator
from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.runpod.errors import TransportError
from frutebox_infra.stack.endpoints import Endpoint, resolve_endpoint
from tests.emulator_client import LOOPBACK
from tests.factories import real_registry, settings

A4000 = "NVIDIA RTX A4000"


def at(url: str, key: str | None = "k") -> Endpoint:
    env = {"RUNPOD_API_URL": url, **({"RUNPOD_API_KEY": key} if key else {})}
    return resolve_endpoint(env)


def plan() -> FleetPlan:
    config = settings(models=["qwen3-8b"], maxFallbackPremium=2, budgetUsdPerHour=10)
    return plan_fleet(real_registry(), config, stack="s")


def test_no_key_prints_one_dated_registry_line_and_reads_nothing() -> None:
    line, warnings = live_lines(plan(), real_registry(), endpoint=at("http://127.0.0.1:1", None))
    assert warnings == [] and "no RunPod key" in line and "dated 2026-08" in line


def test_price_and_stock_changes_become_warnings(emulator: RunningEmulator) -> None:
    line, warnings = live_lines(plan(), real_registry(), endpoint=at(emulator.url))
    assert warnings == [] and line.startswith("live: RunPod catalog read")
    control = f"{emulator.url}/_emulator"
    LOOPBACK.post(f"{control}/prices", json={"gpuId": A4000, "secure": 0.25}).raise_for_status()
    LOOPBACK.post(f"{control}/stock", json={"gpuId": A4000, "available": 0}).raise_for_status()
    line, warnings = live_lines(plan(), real_registry(), endpoint=at(emulator.url))
    assert "2 warning(s)" in line
    assert any("RTX A4000 is $0.25/h" in w for w in warnings)
    assert any("out of stock in EU-RO-1" in w for w in warnings)
    ops = [r["op"] for r in LOOPBACK.get(f"{control}/state").json()["requests"]]
    assert set(ops) == {
        "catalog.gpus",
        "catalog.datacenters",
        "pods.list",
        "volumes.list",
    }  # read-only calls only


def test_a_runpod_that_never_answers_is_bounded_and_not_fatal() -> None:
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        line, warnings = live_lines(plan(), real_registry(), endpoint=at(url), bound_s=1)
    assert warnings == []
    assert "RunPod did not answer within 1 s" in line
    assert "dated" in line


def test_a_read_that_times_out_before_the_bound_is_told_as_no_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Under load the read's own timeout (the same bound) can fire before the join gives up.
    def timed_out(endpoint: object, timeout_s: float) -> NoReturn:
        raise TransportError("GET /pods: no answer") from httpx.ReadTimeout("timed out")

    monkeypatch.setattr(live, "fetch_catalog", timed_out)
    line, warnings = live_lines(plan(), real_registry(), endpoint=at("http://127.0.0.1:9"))
    assert warnings == [] and "RunPod did not answer within" in line


def test_refused_connection_names_the_failure_not_the_key() -> None:
    line, _ = live_lines(
        plan(), real_registry(), endpoint=at("http://127.0.0.1:1", "secret-key-123")
    )
    assert "could not be read (TransportError)" in line and "secret-key-123" not in line


def test_a_revoked_key_is_named_by_its_source_and_the_read_it_needs(
    emulator: RunningEmulator,
) -> None:
    LOOPBACK.post(f"{emulator.url}/_emulator/keys", json={"key": "k", "scope": "revoked"})
    line, warnings = live_lines(plan(), real_registry(), endpoint=at(emulator.url))
    assert warnings == []
    assert "RunPod refused the key from environment variable RUNPOD_API_KEY (401)" in line
    assert "preview's live look needs read access" in line and "dated" in line
