"""Pod and volume records: what the API shows of them at a given moment."""

from __future__ import annotations

from typing import Any

import pytest

from frutebox_infra.emulator.records import ACTIONS, HOLDS_GPUS, PodRecord, RawBody, timestamp
from tests.emulator.conftest import valid

STARTED = 1_800_000_000.0


def pod(status: str = "RUNNING", **body: Any) -> PodRecord:
    fields = {"name": "p", "image": "img:1", "ports": ["8080/http", "22/tcp"]}
    fields.update(body or {"gpu": {"id": "NVIDIA A40", "count": 2}})
    return PodRecord(
        "p1", "p", fields, status, "EU-RO-1", 0.8, timestamp(STARTED),
        started_wall=STARTED, load_s=30.0,
    )  # fmt: skip


def test_timestamps_are_whole_utc_seconds() -> None:
    assert timestamp(STARTED + 0.999) == "2027-01-15T08:00:00Z"


@pytest.mark.parametrize(
    ("after_s", "uptime"),
    [
        pytest.param(0.0, 0.0, id="just-started"),
        pytest.param(0.0125, 0.013, id="under-a-second-in-ms"),
        pytest.param(0.999, 0.999, id="just-under-a-second"),
        pytest.param(1.0, 1, id="a-second"),
        pytest.param(3599.9, 3599, id="whole-seconds-above"),
        pytest.param(-5.0, 0.0, id="a-clock-behind-the-start"),
    ],
)
def test_uptime_is_real_seconds_since_the_start(after_s: float, uptime: float) -> None:
    shown = pod().view(STARTED + after_s)["runtime"]["uptime"]
    assert shown == uptime and type(shown) is type(uptime)


def test_a_pod_that_has_not_started_has_no_uptime_and_no_runtime() -> None:
    starting = pod("STARTING")
    starting.started_wall = None
    assert starting.uptime(STARTED + 100) == 0
    assert starting.view(STARTED + 100)["runtime"] is None


def test_a_server_loads_for_its_load_time_after_the_start() -> None:
    record = pod()
    assert record.loading(STARTED + 29.999)
    assert not record.loading(STARTED + 30.0)
    record.started_wall = None
    assert not record.loading(STARTED)


def test_the_view_is_the_official_pod_shape_for_gpu_and_cpu_pods() -> None:
    gpu = valid("Pod", pod().view(STARTED + 5))
    assert gpu["gpu"] == {"id": "NVIDIA A40", "count": 2} and "cpu" not in gpu
    assert [p["private"] for p in gpu["runtime"]["ports"]] == [8080, 22]
    assert gpu["cost"] == 0.8 and gpu["actions"] == ACTIONS["RUNNING"]
    cpu = valid("Pod", pod(cpu={"id": "cpu5c", "vcpuCount": 2}).view(STARTED))
    assert cpu["cpu"]["memory"] == 8 and cpu["cudaVersion"] is None and "gpu" not in cpu


@pytest.mark.parametrize("status", sorted(ACTIONS))
def test_a_pod_costs_only_while_it_holds_gpus(status: str) -> None:
    assert (pod(status).view(STARTED)["cost"] > 0) is (status in HOLDS_GPUS)


def test_ndjson_is_one_event_per_line() -> None:
    body = RawBody.ndjson([{"status": "a"}, {"status": "b"}])
    assert body.content_type == "application/x-ndjson"
    assert body.data == b'{"status": "a"}\n{"status": "b"}\n'
