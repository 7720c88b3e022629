"""The engines' counters: they advance with traffic, show on /metrics only where the launch
turned them on, and start from zero when the container restarts, unless SGLang or vLLM count in
a prometheus_client multiprocess directory on the network volume; billing keeps a terminated
pod's hours."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from frutebox_infra.emulator.billing import pod_billing
from frutebox_infra.emulator.catalog import Catalog
from frutebox_infra.emulator.clock import ManualClock
from frutebox_infra.emulator.control import out_of_band
from frutebox_infra.emulator.errors import ApiProblem
from frutebox_infra.emulator.hub import Hub
from frutebox_infra.emulator.records import PodRecord, RawBody
from frutebox_infra.emulator.snapshot import restore, snapshot
from frutebox_infra.emulator.state import Account
from frutebox_infra.emulator.storage import Storage
from tests.emulator.conftest import network, pod_body
from tests.factories import real_registry

SGLANG = "lmsysorg/sglang:v0.5.21"
VLLM = "vllm/vllm-openai:v0.31.0-cu129"
LLAMACPP = "ghcr.io/ggml-org/llama.cpp:full-cuda-b11382"


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


COUNTED = "/workspace/frutebox/counters/m/sglang-v0.5.21"
MAKES_DIR = 'mkdir -p "$PROMETHEUS_MULTIPROC_DIR"'
REPO = "Qwen/Qwen3.6-27B-FP8"
"""A repo the emulated hub holds: a pod on a volume reads its weights (downloads them)."""


@pytest.fixture
def hub_account(clock: ManualClock) -> Account:
    storage = Storage(Hub.from_registry(real_registry()))
    return Account(Catalog.builtin(), clock=clock, storage=storage)


def sglang_script(*lines: str) -> str:
    engine = f"exec python3 -m sglang.launch_server --model-path {REPO} --enable-metrics"
    return shlex.join(["bash", "-c", "\n".join(["set -eo pipefail", *lines, engine])])


def counted_pod(account: Account, volume_id: str | None, **body: Any) -> PodRecord:
    fields: dict[str, Any] = {"image": SGLANG, "args": sglang_script(MAKES_DIR)}
    fields["env"] = {"PROMETHEUS_MULTIPROC_DIR": COUNTED, "HF_HOME": "/workspace/huggingface"}
    if volume_id is not None:
        fields["mounts"] = network(volume_id)
    return running(account, **(fields | body))


def volume_id(account: Account) -> str:
    return account.create_volume({"name": "w", "size": 20, "dataCenter": "EU-RO-1"}).id


def test_sglang_counting_in_a_volume_directory_carries_on_across_restarts_and_pods(
    hub_account: Account,
) -> None:
    account = hub_account
    vid = volume_id(account)
    pod = counted_pod(account, vid)
    drive(account, pod, 3, 100)
    account.pod_action(pod.id, "restart")
    account.read_pod(pod.id)
    assert metrics(account, pod)[1]["sglang:generation_tokens_total"] == 300
    drive(account, pod, 1, 50)
    account.terminate_pod(pod.id)
    # A new pod of the same model on the same volume reads the same files.
    after = counted_pod(account, vid)
    assert metrics(account, after)[1]["sglang:generation_tokens_total"] == 350
    # Another directory (another release) starts afresh.
    other_env = {"PROMETHEUS_MULTIPROC_DIR": COUNTED + "x", "HF_HOME": "/workspace/huggingface"}
    other = counted_pod(account, vid, env=other_env)
    assert metrics(account, other)[1]["sglang:generation_tokens_total"] == 0


def test_a_directory_off_the_volume_is_gone_with_the_container(account: Account) -> None:
    pod = counted_pod(account, None, env={"PROMETHEUS_MULTIPROC_DIR": "/tmp/prom"})
    drive(account, pod, 2, 10)
    account.pod_action(pod.id, "restart")
    account.read_pod(pod.id)
    assert metrics(account, pod)[1]["sglang:generation_tokens_total"] == 0


def test_sglang_without_its_metrics_ignores_the_directory(hub_account: Account) -> None:
    account = hub_account
    vid = volume_id(account)
    pod = counted_pod(account, vid, args=f"python3 -m sglang.launch_server --model-path {REPO}")
    assert not pod.crash_looping  # the directory is never read, so its absence is no matter
    assert metrics(account, pod)[0] == 404


@pytest.mark.parametrize(
    ("image", "args"),
    [
        pytest.param(SGLANG, sglang_script(), id="sglang-without-mkdir"),
        pytest.param(VLLM, f"{REPO} --port 8080", id="vllm"),
    ],
)
def test_a_missing_directory_fails_the_engine_at_start(
    hub_account: Account, image: str, args: str
) -> None:
    account = hub_account
    vid = volume_id(account)
    pod = counted_pod(account, vid, image=image, args=args)
    assert pod.crash_looping and "No such file or directory" in (pod.crash or "")
    assert account.proxy(pod.id, 8080, "GET", "/metrics", None)[0] == 502


def test_vllm_counts_on_in_a_directory_already_on_the_volume(hub_account: Account) -> None:
    account = hub_account
    vid = volume_id(account)
    counted_pod(account, vid)  # SGLang's launch made the directory: any engine may use it
    pod = counted_pod(account, vid, image=VLLM, args=f"{REPO} --port 8080")
    assert not pod.crash_looping
    drive(account, pod, 2, 7)
    account.pod_action(pod.id, "restart")
    account.read_pod(pod.id)
    assert metrics(account, pod)[1]["vllm:generation_tokens_total"] == 14


def test_the_volume_keeps_its_counter_directories_in_a_snapshot(
    hub_account: Account, clock: ManualClock
) -> None:
    account = hub_account
    vid = volume_id(account)
    drive(account, counted_pod(account, vid), 2, 5)
    again = restore(account.catalog, snapshot(account), None, account.realism, clock)
    assert again.volumes[vid].counter_dirs[COUNTED[len("/workspace/") :]]["tokens"] == 10
