"""Update: patch the recorded pod and wait for its restart, never kill it; replace a wrong GPU."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from frutebox_infra.emulator.server import RunningEmulator
from frutebox_infra.runpod import errors
from frutebox_infra.runpod.client import Pod
from frutebox_infra.runpod.lifecycle import Provisioner
from tests.emulator_client import fault, live_pods, requests
from tests.runpod.command import (
    HEALTH,
    HEALTH_URL,
    PULL_URL,
    TAGS_URL,
    TIMEOUTS,
    env_for,
    pod_request,
    run,
    volume,
)
from tests.runpod.conftest import Clock, FakeApi, ok, pod, pulled

BEFORE = Pod.model_validate(pod(status="RUNNING") | {"startedAt": "2026-01-01T00:00:00Z"})


def at(status: str, started: str | None = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    return pod(status=status) | {"startedAt": started}


def settle(provisioner: Provisioner, patched: dict[str, Any], tag: str | None = None) -> Pod:
    return provisioner.settle_update(
        BEFORE,
        Pod.model_validate(patched),
        health=HEALTH,
        ollama_tags=[tag] if tag else [],
        timeouts=TIMEOUTS,
        patched_at=provisioner.clock(),
    )


def test_after_a_patch_health_is_read_only_once_the_pod_restarted(
    provisioner: Provisioner, fake: FakeApi
) -> None:
    # The API keeps saying RUNNING for a while, with the old start time: the old process.
    fake.on(
        "GET",
        "/v2/pods/pod1",
        ok(200, at("RUNNING")),
        ok(200, at("RUNNING")),
        ok(200, at("STARTING", None)),
        ok(200, at("RUNNING", "2026-01-01T00:05:00Z")),
    )
    probed_while: list[int] = []

    def healthy(request: httpx.Request) -> httpx.Response:
        probed_while.append(len(fake.calls("GET", "/v2/pods/pod1")))
        return ok(200, {})

    fake.on("GET", HEALTH_URL, healthy)
    fake.on("POST", PULL_URL, pulled)
    fake.on("GET", TAGS_URL, ok(200, {"models": [{"name": "qwen3:8b"}]}))
    got = settle(provisioner, at("RUNNING"), tag="qwen3:8b")
    assert got.started_at == "2026-01-01T00:05:00Z"
    assert probed_while and min(probed_while) == 4  # not before the restart showed
    assert not fake.calls("DELETE")


def test_a_new_start_time_counts_as_the_restart(provisioner: Provisioner, fake: FakeApi) -> None:
    fake.on("GET", "/v2/pods/pod1", ok(200, at("RUNNING", "2026-01-01T00:05:00Z")))
    fake.on("GET", HEALTH_URL, ok(200, {}))
    settle(provisioner, at("RUNNING", "2026-01-01T00:05:00Z"))
    assert len(fake.calls("GET", "/health")) == 1


def test_an_uptime_shorter_than_the_time_since_the_patch_counts_as_the_restart(
    provisioner: Provisioner, fake: FakeApi, clock: Clock
) -> None:
    # Nothing documents that startedAt changes: runtime.uptime is what the v2 Pod promises.
    old = at("RUNNING") | {"runtime": {"uptime": 86400}}
    fake.on(
        "GET",
        "/v2/pods/pod1",
        ok(200, old),
        ok(200, at("RUNNING") | {"runtime": {"uptime": 1}}),
    )
    fake.on("GET", HEALTH_URL, ok(200, {}))
    settle(provisioner, old)
    # old process, restarted (up 1 s, 4 s after the PATCH), then the wait for RUNNING
    assert len(fake.calls("GET", "/v2/pods/pod1")) == 3
    assert len(fake.calls("GET", "/health")) == 1


def test_a_patch_that_never_shows_a_restart_fails_and_leaves_the_pod(
    provisioner: Provisioner, fake: FakeApi
) -> None:
    fake.on("GET", "/v2/pods/pod1", ok(200, at("RUNNING")))
    fake.on("GET", HEALTH_URL, ok(200, {}))
    with pytest.raises(errors.PodFailedError) as caught:
        settle(provisioner, at("RUNNING"))
    message = str(caught.value)
    assert "showed no restart within 30s" in message and "left running" in message
    assert not fake.calls("GET", "/health") and not fake.calls("DELETE")


@pytest.mark.parametrize("dead", ["never-healthy", "error", "cancelled"])
def test_a_patched_pod_that_does_not_serve_is_reported_not_terminated(
    provisioner: Provisioner, fake: FakeApi, dead: str
) -> None:
    def cancel(request: httpx.Request) -> httpx.Response:
        raise errors.Cancelled("Cancelled by SIGTERM before finishing.")

    after = {"never-healthy": ok(200, at("RUNNING", "new")), "error": ok(200, at("ERROR"))}
    fake.on("GET", "/v2/pods/pod1", after.get(dead, cancel))
    fake.on("GET", HEALTH_URL, ok(502, {}))
    fake.on("DELETE", "/v2/pods/pod1", ok(204))
    with pytest.raises(errors.PodFailedError) as caught:
        settle(provisioner, at("STARTING", None))
    assert "left running because the stack records it" in str(caught.value)
    assert not fake.calls("DELETE")


def test_update_patches_only_the_changed_fields_in_place(emulator: RunningEmulator) -> None:
    env = env_for(emulator)
    request = pod_request(volume(emulator), "NVIDIA RTX A4000", "NVIDIA RTX A5000")
    first = run("pod create", request, env=env).result
    request["candidates"][0]["image"] = "img:2"
    request["candidates"][1]["image"] = "img:2"
    done = run("pod update", request, env=env, previous=first)
    assert done.code == 0, done.err
    assert (done.result["podId"], done.result["image"]) == (first["podId"], "img:2")
    patches = [r["body"] for r in requests(emulator, "pods.update")]
    assert patches == [{"image": "img:2"}]
    again = run("pod update", request, env=env, previous=done.result)
    assert again.code == 0 and "nothing to change" in again.err
    assert len(requests(emulator, "pods.update")) == 1


def test_update_keeps_the_candidate_that_matches_the_running_gpu(
    emulator: RunningEmulator,
) -> None:
    env = env_for(emulator)
    vid = volume(emulator)
    fault(emulator, {"op": "pods.create", "action": "return-400-capacity"})
    request = pod_request(vid, "NVIDIA RTX A4000", "NVIDIA RTX A5000")
    first = run("pod create", request, env=env).result
    assert first["gpuId"] == "NVIDIA RTX A5000"
    request["candidates"][1]["args"] = "--port 8080 --tp 1"
    done = run("pod update", request, env=env, previous=first).result
    assert done["candidateIndex"] == 1 and done["candidatesTried"] == first["candidatesTried"]
    patches = [r["body"] for r in requests(emulator, "pods.update")]
    assert patches == [{"args": "--port 8080 --tp 1"}]


def test_update_of_a_pod_that_is_gone_creates_a_new_one(emulator: RunningEmulator) -> None:
    env = env_for(emulator)
    request = pod_request(volume(emulator))
    first = run("pod create", request, env=env).result
    emulator.app.account.terminate_pod(first["podId"])
    done = run("pod update", request, env=env, previous=first)
    assert done.code == 0, done.err
    assert done.result["podId"] != first["podId"]
    assert "no longer exists" in done.err


def test_update_without_a_previous_result_creates(emulator: RunningEmulator) -> None:
    done = run("pod update", pod_request(volume(emulator)), env=env_for(emulator))
    assert done.code == 0 and done.result["status"] == "RUNNING"


def test_update_with_nothing_to_patch_neither_waits_nor_kills(emulator: RunningEmulator) -> None:
    env = env_for(emulator, FRUTEBOX_HEALTH_TIMEOUT_S="0.2")
    request = pod_request(volume(emulator))
    first = run("pod create", request, env=env).result
    emulator.app.account.mark(first["podId"], "never-healthy")  # stops answering
    probes = len(requests(emulator, "proxy"))
    request["meta"] = {"model": "qwen3-8b", "stack": "dev", "note": "changed"}
    done = run("pod update", request, env=env, previous=first)
    assert done.code == 0, done.err
    assert (done.result["podId"], done.result["meta"]["note"]) == (first["podId"], "changed")
    assert len(requests(emulator, "proxy")) == probes and not requests(emulator, "pods.update")
    assert [p["id"] for p in live_pods(emulator)] == [first["podId"]]


def test_update_with_nothing_to_patch_pulls_a_changed_ollama_tag(
    emulator: RunningEmulator,
) -> None:
    env = env_for(emulator)
    request = pod_request(volume(emulator), port=11434, ollamaPull="qwen3:8b")
    first = run("pod create", request, env=env).result
    done = run("pod update", {**request, "ollamaPull": "qwen3:14b"}, env=env, previous=first)
    assert done.code == 0, done.err
    pulls = [r["body"]["model"] for r in requests(emulator, "proxy") if r["method"] == "POST"]
    assert pulls == ["qwen3:8b", "qwen3:14b"] and not requests(emulator, "pods.update")


def test_a_patched_pod_that_stops_serving_fails_the_update_but_is_kept(
    emulator: RunningEmulator,
) -> None:
    env = env_for(emulator, FRUTEBOX_HEALTH_TIMEOUT_S="0.2")
    request = pod_request(volume(emulator))
    first = run("pod create", request, env=env).result
    emulator.app.account.mark(first["podId"], "never-healthy")
    request["candidates"][0]["image"] = "img:broken"
    done = run("pod update", request, env=env, previous=first)
    assert done.code == 1 and done.out == ""
    assert "never became healthy" in done.err and "left running" in done.err
    assert [p["id"] for p in live_pods(emulator)] == [first["podId"]]
    assert [r["body"] for r in requests(emulator, "pods.update")] == [{"image": "img:broken"}]


def test_update_replaces_a_pod_whose_gpu_no_candidate_names(emulator: RunningEmulator) -> None:
    env = env_for(emulator)
    vid = volume(emulator)
    request = pod_request(vid, "NVIDIA RTX A4000")
    first = run("pod create", request, env=env).result
    request["candidates"][0]["gpu"]["count"] = 2
    request["candidates"][0]["args"] = "--port 8080 --tp 2"
    done = run("pod update", request, env=env, previous=first)
    assert done.code == 0, done.err
    assert done.result["podId"] != first["podId"] and done.result["gpuCount"] == 2
    assert "no candidate names" in done.err
    assert not requests(emulator, "pods.update")  # nothing patched onto the 1-GPU pod
    live = [(p["id"], p["gpu"]["count"]) for p in live_pods(emulator)]
    assert live == [(done.result["podId"], 2)]


def test_a_replacement_made_by_update_is_terminated_when_it_fails(
    emulator: RunningEmulator,
) -> None:
    env = env_for(emulator, FRUTEBOX_HEALTH_TIMEOUT_S="0.2")
    request = pod_request(volume(emulator), "NVIDIA RTX A4000")
    first = run("pod create", request, env=env).result
    fault(emulator, {"op": "pods.create", "action": "never-healthy"})
    moved = pod_request(first["volumeId"], "NVIDIA RTX A5000")
    done = run("pod update", moved, env=env, previous=first)
    assert done.code == 1 and "terminated so that it does not bill" in done.err
    assert live_pods(emulator) == []
