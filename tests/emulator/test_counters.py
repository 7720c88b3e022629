"""The engines' counters: they advance with traffic, show on /metrics only where the launch
turned them on, and start from zero when the container restarts; billing keeps a terminated
pod's hours."""

from __future__ import annotations

from typing import Any

import pytest

from frutebox_infra.emulator.billing import pod_billing
from frutebox_infra.emulator.clock import ManualClock
from frutebox_infra.emulator.control import out_of_band
from frutebox_infra.emulator.errors import ApiProblem
from frutebox_infra.emulator.records import PodRecord, RawBody
from frutebox_infra.emulator.state import Account
from tests.emulator.conftest import pod_body

SGLANG = "lmsysorg/sglang:v0.5.21"
VLLM = "vllm/vllm-openai:v0.31.0-cu129"
LLAMACPP = "ghcr.io/ggml-org/llama.cpp:server-cuda-b11382"


def running(account: Account, **body: Any) -> PodRecord:
    pod = account.create_pod(pod_body(**body))
    account.read_pod(pod.id)
    account.read_pod(pod.id)
    assert pod.status == "RUNNING"
    return pod


def metrics(account: Account, pod: PodRecord) -> tuple[int, dict[str, float]]:
    status, body = account.proxy(pod.id, 8080, "GET", "/metrics", None)
    if not isinstance(body, RawBody):
        return status, {}
    values = {}
    for line in body.data.decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name.split("{")[0]] = float(value)
    return status, values


def drive(account: Account, pod: PodRecord, requests: int, tokens: int) -> dict[str, Any]:
    answered = out_of_band(
        account,
        "POST",
        f"/_emulator/pods/{pod.id}/traffic",
        {"requests": requests, "outputTokens": tokens},
    )
    assert answered is not None
    return dict(answered[1])


@pytest.mark.parametrize(
    ("image", "args", "counter"),
    [
        pytest.param(
            SGLANG,
            "python3 -m sglang.launch_server --enable-metrics",
            "sglang:generation_tokens_total",
            id="sglang",
        ),
        pytest.param(VLLM, "--model m", "vllm:generation_tokens_total", id="vllm"),
        pytest.param(
            LLAMACPP, "-hf r:q --metrics", "llamacpp:tokens_predicted_total", id="llamacpp"
        ),
    ],
)
def test_token_counters_advance_with_traffic_and_reset_on_restart(
    account: Account, image: str, args: str, counter: str
) -> None:
    pod = running(account, image=image, args=args)
    assert metrics(account, pod)[0] == 200
    assert metrics(account, pod)[1][counter] == 0
    assert drive(account, pod, 3, 100) == {"served": 3, "lastStatus": 200}
    assert metrics(account, pod)[1][counter] == 300
    account.pod_action(pod.id, "restart")
    account.read_pod(pod.id)
    assert metrics(account, pod)[1][counter] == 0  # a new process counts from zero
    drive(account, pod, 1, 50)
    assert metrics(account, pod)[1][counter] == 50
    # The account's own record of what it served is never reset.
    assert [(tokens, prompts) for _, tokens, _, prompts in pod.served] == [(100, 0)] * 3 + [(50, 0)]


def test_llamacpp_reports_its_decode_seconds(account: Account) -> None:
    pod = running(account, image=LLAMACPP, args="-hf r:q --metrics")
    drive(account, pod, 2, 40)
    values = metrics(account, pod)[1]
    assert values["llamacpp:tokens_predicted_total"] == 80
    assert values["llamacpp:tokens_predicted_seconds_total"] == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("image", "args", "status"),
    [
        pytest.param(SGLANG, "python3 -m sglang.launch_server", 404, id="sglang"),
        pytest.param(LLAMACPP, "-hf r:q", 501, id="llamacpp"),
    ],
)
def test_no_metrics_without_the_launch_flag(
    account: Account, image: str, args: str, status: int
) -> None:
    pod = running(account, image=image, args=args)
    drive(account, pod, 1, 10)
    assert metrics(account, pod)[0] == status


def test_ollama_answers_carry_eval_count(account: Account) -> None:
    pod = running(account, image="ollama/ollama:0.35.1")
    pod.pulled.append("qwen3:8b")
    status, body = account.proxy(
        pod.id, 8080, "POST", "/api/generate", {"model": "qwen3:8b", "options": {"num_predict": 7}}
    )
    assert status == 200 and body["eval_count"] == 7 and body["eval_duration"] > 0
    assert metrics(account, pod)[0] == 200  # the generic answer: Ollama has no /metrics
    assert drive(account, pod, 2, 5)["served"] == 2


def test_comfyui_history_lists_executed_prompts_until_a_restart(account: Account) -> None:
    pod = running(account, image="pytorch/pytorch:2", env={"FRUTEBOX_PROVISION": "true"})
    drive(account, pod, 4, 1)
    assert len(account.proxy(pod.id, 8080, "GET", "/history", None)[1]) == 4
    account.pod_action(pod.id, "restart")
    account.read_pod(pod.id)
    assert account.proxy(pod.id, 8080, "GET", "/history", None)[1] == {}
    assert sum(row[3] for row in pod.served) == 4


def test_the_driver_refuses_bad_traffic(account: Account) -> None:
    pod = running(account, image=VLLM)
    with pytest.raises(ApiProblem, match="requests >= 0"):
        drive(account, pod, -1, 10)


def test_a_terminated_pod_keeps_its_billed_hours(account: Account, clock: ManualClock) -> None:
    pod = running(account, image=VLLM)
    clock.advance(2 * 3600)
    account.terminate_pod(pod.id)
    clock.advance(3600)
    body = pod_billing(account.pods.values(), {"bucketSize": ["hour"], "lastN": ["4"]}, clock.utc())
    ours = [r for r in body["records"] if r["podId"] == pod.id]
    assert round(sum(r["totalAmount"] for r in ours), 6) == round(2 * pod.cost_per_hour, 6)
