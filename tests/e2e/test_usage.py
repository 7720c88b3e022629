"""`frutebox usage` on the real engine against the emulator: `pulumi up` of five measured,
seeded models, a simulated day of traffic (the emulator's clock stepped an hour at a time), one
model idle from noon, hourly `usage --record`, and mid-morning traffic served after a sample and
before every container restarts: the report then says exactly what the emulator billed and
served, to the token for the vLLM, SGLang, llama.cpp and Ollama models and to the prompt for the
ComfyUI model: their counters are kept on the volume, in a directory the seed, the launch or the
counts keeper made, so the restart loses nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from frutebox_infra.emulator.clock import SteppedClock
from frutebox_infra.runpod.tls import tls_context
from tests.e2e.deployment import API_KEY, SEEDED, Deployment
from tests.e2e.project import PulumiProject

pytestmark = pytest.mark.engine

STACK = "small"
# Seeded: a vLLM or llama.cpp model's gateway starts from the hook its seeding pod puts on the
# volume. qwen3-235b-a22b is served by llama.cpp, whose counters its hook keeps.
MODELS = ["pixtral", "qwen-3.6-27b", "sdxl-1.0", "qwen3-235b-a22b", "qwen3-8b"]
AS_LLAMACPP = {"qwen3-235b-a22b": {"engine": "llamacpp"}}
CONFIG = {**SEEDED, "budgetUsdPerHour": 40, "models": MODELS, "measureUsage": True,
          "overrides": AS_LLAMACPP}  # fmt: skip


@pytest.fixture
def clock() -> SteppedClock:
    return SteppedClock()


@pytest.fixture
def deployed(project: PulumiProject, clock: SteppedClock) -> Iterator[Deployment]:
    running = Deployment.start(project, clock=clock)
    # Seeding pods fetch the weights first, then the GPU pods read them off the volume.
    project.extra_env["FRUTEBOX_HEALTH_TIMEOUT_S"] = "60"
    project.write_stack(STACK, CONFIG)
    project.up(STACK)
    yield running
    running.stop()


def api(deployment: Deployment) -> httpx.Client:
    return httpx.Client(base_url=deployment.emulator.url, verify=tls_context(),
                        headers={"Authorization": f"Bearer {API_KEY}"})  # fmt: skip


def usage(project: PulumiProject, clock: SteppedClock, *extra: str) -> tuple[int, str, str]:
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "frutebox_infra", "usage", "--stack", STACK),
            *("--project-dir", str(project.root), "--now", clock.utc().isoformat(), *extra),
        ],
        env=project.env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return proc.returncode, proc.stdout, proc.stderr


def drive(deployment: Deployment, pod_id: str, requests: int, tokens: int, key: str) -> None:
    """`requests` as a client holding the stack's serving `key` sends them."""
    answer = api(deployment).post(f"/_emulator/pods/{pod_id}/traffic",
                                  json={"requests": requests, "outputTokens": tokens,
                                        "key": key})  # fmt: skip
    assert answer.json()["served"] == requests, answer.text


def test_a_day_of_traffic_at_five_models_is_reported_exactly(
    deployed: Deployment, project: PulumiProject, clock: SteppedClock
) -> None:
    outputs = project.outputs(STACK)
    key = str(outputs["servingKey"])  # the clients of a gateway pod hold it
    pix, qwen, sdxl, gguf, small = (outputs["pods"][m]["podId"] for m in MODELS)
    pods = (pix, qwen, sdxl, gguf, small)
    # Start the day at the top of an hour, so the day is 24 whole billing buckets after it.
    clock.advance(3600 - clock.utc().minute * 60 - clock.utc().second + 30)
    for hour in range(24):
        clock.advance(600)
        if hour == 9:
            # Served after the last sample; then every container restarts before the next one.
            drive(deployed, pix, 1, 7, key)
            drive(deployed, qwen, 1, 9, key)
            drive(deployed, sdxl, 2, 1, key)
            drive(deployed, gguf, 1, 5, key)
            drive(deployed, small, 1, 3, key)
            for pod_id in pods:
                api(deployed).post(f"/v2/pods/{pod_id}/action", json={"action": "restart"})
            clock.advance(60)
            for pod_id in pods:
                api(deployed).get(f"/v2/pods/{pod_id}")  # the new containers
        clock.advance(600)
        drive(deployed, pix, 3, 100, key)
        drive(deployed, sdxl, 1, 1, key)
        drive(deployed, gguf, 2, 40, key)
        drive(deployed, small, 1, 20, key)
        if hour < 12:
            drive(deployed, qwen, 2, 50, key)  # idle from noon
        clock.advance(2400 if hour != 9 else 2340)
        code, _, err = usage(project, clock, "--record")
        assert code == 0 and "recorded 5 counter sample(s)" in err, err
    clock.advance(60)
    for pod_id in pods:
        # Terminated (by hand): billing stops moving, so the figures compared are final; a pod
        # gone from RunPod still counts as the stack's.
        api(deployed).post(f"/_emulator/pods/{pod_id}/terminate")
    code, out, err = usage(project, clock, "--format", "json", "--no-sample")
    assert code == 0, err
    view = json.loads(out)
    state = deployed.state()
    truth = {p["id"]: p["emulator"] for p in state["pods"]}
    billing = api(deployed).get("/v2/billing/pods",
                                params={"bucketSize": "hour", "lastN": 24}).json()  # fmt: skip
    start = billing["metadata"]["query"]["startTime"]
    tokens_in = {p: sum(s[1] for s in truth[p]["served"] if s[0] >= start) for p in pods}
    prompts_in = sum(s[3] for s in truth[sdxl]["served"] if s[0] >= start)
    for model_id, pod_id in zip(MODELS, pods, strict=True):
        row: dict[str, Any] = next(m for m in view["models"] if m["model"] == model_id)
        records = [r for r in billing["records"] if r["podId"] == pod_id]
        served = truth[pod_id]["served"]
        assert row["usdBilled"] == pytest.approx(sum(r["totalAmount"] for r in records), abs=1e-6)
        assert row["hoursBilled"] == len(records)
        idle = [r for r in records if r["startTime"][:13] not in {s[0][:13] for s in served}]
        assert row["idleHours"] == len(idle)
        assert row["idleUsd"] == pytest.approx(sum(r["totalAmount"] for r in idle), abs=1e-6)
    rows = {m["model"]: m for m in view["models"]}
    pix_row, qwen_row, sdxl_row, gguf_row, small_row = (rows[m] for m in MODELS)
    # vLLM (pixtral), SGLang (qwen) and llama.cpp's start hook kept their counters on the
    # volume: every token the emulator served in the window, those served between the sample
    # and the restart included. The window is the last 24 buckets: the first hour of traffic
    # fell just outside it.
    assert pix_row["outputTokens"] == tokens_in[pix] == 23 * 300 + 7
    assert qwen_row["outputTokens"] == tokens_in[qwen] == 11 * 100 + 9
    assert gguf_row["outputTokens"] == tokens_in[gguf] == 23 * 80 + 5
    # Ollama keeps no counters: the counts keeper counted what its answers carried.
    assert small_row["outputTokens"] == tokens_in[small] == 23 * 20 + 3
    for row in (pix_row, qwen_row, gguf_row, small_row):
        assert not row["outputIsLowerBound"] and row["countersKeptOnVolume"]
        assert row["restartsSeen"] == 1 and row["countsLostAtRestarts"] == 0
    # Idle from noon: twelve hours, and the current one, billed a minute before the terminate.
    assert qwen_row["idleHours"] == 13
    # ComfyUI keeps /history in memory, and the counts keeper its count on the volume: the 2
    # prompts run between the sample and the restart are counted too.
    assert sdxl_row["prompts"] == prompts_in == 25
    assert not sdxl_row["outputIsLowerBound"] and sdxl_row["countersKeptOnVolume"]
    assert sdxl_row["restartsSeen"] == 1 and sdxl_row["countsLostAtRestarts"] == 0
    assert not any("a lower bound" in n for n in view["notes"])
    assert view["total"]["usdBilled"] == pytest.approx(
        sum(r["usdBilled"] for r in (pix_row, qwen_row, sdxl_row, gguf_row, small_row)), abs=1e-6
    )
    # On the volume: a counter directory per counted model and engine release, the vLLM one
    # made by its seed (its launch cannot), the SGLang one by its launch, the llama.cpp,
    # Ollama and ComfyUI ones by their counts keepers.
    (volume,) = [v for v in state["volumes"] if not v.get("foreign")]
    assert sorted(volume["counterDirs"]) == [
        "frutebox/counters/pixtral/vllm-v0.31.0-cu129",
        "frutebox/counters/qwen-3.6-27b/sglang-v0.5.21",
        "frutebox/counters/qwen3-235b-a22b/llamacpp-full-cuda-b11382",
        "frutebox/counters/qwen3-8b/ollama-3.14.2-slim-bookworm",
        "frutebox/counters/sdxl-1.0/comfyui-2.9.1-cuda12.8-cudnn9-runtime",
    ]
