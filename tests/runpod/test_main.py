"""The command entry in-process against the emulator: contract, env, secrets and every action."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from frutebox_infra.emulator.server import RunningEmulator
from tests.emulator_client import fault, live_pods, requests, state
from tests.factories import imported_packages
from tests.runpod.command import (
    OWNER,
    UNSEEN,
    candidate,
    env_for,
    pod_request,
    run,
    volume,
)
from tests.runpod.conftest import API_KEY, HF_TOKEN

RESULT_KEYS = {
    "applied",
    "podId",
    "name",
    "gpuId",
    "gpuCount",
    "candidateIndex",
    "candidatesTried",
    "dataCenterId",
    "costPerHour",
    "image",
    "url",
    "status",
    "volumeId",
    "ollamaModels",
    "meta",
}


def test_create_prints_exactly_the_result_contract(emulator: RunningEmulator) -> None:
    done = run("pod create", pod_request(volume(emulator)), env=env_for(emulator))
    assert done.code == 0, done.err
    result = done.result
    assert set(result) == RESULT_KEYS
    assert result["candidatesTried"] == [
        {"gpuId": "NVIDIA RTX A4000", "count": 1, "outcome": "created"}
    ]
    assert (result["status"], result["costPerHour"], result["candidateIndex"]) == (
        "RUNNING",
        0.17,
        0,
    )
    assert result["url"] == emulator.app.proxy_url_template.replace(
        "{podId}", result["podId"]
    ).replace("{port}", "8080")
    assert result["meta"] == {"model": "qwen3-8b", "stack": "dev"}
    # What an update rolls back to: the settings sent, the secret's value left out.
    assert result["applied"] == {
        "image": "img:1",
        "args": "--port 8080",
        "env": {"A": "1", "FRUTEBOX_OWNER": OWNER},
        "ports": ["8080/http"],
        "disk": 20,
        "secretEnv": ["HF_TOKEN"],
    }
    assert done.out.count("\n") == 1


def test_the_hf_token_is_filled_in_only_on_the_wire(emulator: RunningEmulator) -> None:
    assert run("pod create", pod_request(volume(emulator)), env=env_for(emulator)).code == 0
    posted = [r["body"] for r in requests(emulator, "pods.create")]
    assert posted[0]["env"] == {"A": "1", "FRUTEBOX_OWNER": OWNER, "HF_TOKEN": HF_TOKEN}


def test_without_an_hf_token_the_variable_is_left_out(emulator: RunningEmulator) -> None:
    request = pod_request(volume(emulator))
    request["candidates"][0]["env"]["HF_TOKEN"] = "placeholder"
    done = run("pod create", request, env=env_for(emulator, FRUTEBOX_HF_TOKEN=""))
    assert done.code == 0, done.err
    posted = [r["body"] for r in requests(emulator, "pods.create")]
    assert posted[0]["env"] == {"A": "1", "FRUTEBOX_OWNER": OWNER}


def test_a_secret_echoed_by_anything_is_redacted(emulator: RunningEmulator) -> None:
    request = pod_request(volume(emulator))
    request["candidates"][0]["image"] = HF_TOKEN  # absurd, but proves the safety net
    done = run("pod create", request, env=env_for(emulator))
    assert done.code == 0
    assert done.result["image"] == "***"


def test_secrets_are_redacted_from_errors_and_tracebacks_too(emulator: RunningEmulator) -> None:
    request = pod_request(volume(emulator))
    request["candidates"][0]["name"] = API_KEY  # lands in the error message verbatim
    done = run("pod create", request, env=env_for(emulator, FRUTEBOX_DEBUG="1"))
    assert done.code == 1
    assert "'***'" in done.err and "Traceback" in done.err


def test_a_missing_api_key_names_the_config_key_and_the_variable(
    emulator: RunningEmulator,
) -> None:
    done = run(
        "pod create", pod_request(volume(emulator)), env=env_for(emulator, RUNPOD_API_KEY="")
    )
    assert done.code == 1 and done.out == ""
    assert "frutebox-infra:runpodApiKey" in done.err and "RUNPOD_API_KEY" in done.err


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        pytest.param(lambda r: r.update(bogus=1), "bogus", id="unknown-key"),
        pytest.param(lambda r: r.update(candidates=[]), "candidates", id="no-candidates"),
        pytest.param(
            lambda r: r["candidates"][0].update(name="other"), "must match", id="name-mismatch"
        ),
        pytest.param(
            lambda r: r["candidates"][0].update(ports=["22/tcp"]),
            "8080/http",
            id="health-port-not-exposed",
        ),
        pytest.param(lambda r: r["candidates"][0].pop("gpu"), "gpu.id", id="no-gpu"),
        pytest.param(lambda r: r["health"].update(path="health"), "health.path", id="bad-path"),
    ],
)
def test_a_bad_request_is_one_paragraph_without_traceback(
    emulator: RunningEmulator, mutate: Callable[[dict[str, Any]], None], expected: str
) -> None:
    request = pod_request(volume(emulator))
    mutate(request)
    done = run("pod create", request, env=env_for(emulator))
    assert done.code == 1
    assert expected in done.err
    assert "Traceback" not in done.err
    assert done.err.startswith("error: ") and done.err.count("\n") == 1
    assert not requests(emulator, "pods.create")


def test_stdin_that_is_not_json_and_the_debug_traceback(emulator: RunningEmulator) -> None:
    plain = run("pod create", "{nope", env=env_for(emulator))
    assert plain.code == 1 and "not JSON" in plain.err and "Traceback" not in plain.err
    debug = run("pod create", "{nope", env=env_for(emulator, FRUTEBOX_DEBUG="1"))
    assert debug.code == 1 and "Traceback" in debug.err


def test_an_unexpected_exception_is_still_one_paragraph(emulator: RunningEmulator) -> None:
    def broken(request: httpx.Request) -> httpx.Response:
        raise RuntimeError("bug in a transport")

    done = run(
        "pod create", pod_request("v"), env=env_for(emulator), transport=httpx.MockTransport(broken)
    )
    assert done.code == 1
    assert "internal error" in done.err and "FRUTEBOX_DEBUG=1" in done.err


def test_env_timeouts_override_the_request(emulator: RunningEmulator) -> None:
    fault(emulator, {"op": "pods.create", "action": "never-healthy"})
    done = run(
        "pod create",
        pod_request(volume(emulator)),
        env=env_for(emulator, FRUTEBOX_HEALTH_TIMEOUT_S="0.2"),
    )
    assert done.code == 1
    assert "never became healthy" in done.err and "0.2s" in done.err
    assert [p["status"] for p in state(emulator)["pods"]] == ["TERMINATED"]


def test_a_bad_timeout_variable_is_named(emulator: RunningEmulator) -> None:
    done = run(
        "pod create", pod_request("v"), env=env_for(emulator, FRUTEBOX_RUNNING_TIMEOUT_S="soon")
    )
    assert done.code == 1 and "FRUTEBOX_RUNNING_TIMEOUT_S" in done.err


def test_delete_terminates_and_tolerates_gone_or_missing(emulator: RunningEmulator) -> None:
    env = env_for(emulator)
    first = run("pod create", pod_request(volume(emulator)), env=env).result
    done = run("pod delete", env=env, previous=first)
    assert (done.code, done.out.strip()) == (0, "{}")
    assert [p["status"] for p in state(emulator)["pods"]] == ["TERMINATED"]
    again = run("pod delete", env=env, previous=first)
    assert again.code == 0 and "already gone" in again.err
    assert run("pod delete", env=env).code == 0


def test_delete_refuses_a_previous_result_it_cannot_read(emulator: RunningEmulator) -> None:
    env = {**env_for(emulator), "PULUMI_COMMAND_STDOUT": "pod abc created"}
    done = run("pod delete", env=env)
    assert done.code == 1 and "PULUMI_COMMAND_STDOUT" in done.err


def test_the_command_and_the_emulator_never_import_pulumi() -> None:
    modules = ["frutebox_infra.runpod.__main__", "frutebox_infra.emulator.server"]
    assert imported_packages(modules, ["pulumi", "pulumi_command"]) == []


def test_the_command_starts_without_httpxs_cli_or_pydantic_settings() -> None:
    """Installed here (huggingface_hub brings click, pytest pygments), and no step uses them."""
    unused = ["click", "pygments", "pydantic_settings"]
    assert imported_packages(["frutebox_infra.runpod.__main__"], unused) == []


def test_hf_token_falls_back_to_hf_token_and_is_redacted(emulator: RunningEmulator) -> None:
    token = "hf_FROM_THE_ENVIRONMENT_0123456789"
    request = pod_request(volume(emulator))
    request["candidates"][0]["image"] = token  # echoed back in the result: must be masked
    done = run("pod create", request, env=env_for(emulator, FRUTEBOX_HF_TOKEN="", HF_TOKEN=token))
    assert done.code == 0, done.err
    assert token not in done.out + done.err and done.result["image"] == "***"
    assert requests(emulator, "pods.create")[0]["body"]["env"]["HF_TOKEN"] == token


def test_frutebox_hf_token_wins_over_hf_token(emulator: RunningEmulator) -> None:
    env = env_for(emulator, HF_TOKEN="hf_THE_OTHER_ONE_0123456789")
    assert run("pod create", pod_request(volume(emulator)), env=env).code == 0
    assert requests(emulator, "pods.create")[0]["body"]["env"]["HF_TOKEN"] == HF_TOKEN


def test_the_request_may_leave_the_running_timeout_out(emulator: RunningEmulator) -> None:
    request = pod_request(volume(emulator), timeouts={"healthySeconds": 60})
    env = env_for(emulator, FRUTEBOX_RUNNING_TIMEOUT_S="")
    assert run("pod create", request, env=env).code == 0


def test_our_orphan_is_terminated_and_a_foreign_pod_with_our_name_is_left(
    emulator: RunningEmulator,
) -> None:
    vid = volume(emulator)
    ours = candidate(vid, "NVIDIA RTX A4000")
    ours["env"] = {**ours["env"], "FRUTEBOX_OWNER": OWNER}
    orphan = emulator.app.account.create_pod(ours).id
    # Same name, same volume even, but another stack's token (or none): not ours.
    theirs = [
        emulator.app.account.create_pod({**candidate(vid, "NVIDIA RTX A4000"), "env": env}).id
        for env in ({"FRUTEBOX_OWNER": "someoneelse0000"}, {})
    ]
    other_volume = candidate(volume(emulator), "NVIDIA RTX A4000")
    other_volume["env"] = {"FRUTEBOX_OWNER": OWNER}
    theirs.append(emulator.app.account.create_pod(other_volume).id)
    done = run("pod create", pod_request(vid), env=env_for(emulator))
    assert done.code == 0, done.err
    live = sorted(p["id"] for p in live_pods(emulator))
    assert live == sorted([done.result["podId"], *theirs])
    assert f"pod {orphan}" in done.err and "orphan" in done.err
    assert all(f"pod {t}" in done.err and "leaving it alone" in done.err for t in theirs)


def test_a_201_that_cannot_be_read_is_adopted_not_left_billing(emulator: RunningEmulator) -> None:
    fault(emulator, {"op": "pods.create", "action": "return-201-malformed"})
    done = run("pod create", pod_request(volume(emulator)), env=env_for(emulator))
    assert done.code == 0, done.err
    assert [p["id"] for p in live_pods(emulator)] == [done.result["podId"]]
    assert done.result["candidatesTried"][0]["outcome"] == "adopted"
    assert len(requests(emulator, "pods.create")) == 1
    assert UNSEEN not in done.err  # the one ambiguous answer's pod is the one adopted


def test_a_delete_against_a_wrong_path_fails_instead_of_saying_already_gone(
    emulator: RunningEmulator,
) -> None:
    created = run("pod create", pod_request(volume(emulator)), env=env_for(emulator)).result
    wrong = env_for(emulator, RUNPOD_API_URL=emulator.url + "/api/wrong")
    done = run("pod delete", env=wrong, previous=created)
    assert done.code == 1 and "API URL is wrong" in done.err
    assert [p["id"] for p in live_pods(emulator)] == [created["podId"]]
    # RunPod's docs print the base with /v2: that works.
    slash_v2 = env_for(emulator, RUNPOD_API_URL=emulator.url + "/v2")
    assert run("pod delete", env=slash_v2, previous=created).code == 0
    assert live_pods(emulator) == []
