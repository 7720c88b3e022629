"""End to end: `python -m frutebox_infra.runpod` as a subprocess against the running emulator."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

from frutebox_infra.emulator.server import RunningEmulator
from tests.emulator_client import fault, live_pods, requests, state
from tests.factories import ROOT
from tests.runpod.command import (
    OWNER,
    POD_NAME,
    UNSEEN,
    Run,
    env_for,
    pod_request,
    volume,
)
from tests.runpod.conftest import API_KEY, HF_TOKEN

A4000, A5000, A40 = "NVIDIA RTX A4000", "NVIDIA RTX A5000", "NVIDIA A40"


def _launch(args: str, env: dict[str, str], previous: Any) -> dict[str, Any]:
    """How both `command` and `start_command` start the module: its argv, `env` on top of PATH
    alone (plus the previous result, as Pulumi passes it), run from the checkout, text I/O."""
    full = {"PATH": os.environ.get("PATH", ""), **env}
    if previous is not None:
        full["PULUMI_COMMAND_STDOUT"] = json.dumps(previous)
    argv = [sys.executable, "-m", "frutebox_infra.runpod", *args.split()]
    return {"args": argv, "env": full, "cwd": ROOT, "text": True}


def command(args: str, request: Any = None, *, env: dict[str, str], previous: Any = None) -> Run:
    done = subprocess.run(
        **_launch(args, env, previous),
        input="" if request is None else json.dumps(request),
        capture_output=True,
        timeout=60,
        check=False,
    )
    for secret in (API_KEY, HF_TOKEN):
        assert secret not in done.stdout, "a secret reached stdout"
        assert secret not in done.stderr, "a secret reached stderr"
    return Run(done.returncode, done.stdout, done.stderr)


def posted(emulator: RunningEmulator) -> list[tuple[str, int]]:
    return [(r["body"]["gpu"]["id"], r["status"]) for r in requests(emulator, "pods.create")]


def test_cheapest_out_of_stock_lands_on_the_next_candidate(
    emulator_factory: Callable[..., RunningEmulator],
) -> None:
    emulator = emulator_factory(stock={(A4000, "EU-RO-1"): 0, (A5000, "EU-RO-1"): 1})
    done = command("pod create", pod_request(volume(emulator), A4000, A5000), env=env_for(emulator))
    assert done.code == 0, done.err
    result = done.result
    assert (result["gpuId"], result["candidateIndex"], result["costPerHour"]) == (A5000, 1, 0.26)
    assert [c["outcome"] for c in result["candidatesTried"]] == ["no-capacity", "created"]
    assert posted(emulator) == [(A4000, 400), (A5000, 201)]


def test_all_out_of_stock_fails_and_leaves_no_pod(
    emulator_factory: Callable[..., RunningEmulator],
) -> None:
    emulator = emulator_factory(stock={})
    done = command(
        "pod create", pod_request(volume(emulator), A4000, A5000, A40), env=env_for(emulator)
    )
    assert done.code == 1 and done.out == ""
    assert "There are no longer any instances available" in done.err
    assert state(emulator)["pods"] == []
    assert [gpu for gpu, _ in posted(emulator)] == [A4000, A5000, A40]


def test_a_5xx_after_create_leaves_exactly_one_pod(emulator: RunningEmulator) -> None:
    fault(emulator, {"op": "pods.create", "action": "return-503-after-create"})
    done = command("pod create", pod_request(volume(emulator), A4000), env=env_for(emulator))
    assert done.code == 0, done.err
    pods = state(emulator)["pods"]
    assert len(pods) == 1 and pods[0]["status"] == "RUNNING"
    assert done.result["podId"] == pods[0]["id"]
    assert done.result["candidatesTried"][0]["outcome"] == "adopted"
    assert posted(emulator) == [(A4000, 503)]
    assert UNSEEN not in done.err  # the one ambiguous answer's pod is the one adopted


def test_a_429_is_retried_on_the_same_candidate(emulator: RunningEmulator) -> None:
    fault(emulator, {"op": "pods.create", "action": "return-429", "retryAfter": 0})
    done = command("pod create", pod_request(volume(emulator), A4000, A5000), env=env_for(emulator))
    assert done.code == 0, done.err
    assert posted(emulator) == [(A4000, 429), (A4000, 201)]
    assert done.result["gpuId"] == A4000


def test_a_pod_that_never_gets_healthy_is_terminated(emulator: RunningEmulator) -> None:
    fault(emulator, {"op": "pods.create", "action": "never-healthy"})
    done = command(
        "pod create",
        pod_request(volume(emulator)),
        env=env_for(emulator, FRUTEBOX_HEALTH_TIMEOUT_S="0.3"),
    )
    assert done.code == 1 and done.out == ""
    pod_id = state(emulator)["pods"][0]["id"]
    assert f"Pod {pod_id}" in done.err and "never became healthy" in done.err
    assert "/health" in done.err and "0.3s" in done.err and "terminated" in done.err
    assert live_pods(emulator) == []


def test_a_pod_in_error_is_terminated(emulator: RunningEmulator) -> None:
    fault(emulator, {"op": "pods.create", "action": "pod-error"})
    done = command("pod create", pod_request(volume(emulator)), env=env_for(emulator))
    assert done.code == 1 and "went to ERROR" in done.err
    assert live_pods(emulator) == []


def test_a_failed_ollama_pull_terminates_the_pod(emulator: RunningEmulator) -> None:
    fault(emulator, {"op": "pods.create", "action": "pull-fails"})
    request = pod_request(volume(emulator), port=11434, ollamaPull="qwen3:8b")
    done = command("pod create", request, env=env_for(emulator))
    assert done.code == 1 and "could not pull qwen3:8b" in done.err
    assert live_pods(emulator) == []


def test_an_ollama_pod_pulls_its_tag_once_it_answers(emulator: RunningEmulator) -> None:
    request = pod_request(volume(emulator), port=11434, ollamaPull="qwen3:8b")
    done = command("pod create", request, env=env_for(emulator))
    assert done.code == 0, done.err
    pulls = [r for r in requests(emulator, "proxy") if r["method"] == "POST"]
    assert [p["body"] for p in pulls] == [{"model": "qwen3:8b", "stream": True}]
    assert [p["status"] for p in pulls] == [200]
    assert not any(r["authorization"] for r in requests(emulator, "proxy"))


def test_create_update_delete_round_trip(emulator: RunningEmulator) -> None:
    env = env_for(emulator)
    request = pod_request(volume(emulator))
    created = command("pod create", request, env=env)
    assert created.code == 0, created.err
    request["candidates"][0]["env"]["LOG"] = "debug"
    updated = command("pod update", request, env=env, previous=created.result)
    assert updated.code == 0, updated.err
    assert updated.result["podId"] == created.result["podId"]
    deleted = command("pod delete", env=env, previous=updated.result)
    assert (deleted.code, deleted.out.strip()) == (0, "{}")
    assert live_pods(emulator) == []
    patch = [r["body"] for r in requests(emulator, "pods.update")]
    assert patch == [
        {"env": {"A": "1", "LOG": "debug", "FRUTEBOX_OWNER": OWNER, "HF_TOKEN": HF_TOKEN}}
    ]


def test_a_422_is_reported_with_its_errors_and_never_retried(emulator: RunningEmulator) -> None:
    request = pod_request(volume(emulator), A4000, A5000)
    request["candidates"][0]["gpu"]["count"] = 0
    done = command("pod create", request, env=env_for(emulator))
    assert done.code == 1
    assert "$.gpu.count: 0 is less than the minimum of 1" in done.err
    assert posted(emulator) == [(A4000, 422)]


def test_a_missing_key_fails_before_any_call(emulator: RunningEmulator) -> None:
    env = env_for(emulator)
    env.pop("RUNPOD_API_KEY")
    done = command("volume create", {"name": "w", "size": 10, "dataCenter": "EU-RO-1"}, env=env)
    assert done.code == 1 and "frutebox-infra:runpodApiKey" in done.err
    assert state(emulator)["requests"] == []


def test_usage_errors_exit_with_argparse_status(emulator: RunningEmulator) -> None:
    done = command("pod resize", env=env_for(emulator))
    assert done.code == 2 and "invalid choice" in done.err
    assert POD_NAME not in done.err


def start_command(args: str, request: Any, *, env: dict[str, str], previous: Any = None) -> Any:
    proc = subprocess.Popen(
        **_launch(args, env, previous),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(request))
    proc.stdin.close()
    proc.stdin = None  # written in full: communicate() must not touch it again
    return proc


def wait_for_health_probes(emulator: RunningEmulator, after: int = 0) -> None:
    deadline = time.monotonic() + 30
    while len(requests(emulator, "proxy")) <= after:
        assert time.monotonic() < deadline, "the command never started probing health"
        time.sleep(0.05)


def stop(proc: Any, sig: signal.Signals) -> Run:
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    return Run(proc.returncode, out, err)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_cancelled_create_terminates_its_pod_and_says_so(
    emulator: RunningEmulator, sig: signal.Signals
) -> None:
    fault(emulator, {"op": "pods.create", "action": "never-healthy"})
    env = env_for(emulator, FRUTEBOX_HEALTH_TIMEOUT_S="60")
    proc = start_command("pod create", pod_request(volume(emulator)), env=env)
    wait_for_health_probes(emulator)
    done = stop(proc, sig)
    assert done.code == 1 and done.out == ""
    assert f"Cancelled by {sig.name}" in done.err and "terminated" in done.err
    assert "Traceback" not in done.err
    assert live_pods(emulator) == []


def test_a_cancelled_update_leaves_the_recorded_pod(emulator: RunningEmulator) -> None:
    env = env_for(emulator, FRUTEBOX_HEALTH_TIMEOUT_S="60")
    request = pod_request(volume(emulator))
    first = command("pod create", request, env=env).result
    emulator.app.account.mark(first["podId"], "never-healthy")
    probes = len(requests(emulator, "proxy"))
    request["candidates"][0]["image"] = "img:2"
    proc = start_command("pod update", request, env=env, previous=first)
    wait_for_health_probes(emulator, after=probes)
    done = stop(proc, signal.SIGTERM)
    assert done.code == 1 and "Cancelled by SIGTERM" in done.err and "left running" in done.err
    assert [p["id"] for p in live_pods(emulator)] == [first["podId"]]
