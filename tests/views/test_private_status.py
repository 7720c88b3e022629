"""`frutebox status` on a private stack: a private pod cannot be probed from outside, and status
says so plainly (never "ok"); a pod exposed otherwise than the stack's `exposure` is drift."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from frutebox_infra.commands.status import probe_health
from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.report.status_report import status_data, status_table
from frutebox_infra.stack.endpoints import Endpoint
from frutebox_infra.views.drift import (
    DriftKind,
    LivePod,
    LiveVolume,
    Recorded,
    RecordedPod,
    StatusView,
    compute_status,
)
from tests.factories import real_registry, settings

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
MODEL, POD, VOLUME, TOKEN = "qwen-3.6-27b", "pod1abc", "vol123", "tok12345"


def plan_of(exposure: str) -> FleetPlan:
    return plan_fleet(real_registry(), settings(models=[MODEL], exposure=exposure,
                      budgetUsdPerHour=100), stack="s")  # fmt: skip


def status_of(exposure: str, **live: Any) -> StatusView:
    plan = plan_of(exposure)
    model = plan.model(MODEL)
    assert model is not None and model.placement is not None
    p = model.placement
    private = exposure == "private"
    pod = LivePod(
        id=POD, name=f"frutebox-s-{MODEL}", status="RUNNING", image=p.pod.image,
        args=p.pod.args, env={**p.pod.env, "FRUTEBOX_OWNER": TOKEN}, gpu_id=p.gpu.id,
        gpu_count=p.count, usd_per_hour=p.usd_per_hour, data_center_id="EU-RO-1",
        volume_id=VOLUME, started_at=NOW - timedelta(hours=1),
        ports=() if private else tuple(p.pod.ports), networked=private,
    )  # fmt: skip
    recorded = Recorded(pods={MODEL: RecordedPod(MODEL, pod.name, POD, p.gpu.id, p.count, 1.0)},
                        volume_id=VOLUME, volume_size_gb=200, owner=TOKEN)  # fmt: skip
    volume = LiveVolume(VOLUME, f"frutebox-s-weights-{TOKEN}", 200, "EU-RO-1")
    return compute_status(plan, recorded, [replace(pod, **live)], [volume], now=NOW)


def test_a_private_model_is_not_probed_and_status_says_where_it_is_reached() -> None:
    view = status_of("private")
    [m] = view.models
    port = plan_of("private").models[0].placement.pod.port  # type: ignore[union-attr]
    assert m.private_address == f"{POD}.runpod.internal:{port}" and m.drift is None
    # Nothing to probe: no proxy is asked (the endpoint's template points nowhere).
    endpoint = Endpoint(api_url="http://127.0.0.1:9/v2", api_key="k", key_source="test",
                        url_source="test",
                        proxy_template="http://127.0.0.1:9/{podId}-{port}")  # fmt: skip
    assert probe_health(view, endpoint) == {}
    text = status_table(view)
    assert "not probed" in text and "ok" not in text.split("volume")[0]
    assert f"{MODEL}: private, not probed: it publishes no port" in " ".join(text.split())
    assert f"{POD}.runpod.internal:{port}" in text
    [data] = status_data(view)["models"]
    assert data["healthy"] is None
    assert data["private"] == {"address": f"{POD}.runpod.internal:{port}", "probed": False}


def test_a_public_model_reads_as_before() -> None:
    [m] = status_of("public").models
    assert m.private_address is None and m.drift is None
    [data] = status_data(status_of("public"))["models"]
    assert "private" not in data


@pytest.mark.parametrize(
    ("exposure", "live", "says"),
    [
        pytest.param("private", {"ports": ("30000/http",)}, "publishes 30000/http, but the"
                     " stack is private", id="published-by-hand"),
        pytest.param("private", {"networked": False}, "global networking is off", id="off"),
        pytest.param("public", {"ports": (), "networked": True}, "is private (no port"
                     " published), but the stack is public", id="still-private"),
    ],
)  # fmt: skip
def test_a_pod_exposed_otherwise_than_the_stack_says_is_drift(
    exposure: str, live: dict[str, Any], says: str
) -> None:
    [m] = status_of(exposure, **live).models
    assert m.drift is DriftKind.CHANGED and any(says in d for d in m.details)


def test_usage_on_a_private_stack_reads_no_counters_and_says_why() -> None:
    from frutebox_infra.commands.usage import targets
    from frutebox_infra.report.usage_report import usage_table
    from frutebox_infra.views.usage import BilledHour, compute_usage

    status = status_of("private")
    plan = plan_of("private")
    recorded = Recorded(pods={MODEL: RecordedPod(MODEL, "n", POD, "g", 1, 1.0)},
                        volume_id=VOLUME, volume_size_gb=200, owner=TOKEN)  # fmt: skip
    live = [m.live for m in status.models if m.live is not None]
    assert targets(plan, recorded, live) == []
    assert targets(plan_of("public"), recorded, live) != []
    billed = [BilledHour(pod_id=POD, start=NOW - timedelta(hours=h), usd=1.0) for h in (1, 2)]
    view = compute_usage(plan=plan, hours=4, end=NOW, billed=billed, samples=[],
                         owners={POD: MODEL})  # fmt: skip
    [m] = view.models
    assert m.output_tokens is None and "the stack is private" in (m.unmeasured or "")
    assert "runpod.internal" in " ".join(usage_table(view).split())
