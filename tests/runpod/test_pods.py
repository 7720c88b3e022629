"""`pod create|update|delete`: candidates as sent, the running GPU's candidate, and the update
rules (patch the recorded pod in place; roll back a patch that does not serve; replace a GPU no
candidate names)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from frutebox_infra.deploy.contract import PodRequest
from frutebox_infra.emulator.server import RunningEmulator
from frutebox_infra.plumbing.validation import validate
from frutebox_infra.runpod import errors
from frutebox_infra.runpod.command_io import PreviousPod
from frutebox_infra.runpod.pods import (
    PodSecrets,
    applied_of,
    matching_candidate,
    prepare_candidates,
    rollback_patch,
)
from frutebox_infra.runpod.wire import Pod
from frutebox_infra.stack.serving_key import POD_KEY_ENV
from tests.emulator_client import fault, live_pods, requests
from tests.runpod.command import env_for, pod_request, run, volume
from tests.runpod.conftest import HF_TOKEN, OWNER, pod

VOLUME = "vol-ours"


def request_of(**overrides: Any) -> PodRequest:
    data = pod_request(VOLUME, "NVIDIA RTX A4000", "NVIDIA A40", **overrides)
    return validate(PodRequest, data)


def test_candidates_carry_our_name_token_and_the_hf_token_only_as_sent() -> None:
    request = request_of()
    bodies = prepare_candidates(request, PodSecrets(hf_token=HF_TOKEN))
    ours = {"A": "1", "FRUTEBOX_OWNER": OWNER, "HF_TOKEN": HF_TOKEN}
    assert [b["env"] for b in bodies] == [ours, ours]
    assert {b["name"] for b in bodies} == {request.name}
    assert "HF_TOKEN" not in request.candidates[0]["env"]  # the request itself is left alone


def test_without_an_hf_token_its_variable_is_dropped() -> None:
    request = request_of()
    request.candidates[0]["env"]["HF_TOKEN"] = "placeholder"
    assert "HF_TOKEN" not in prepare_candidates(request, PodSecrets(hf_token=""))[0]["env"]


@pytest.mark.parametrize(
    ("spoil", "expected"),
    [
        pytest.param(lambda c: c.update(name="other"), "must match", id="other-name"),
        pytest.param(lambda c: c.pop("gpu"), "no gpu.id", id="no-gpu"),
        pytest.param(lambda c: c.update(ports=["22/tcp"]), "8080/http", id="health-port-hidden"),
        pytest.param(
            lambda c: c.update(env={"FRUTEBOX_OWNER": "someoneelse"}), "owner token", id="theirs"
        ),
        pytest.param(lambda c: c.update(mounts={}), "does not mount", id="no-volume"),
        pytest.param(
            lambda c: c.update(mounts={"network": [{"volumeId": "theirs"}]}),
            "does not mount",
            id="other-volume",
        ),
    ],
)
def test_a_candidate_that_could_not_be_recognised_as_ours_is_refused(
    spoil: Callable[[dict[str, Any]], None], expected: str
) -> None:
    request = request_of()
    spoil(request.candidates[1])
    with pytest.raises(errors.ConfigurationError, match=expected) as caught:
        prepare_candidates(request, PodSecrets(hf_token=HF_TOKEN))
    assert "candidates[1]" in str(caught.value)


@pytest.mark.parametrize(
    ("gpu", "count", "expected"),
    [
        pytest.param("NVIDIA RTX A4000", 1, 0, id="first"),
        pytest.param("NVIDIA A40", 1, 1, id="second"),
        pytest.param("NVIDIA A40", 2, None, id="same-type-other-count"),
        pytest.param("NVIDIA H100", 1, None, id="named-by-none"),
    ],
)
def test_the_running_gpu_picks_its_candidate(gpu: str, count: int, expected: int | None) -> None:
    bodies = prepare_candidates(request_of(), PodSecrets(hf_token=HF_TOKEN))
    assert matching_candidate(bodies, Pod.model_validate(pod(gpu=gpu, count=count))) == expected


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


def test_a_patch_whose_container_crash_loops_is_rolled_back_and_the_pod_serves_again(
    emulator: RunningEmulator,
) -> None:
    env = env_for(emulator, FRUTEBOX_API_CHECK_S="0.02", FRUTEBOX_RESTART_CHECK_S="0.02")
    request = pod_request(volume(emulator))
    first = run("pod create", request, env=env).result
    fault(emulator, {"op": "pods.update", "action": "crash-loop"})
    request["candidates"][0]["args"] = "--port 8080 --broken"
    done = run("pod update", request, env=env, previous=first)
    assert done.code == 1 and done.out == ""
    assert "crash-loops" in done.err and "the server exited during start-up" in done.err
    assert "The change was rolled back" in done.err and "serves its previous settings" in done.err
    [live] = live_pods(emulator)
    assert live["id"] == first["podId"] and live["args"] == "--port 8080"
    patches = [r["body"] for r in requests(emulator, "pods.update")]
    assert patches == [{"args": "--port 8080 --broken"}, {"args": "--port 8080"}]
    # The rolled-back pod answers its health path again: it serves.
    proxy = [r for r in requests(emulator, "proxy") if r["pod"] == live["id"]]
    assert proxy[-1]["status"] == 200


def test_a_rollback_refills_the_secret_the_result_left_out(emulator: RunningEmulator) -> None:
    env = env_for(emulator, FRUTEBOX_API_CHECK_S="0.02", FRUTEBOX_RESTART_CHECK_S="0.02")
    request = pod_request(volume(emulator))
    first = run("pod create", request, env=env).result
    assert "HF_TOKEN" not in first["applied"]["env"]
    fault(emulator, {"op": "pods.update", "action": "crash-loop"})
    request["candidates"][0]["env"]["A"] = "2"
    done = run("pod update", request, env=env, previous=first)
    assert done.code == 1 and "rolled back" in done.err
    undo = [r["body"] for r in requests(emulator, "pods.update")][-1]
    assert undo == {"env": {"A": "1", "FRUTEBOX_OWNER": OWNER, "HF_TOKEN": HF_TOKEN}}


def test_a_pod_that_does_not_serve_after_its_rollback_either_is_terminated(
    emulator: RunningEmulator,
) -> None:
    env = env_for(emulator, FRUTEBOX_HEALTH_TIMEOUT_S="0.2")
    request = pod_request(volume(emulator))
    first = run("pod create", request, env=env).result
    emulator.app.account.mark(first["podId"], "never-healthy")  # the pod, whatever it runs
    request["candidates"][0]["image"] = "img:2"
    done = run("pod update", request, env=env, previous=first)
    assert done.code == 1 and done.out == ""
    assert "never became healthy" in done.err
    assert "did not make it serve either" in done.err and "terminated" in done.err
    assert live_pods(emulator) == []
    patches = [r["body"] for r in requests(emulator, "pods.update")]
    assert patches == [{"image": "img:2"}, {"image": "img:1"}]


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


def test_applied_keeps_the_in_place_settings_and_drops_the_secrets_values() -> None:
    body = {"image": "img:1", "args": "a", "env": {"A": "1", "HF_TOKEN": HF_TOKEN},
            "ports": ["8080/http"], "gpu": {"id": "NVIDIA A40"}}  # fmt: skip
    assert applied_of(body, ["HF_TOKEN"]) == {
        "image": "img:1",
        "args": "a",
        "env": {"A": "1"},
        "ports": ["8080/http"],
        "secretEnv": ["HF_TOKEN"],
    }


LIVE_POD = Pod.model_validate(pod() | {"env": {"A": "live", "FRUTEBOX_OWNER": OWNER}})


@pytest.mark.parametrize(
    ("applied", "token", "expected"),
    [
        pytest.param({"env": {"A": "1"}, "args": "x", "secretEnv": ["HF_TOKEN"]}, HF_TOKEN,
                     {"env": {"A": "1", "HF_TOKEN": HF_TOKEN}}, id="recorded-secret-refilled"),
        pytest.param({"env": {"A": "1"}, "secretEnv": ["HF_TOKEN"]}, "", {"env": {"A": "1"}},
                     id="recorded-no-token"),
        pytest.param(None, HF_TOKEN, {"env": {"A": "live", "FRUTEBOX_OWNER": OWNER}},
                     id="nothing-recorded-the-live-pod"),
    ],
)  # fmt: skip
def test_a_rollback_undoes_exactly_what_the_patch_changed(
    applied: dict[str, Any] | None, token: str, expected: dict[str, Any]
) -> None:
    previous = PreviousPod(podId="pod1", applied=applied)
    secrets = PodSecrets(hf_token=token)
    assert rollback_patch({"env": {"A": "2"}}, previous, LIVE_POD, secrets) == expected


def test_a_patch_nothing_recorded_can_undo_has_no_rollback() -> None:
    previous = PreviousPod(podId="pod1", applied={"args": "x", "secretEnv": []})
    assert rollback_patch({"image": "img:2"}, previous, LIVE_POD.model_copy(
        update={"image": None}), PodSecrets()) is None  # fmt: skip


def test_the_serving_key_fills_the_gateway_s_variable_and_never_the_record() -> None:
    key = "s" * 43
    request = request_of(servingKeyEnv=[POD_KEY_ENV])
    bodies = prepare_candidates(request, PodSecrets(hf_token=HF_TOKEN, serving_key=key))
    assert {b["env"][POD_KEY_ENV] for b in bodies} == {key}
    assert bodies[0]["env"]["HF_TOKEN"] == HF_TOKEN  # each variable its own secret
    applied = applied_of(bodies[0], [*request.hfTokenEnv, *request.servingKeyEnv])
    assert POD_KEY_ENV not in applied["env"] and key not in json.dumps(applied)
    assert POD_KEY_ENV in applied["secretEnv"]  # a rollback fills it again


@pytest.mark.parametrize("key", ["", "short", "x" * 40 + " y"])
def test_a_gateway_pod_is_never_started_without_a_usable_key(key: str) -> None:
    request = request_of(servingKeyEnv=[POD_KEY_ENV])
    with pytest.raises(errors.ConfigurationError, match="runs a gateway") as caught:
        prepare_candidates(request, PodSecrets(serving_key=key))
    assert "frutebox-infra:servingKey" in str(caught.value)
    assert not key or key not in str(caught.value)


def test_a_rollback_refills_the_serving_key_in_force() -> None:
    previous = PreviousPod(
        podId="pod1", applied={"env": {"A": "1"}, "secretEnv": ["HF_TOKEN", POD_KEY_ENV]}
    )
    secrets = PodSecrets(hf_token=HF_TOKEN, serving_key="n" * 43)
    undo = rollback_patch({"env": {"A": "2"}}, previous, LIVE_POD, secrets)
    assert undo == {"env": {"A": "1", "HF_TOKEN": HF_TOKEN, POD_KEY_ENV: "n" * 43}}


def test_rotating_the_key_patches_only_the_gateway_s_variable_and_prints_no_key(
    emulator: RunningEmulator,
) -> None:
    old, new = "o" * 43, "n" * 43
    request = pod_request(volume(emulator), servingKeyEnv=[POD_KEY_ENV])
    first = run("pod create", request, env=env_for(emulator, FRUTEBOX_STACK_SERVING_KEY=old))
    assert first.code == 0, first.err
    done = run("pod update", request, env=env_for(emulator, FRUTEBOX_STACK_SERVING_KEY=new),
               previous=first.result)  # fmt: skip
    assert done.code == 0, done.err
    assert done.result["podId"] == first.result["podId"]  # in place, not a new pod
    patches = [r["body"] for r in requests(emulator, "pods.update")]
    assert [sorted(p) for p in patches] == [["env"]]
    assert patches[0]["env"][POD_KEY_ENV] == new
    for printed in (first.out, first.err, done.out, done.err):
        assert old not in printed and new not in printed
