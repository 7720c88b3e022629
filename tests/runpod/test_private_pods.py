"""A private pod (`exposure: private`): created with global networking and no published port,
so the deploy step cannot ask its health path; it waits for RunPod's RUNNING and a container
that stays up, still fails a crash loop fast, never probes the proxy, and a stack switching
between public and private is PATCHed in place (ports and globalNetworking), the same pod."""

from __future__ import annotations

from typing import Any

import pytest

from frutebox_infra.deploy.contract import PodRequest
from frutebox_infra.emulator.server import RunningEmulator
from frutebox_infra.plumbing.validation import validate
from frutebox_infra.runpod import errors
from frutebox_infra.runpod.pods import PodSecrets, prepare_candidates
from tests.emulator_client import fault, live_pods, requests
from tests.runpod.command import env_for, pod_request, run, volume

STEADY = {"FRUTEBOX_STEADY_S": "0.05", "FRUTEBOX_RESTART_CHECK_S": "0.01"}


def private(request: dict[str, Any]) -> dict[str, Any]:
    for body in request["candidates"]:
        body["ports"], body["globalNetworking"] = [], True
    return {**request, "private": True}


def public(request: dict[str, Any]) -> dict[str, Any]:
    for body in request["candidates"]:
        body["ports"] = [f"{request['health']['port']}/http"]
        body.pop("globalNetworking", None)
    return {k: v for k, v in request.items() if k != "private"}


def test_a_private_pod_is_created_networked_and_up_without_a_probe(
    emulator: RunningEmulator,
) -> None:
    env = env_for(emulator, **STEADY)
    done = run("pod create", private(pod_request(volume(emulator))), env=env)
    assert done.code == 0, done.err
    pod_id = done.result["podId"]
    assert done.result["url"] == f"http://{pod_id}.runpod.internal:8080"
    assert done.result["applied"]["globalNetworking"] is True
    assert "it is private (no published port)" in done.err and "not probed" in done.err
    [live] = live_pods(emulator)
    assert live["ports"] == [] and live["globalNetworking"]["enabled"] is True
    assert live["runtime"]["uptime"] >= 0.05
    assert not requests(emulator, "proxy")


def test_a_private_pod_that_crash_loops_fails_fast_and_is_terminated(
    emulator: RunningEmulator,
) -> None:
    env = env_for(emulator, FRUTEBOX_STEADY_S="30", FRUTEBOX_HEALTH_TIMEOUT_S="30",
                  FRUTEBOX_API_CHECK_S="0.02", FRUTEBOX_RESTART_CHECK_S="0.02")  # fmt: skip
    fault(emulator, {"op": "pods.create", "action": "crash-loop"})
    done = run("pod create", private(pod_request(volume(emulator))), env=env)
    assert done.code == 1 and "crash-loops" in done.err
    assert not live_pods(emulator)


def test_a_private_request_whose_body_publishes_a_port_is_refused() -> None:
    data = private(pod_request("vol-ours"))
    data["candidates"][0]["ports"] = ["8080/http"]
    with pytest.raises(errors.ConfigurationError, match="private pod but publishes"):
        prepare_candidates(validate(PodRequest, data), PodSecrets())
    data = private(pod_request("vol-ours"))
    del data["candidates"][0]["globalNetworking"]
    with pytest.raises(errors.ConfigurationError, match="lacks globalNetworking"):
        prepare_candidates(validate(PodRequest, data), PodSecrets())


def test_switching_public_to_private_and_back_patches_the_same_pod(
    emulator: RunningEmulator,
) -> None:
    env = env_for(emulator, **STEADY)
    request = pod_request(volume(emulator))
    first = run("pod create", request, env=env)
    assert first.code == 0, first.err
    hidden = run("pod update", private(request), env=env, previous=first.result)
    assert hidden.code == 0, hidden.err
    assert hidden.result["podId"] == first.result["podId"]
    assert hidden.result["url"].endswith(".runpod.internal:8080")
    [live] = live_pods(emulator)
    assert live["ports"] == [] and live["globalNetworking"]["enabled"] is True
    shown = run("pod update", public(request), env=env, previous=hidden.result)
    assert shown.code == 0, shown.err
    assert shown.result["podId"] == first.result["podId"] and "proxy" in shown.result["url"]
    patches = [r["body"] for r in requests(emulator, "pods.update")]
    assert patches == [
        {"ports": [], "globalNetworking": True},
        {"ports": ["8080/http"], "globalNetworking": False},
    ]
    [live] = live_pods(emulator)
    assert live["ports"] == ["8080/http"] and live["globalNetworking"]["enabled"] is False
    again = run("pod update", public(request), env=env, previous=shown.result)
    assert again.code == 0 and "nothing to change" in again.err


def test_a_switch_to_private_that_crash_loops_is_rolled_back_to_public(
    emulator: RunningEmulator,
) -> None:
    env = env_for(emulator, FRUTEBOX_STEADY_S="30", FRUTEBOX_API_CHECK_S="0.02",
                  FRUTEBOX_RESTART_CHECK_S="0.02")  # fmt: skip
    request = pod_request(volume(emulator))
    first = run("pod create", request, env=env).result
    fault(emulator, {"op": "pods.update", "action": "crash-loop"})
    done = run("pod update", private(request), env=env, previous=first)
    assert done.code == 1 and "The change was rolled back" in done.err
    patches = [r["body"] for r in requests(emulator, "pods.update")]
    assert patches[-1] == {"ports": ["8080/http"], "globalNetworking": False}
    [live] = live_pods(emulator)
    assert live["ports"] == ["8080/http"] and live["globalNetworking"]["enabled"] is False


def test_a_private_pod_found_without_global_networking_is_patched_and_restarted(
    emulator: RunningEmulator,
) -> None:
    env = env_for(emulator, **STEADY)
    request = private(pod_request(volume(emulator)))
    first = run("pod create", request, env=env).result
    # Its global networking lost (a hand edit, taking effect at its last restart).
    account = emulator.app.account
    account.pods[first["podId"]].networked = False
    account.pods[first["podId"]].body["globalNetworking"] = False
    done = run("pod update", request, env=env, previous=first)
    assert done.code == 0, done.err
    assert "restarting it, so that globalNetworking takes effect" in done.err
    assert [r["body"] for r in requests(emulator, "pods.update")] == [{"globalNetworking": True}]
    assert [r["body"] for r in requests(emulator, "pods.action")] == [{"action": "restart"}]
    [live] = live_pods(emulator)
    assert live["id"] == first["podId"] and live["globalNetworking"]["enabled"] is True
