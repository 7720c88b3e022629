"""The usage shell against the emulator on a manual clock: the pods `up` would create, traffic
driven at two models over a day (one idle half of it), container restarts in the middle with
traffic served since the last sample, hourly `--record` samples; `usage` then reports exactly
what the emulator billed and served, to the token for SGLang, whose counters are kept on the
volume, and as a lower bound that says so for vLLM, whose counters died with its process."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from frutebox_infra.commands.status import recorded_from_outputs
from frutebox_infra.commands.usage import (
    collect_usage,
    keyed_for_gateways,
    prometheus_value,
    read_ledger,
    usage_now,
)
from frutebox_infra.deploy.requests import pod_body
from frutebox_infra.emulator.clock import ManualClock
from frutebox_infra.emulator.realism import Realism
from frutebox_infra.emulator.server import RunningEmulator, start
from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.plumbing.errors import UsageError
from frutebox_infra.recipes.gateway import KEY_ENV
from frutebox_infra.report import Format
from frutebox_infra.report.render import render
from frutebox_infra.runpod.tls import tls_context
from frutebox_infra.stack.endpoints import Endpoint, resolve_endpoint
from frutebox_infra.views.usage import UsageView
from tests.factories import emulator_parts, real_registry, settings

STACK = "u"
OWNER = "tok-usage-1234"
KEY = "usage-serving-key-" + "0" * 24
"""The stack's serving key: SGLang's pod runs the gateway, which counts nothing without it."""
MODELS = ["pixtral", "qwen-3.6-27b"]
START = datetime(2026, 12, 1, 0, 0, 30, tzinfo=UTC)


def plan() -> FleetPlan:
    return plan_fleet(
        real_registry(), settings(models=MODELS, measureUsage=True, seeding=False), stack=STACK
    )


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START.timestamp())


@pytest.fixture
def emu(clock: ManualClock) -> Iterator[RunningEmulator]:
    catalog, hub, openapi = emulator_parts()
    running = start(host="127.0.0.1", port=0, catalog=catalog, realism=Realism.fast(),
                    hub=hub, openapi=openapi, clock=clock)  # fmt: skip
    yield running
    running.stop()


def api(emu: RunningEmulator) -> httpx.Client:
    return httpx.Client(base_url=emu.url, headers={"Authorization": "Bearer k"},
                        verify=tls_context())  # fmt: skip


def deploy(emu: RunningEmulator) -> dict[str, Any]:
    """What `up` creates (the volume and each planned pod), and the outputs it records."""
    p, client = plan(), api(emu)
    body = {"name": "v", "size": 900, "dataCenter": "EU-RO-1"}
    volume = client.post("/v2/network-volumes", json=body).json()
    pods = {}
    for model in p.models:
        assert model.placement is not None
        body = pod_body(model, model.placement, p.settings, stack=STACK, volume_id=volume["id"],
                        owner=OWNER)  # fmt: skip
        if model.placement.pod.serving_key_env:  # filled in as the deploy step fills it
            body["env"] = {**body["env"], KEY_ENV: KEY}
        hook = model.placement.pod.start_hook
        if hook is not None:  # vLLM's gateway hook, where a seeding pod would have put it
            where = {"path": hook.path.removeprefix("/workspace/"), "text": hook.text}
            client.post(f"/_emulator/volumes/{volume['id']}/texts", json=where)
        pod = client.post("/v2/pods", json=body).json()
        assert "id" in pod, pod
        for _ in range(3):
            client.get(f"/v2/pods/{pod['id']}")
        pods[model.model_id] = {"name": body["name"], "podId": pod["id"], "gpuId": "g"}
    return {"volume": {"id": volume["id"], "sizeGb": 900, "owner": OWNER}, "pods": pods}


def endpoint(emu: RunningEmulator) -> Endpoint:
    return resolve_endpoint({"RUNPOD_API_KEY": "k", "RUNPOD_API_URL": emu.url,
                             "RUNPOD_PROXY_URL_TEMPLATE": emu.app.proxy_url_template})  # fmt: skip


def drive(emu: RunningEmulator, pod_id: str, requests: int, tokens: int) -> None:
    answer = api(emu).post(f"/_emulator/pods/{pod_id}/traffic",
                           json={"requests": requests, "outputTokens": tokens,
                                 "key": KEY}).json()  # fmt: skip
    assert answer["served"] == requests, answer


def usage(emu: RunningEmulator, outputs: dict[str, Any], ledger: Path, clock: ManualClock,
          **kw: Any) -> UsageView | int:  # fmt: skip
    return collect_usage(plan(), recorded_from_outputs(outputs), endpoint(emu), hours=24,
                         ledger=ledger, now=clock.utc(),
                         auth_headers=keyed_for_gateways(plan(), KEY), **kw)  # fmt: skip


def test_a_day_of_traffic_through_a_restart_is_reported_exactly(
    emu: RunningEmulator, clock: ManualClock, tmp_path: Path
) -> None:
    outputs = deploy(emu)
    ledger = tmp_path / "usage.jsonl"
    pix, qwen = (outputs["pods"][m]["podId"] for m in MODELS)
    for hour in range(24):
        clock.advance(600)
        if hour == 9:
            # Served after the last sample, then both containers restart before the next one.
            drive(emu, pix, 1, 7)
            drive(emu, qwen, 1, 9)
            for pod_id in (pix, qwen):
                api(emu).post(f"/v2/pods/{pod_id}/action", json={"action": "restart"})
                api(emu).get(f"/v2/pods/{pod_id}")  # the container is back
        clock.advance(1200)
        drive(emu, pix, 3, 100)  # busy all day
        if hour < 12:
            drive(emu, qwen, 2, 50)  # idle the second half of the day
        clock.advance(1800)
        assert usage(emu, outputs, ledger, clock, record_only=True) == 2  # the hourly sample
    clock.advance(60)
    view = usage(emu, outputs, ledger, clock)
    assert isinstance(view, UsageView)
    state = api(emu).get("/_emulator/state").json()
    truth = {p["id"]: p["emulator"] for p in state["pods"]}
    billing = api(emu).get("/v2/billing/pods", params={"bucketSize": "hour", "lastN": 24}).json()
    start = billing["metadata"]["query"]["startTime"]
    served_in = {p: sum(s[1] for s in truth[p]["served"] if s[0] >= start) for p in (pix, qwen)}
    for model_id, pod_id in zip(MODELS, (pix, qwen), strict=True):
        row = next(m for m in view.models if m.model_id == model_id)
        records = [r for r in billing["records"] if r["podId"] == pod_id]
        assert row.usd_billed == pytest.approx(sum(r["totalAmount"] for r in records), abs=1e-6)
        assert row.hours_billed == len(records)
    # The window is the last 24 buckets, the current one included: hour 0 fell outside it.
    pix_row = next(m for m in view.models if m.model_id == "pixtral")
    qwen_row = next(m for m in view.models if m.model_id == "qwen-3.6-27b")
    # SGLang counted in its directory on the volume: the 9 tokens served before the restart
    # are there, and nothing is lost.
    assert qwen_row.output_tokens == served_in[qwen] == 11 * 100 + 9
    assert (qwen_row.restarts_seen, qwen_row.counts_lost, qwen_row.counts_kept) == (1, 0, True)
    # vLLM counted in its process: the 7 tokens served between the sample and the restart
    # are gone, and the view says its figure is a lower bound, and why.
    assert pix_row.output_tokens == served_in[pix] - 7 == 23 * 300
    assert (pix_row.restarts_seen, pix_row.counts_lost, pix_row.counts_kept) == (1, 1, False)
    assert "process's memory" in (pix_row.lost_why or "")
    for model_id, pod_id in zip(MODELS, (pix, qwen), strict=True):
        row = next(m for m in view.models if m.model_id == model_id)
        # Idle: the billed hour buckets in which the emulator served this pod nothing.
        served = {s[0][:13] for s in truth[pod_id]["served"]}
        idle = [r for r in billing["records"]
                if r["podId"] == pod_id and r["startTime"][:13] not in served]  # fmt: skip
        assert row.idle_hours == len(idle)
        assert row.idle_usd == pytest.approx(sum(r["totalAmount"] for r in idle), abs=1e-6)
    assert qwen_row.idle_hours == 13  # 12:00 to 24:00, the last bucket the current hour
    kept = {s.counter_dir for s in read_ledger(ledger) if s.pod_id == qwen}
    assert kept == {"/workspace/frutebox/counters/qwen-3.6-27b/sglang-v0.5.21"}
    assert {s.counter_dir for s in read_ledger(ledger) if s.pod_id == pix} == {None}
    data = json.loads(render(view, Format.JSON))
    assert data["version"] == 1 and data["total"]["outputTokens"] == 23 * 300 + 1109
    pix_data = next(m for m in data["models"] if m["model"] == "pixtral")
    assert pix_data["outputIsLowerBound"] and pix_data["countsLostAtRestarts"] == 1
    table = render(view, Format.TABLE)
    assert ">=6900" in table and "pixtral: a lower bound" in table
    assert "qwen-3.6-27b: 1 restart or replacement seen, nothing lost" in table
    assert "| `pixtral` |" in render(view, Format.MARKDOWN)


def test_the_ledger_names_a_bad_line_and_its_fix(tmp_path: Path) -> None:
    ledger = tmp_path / "usage.jsonl"
    ledger.write_text('{"at": "2026-12-01T00:00:00+00:00", "podId": "p", "model": "m"}\nnope\n')
    with pytest.raises(UsageError, match=r"usage.jsonl:2: not a usage sample.*Fix: delete"):
        read_ledger(ledger)


def test_prometheus_counters_sum_over_labels() -> None:
    text = ('# TYPE vllm:generation_tokens_total counter\n'
            'vllm:generation_tokens_total{model_name="a"} 10.0\n'
            'vllm:generation_tokens_total{model_name="b"} 5\n'
            'vllm:generation_tokens_total_created 1.7e9\n')  # fmt: skip
    assert prometheus_value(text, "vllm:generation_tokens_total") == 15.0
    assert prometheus_value(text, "sglang:generation_tokens_total") is None


def test_the_time_can_be_given_and_a_bad_one_is_named() -> None:
    assert usage_now("2026-12-03T18:00:00Z") == datetime(2026, 12, 3, 18, tzinfo=UTC)
    with pytest.raises(UsageError, match="RFC 3339"):
        usage_now("tomorrow")
