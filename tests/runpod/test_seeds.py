"""`seed create|update|delete`: a CPU pod on the stack's volume runs the seeder, is followed to
the end and always terminated; a model that failed fails the command with its reason and fix."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from frutebox_infra.deploy.contract import SeedRequest
from frutebox_infra.deploy.requests import seed_request
from frutebox_infra.emulator.catalog import Catalog
from frutebox_infra.emulator.realism import Kind, Realism
from frutebox_infra.emulator.server import RunningEmulator, start
from frutebox_infra.emulator.transfers import Transfers
from frutebox_infra.planner.plan import plan_fleet
from frutebox_infra.plumbing.validation import validate, validate_json
from frutebox_infra.runpod.errors import Cancelled, ConfigurationError
from frutebox_infra.runpod.seeds import prepare_bodies
from frutebox_infra.seeding.protocol import PLAN_ENV, PROGRAM_ENV, SeedPlan
from frutebox_infra.stack.environment import Environment
from tests.emulator_client import fault, hub, live_pods, requests
from tests.factories import real_registry, settings
from tests.runpod.command import env_for, run, volume
from tests.runpod.conftest import API, HF_TOKEN, OWNER, PROXY, FakeApi, ok

QWEN = "qwen-3.6-27b"
GATED = "stable-audio-open-1.0"


def request_for(volume_id: str, model_id: str = QWEN, **keys: Any) -> dict[str, Any]:
    plan = plan_fleet(
        real_registry(),
        settings(models=[model_id], **keys),
        stack="dev",
        environment=Environment(hf_token=True),
    )
    data: dict[str, Any] = json.loads(
        seed_request(plan, model_id, volume_id=volume_id, owner=OWNER).to_json()
    )
    return data


def created(emulator: RunningEmulator) -> list[dict[str, Any]]:
    return [r["body"] for r in requests(emulator, "pods.create") if r["status"] == 201]


def test_a_seed_places_the_weights_and_terminates_its_pod(emulator: RunningEmulator) -> None:
    vid = volume(emulator)
    done = run("seed create", request_for(vid), env=env_for(emulator))
    assert done.code == 0, done.err
    result = done.result
    assert (result["state"], result["volumeId"], result["cpuId"], result["vcpus"]) == (
        "done", vid, "cpu3c", 2,
    )  # fmt: skip
    [model] = result["models"]
    assert model["modelId"] == QWEN and model["state"] == "done"
    assert model["bytesDone"] == model["bytesTotal"] > 30e9
    assert live_pods(emulator) == []  # the seeding pod is gone
    [body] = created(emulator)
    assert body["cpu"] == {"id": "cpu3c", "vcpuCount": 2} and "gpu" not in body
    assert body["env"]["FRUTEBOX_OWNER"] == OWNER and "HF_TOKEN" not in body["env"]
    assert validate_json(SeedPlan, body["env"][PLAN_ENV]).jobs[0].modelId == QWEN
    assert "seeding pod" in done.err and "terminated" in done.err
    files = emulator.app.account.volumes[vid].files
    assert sum(size for size, _ in files.values()) == model["bytesTotal"]


def test_a_gated_seed_gets_the_token_and_without_one_fails_with_the_fix(
    emulator: RunningEmulator,
) -> None:
    vid = volume(emulator)
    done = run("seed create", request_for(vid, GATED), env=env_for(emulator))
    assert done.code == 0, done.err
    assert created(emulator)[-1]["env"]["HF_TOKEN"] == HF_TOKEN
    other = volume(emulator)
    failed = run("seed create", request_for(other, GATED), env=env_for(emulator,
                 FRUTEBOX_HF_TOKEN=""))  # fmt: skip
    assert failed.code == 1 and failed.out == ""
    assert f"Seeding {GATED} failed: stabilityai/stable-audio-open-1.0 is gated" in failed.err
    assert "Fix: set the stack secret frutebox-infra:hfToken" in failed.err
    assert "HF_TOKEN" not in created(emulator)[-1]["env"]


def test_a_missing_source_fails_its_model_and_leaves_nothing_billing(
    emulator: RunningEmulator,
) -> None:
    hub(emulator, {"repo": "Qwen/Qwen3.6-27B-FP8", "remove": True})
    done = run("seed create", request_for(volume(emulator)), env=env_for(emulator))
    assert done.code == 1 and done.out == ""
    assert f"Seeding {QWEN} failed: Qwen/Qwen3.6-27B-FP8 was not found" in done.err
    assert "Fix: correct the repo in the model's source in registry/models.yaml" in done.err
    assert "was terminated and no GPU pod was created for" in done.err
    assert live_pods(emulator) == []


def test_the_next_flavor_takes_over_when_the_first_has_no_capacity(
    emulator: RunningEmulator,
) -> None:
    fault(emulator, {"op": "pods.create", "action": "return-400-capacity"})
    done = run("seed create", request_for(volume(emulator)), env=env_for(emulator))
    assert done.code == 0, done.err
    assert done.result["cpuId"] == "cpu3g" and done.result["candidateIndex"] == 1
    assert [a["outcome"] for a in done.result["candidatesTried"]] == ["no-capacity", "created"]


def test_an_update_on_the_same_volume_moves_nothing_and_a_new_volume_seeds_again(
    emulator: RunningEmulator,
) -> None:
    vid = volume(emulator)
    first = run("seed create", request_for(vid), env=env_for(emulator)).result
    again = run("seed update", request_for(vid, seedTimeoutSeconds=9000), env=env_for(emulator),
                previous=first)  # fmt: skip
    assert again.code == 0 and again.result == first and "nothing to do" in again.err
    assert len(created(emulator)) == 1
    other = volume(emulator)
    moved = run("seed update", request_for(other), env=env_for(emulator), previous=first)
    assert moved.code == 0 and moved.result["volumeId"] == other
    assert len(created(emulator)) == 2


def test_delete_keeps_the_weights_and_removes_a_seeding_pod_still_there(
    emulator: RunningEmulator,
) -> None:
    vid = volume(emulator)
    first = run("seed create", request_for(vid), env=env_for(emulator)).result
    gone = run("seed delete", env=env_for(emulator), previous=first)
    assert gone.code == 0 and "already gone" in gone.err and "stay on the volume" in gone.err
    body = prepare_bodies(validate(SeedRequest, request_for(vid)), "")[0]
    left = emulator.app.account.create_pod(body)  # as a crashed run would leave it
    removed = run("seed delete", env=env_for(emulator), previous={**first, "podId": left.id})
    assert removed.code == 0 and f"seeding pod {left.id} terminated" in removed.err
    assert live_pods(emulator) == [] and emulator.app.account.volumes[vid].files


def test_a_seed_that_outlives_its_deadline_fails_and_its_pod_goes() -> None:
    slow = Realism(kind=Kind.FAST, quotas=(), transfers=Transfers(download_mb_per_s=0.001))
    emulator = start(catalog=Catalog.builtin(), realism=slow)
    try:
        done = run("seed create", request_for(volume(emulator)),
                   env=env_for(emulator, FRUTEBOX_SEED_TIMEOUT_S="0.3"))  # fmt: skip
        assert done.code == 1
        assert f"Seeding {QWEN} failed: seeding did not finish within 0.3s" in done.err
        assert "frutebox-infra:seedTimeoutSeconds" in done.err
        assert live_pods(emulator) == []
    finally:
        emulator.stop()


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        pytest.param(lambda r: r.update(plan={"jobs": []}), "plan cannot be sent", id="bad-plan"),
        pytest.param(lambda r: r["pod"].update(mounts={}), "does not mount", id="no-volume"),
        pytest.param(lambda r: r["pod"].update(ports=["22/tcp"]), "does not expose 8080",
                     id="status-port-hidden"),
    ],
)  # fmt: skip
def test_a_request_that_cannot_be_sent_is_refused_before_any_create(
    spoil: Any, message: str
) -> None:
    data = request_for("vol-1")
    spoil(data)
    with pytest.raises(ConfigurationError, match=message):
        prepare_bodies(validate(SeedRequest, data), HF_TOKEN)


def test_the_bodies_carry_the_seeder_its_plan_and_one_flavor_each() -> None:
    bodies = prepare_bodies(validate(SeedRequest, request_for("vol-1")), HF_TOKEN)
    assert [b["cpu"]["id"] for b in bodies] == ["cpu3c", "cpu3g"]
    assert all(PROGRAM_ENV in b["env"] and b["args"].startswith("python3 -u -c") for b in bodies)


# --- scripted RunPod: what the emulator does not do -----------------------------------------

STATUS_URL = PROXY.replace("{podId}", "pod1").replace("{port}", "8080") + "/status"


def cpu_pod(status: str, started: str = "2026-11-30T12:00:00Z") -> dict[str, Any]:
    return {"id": "pod1", "name": "frutebox-dev-qwen-3.6-27b-seed", "status": status,
            "startedAt": started, "env": {"FRUTEBOX_OWNER": OWNER}, "cost": 0.06,
            "mounts": {"network": [{"volumeId": "vol-1", "path": "/workspace"}]}}  # fmt: skip


def running_status(done: int = 0) -> httpx.Response:
    job = {"modelId": QWEN, "state": "running", "bytesDone": done, "bytesTotal": 10**10}
    return ok(200, {"version": 1, "state": "running", "startedAt": "t", "updatedAt": "t",
                    "jobs": [job]})  # fmt: skip


def scripted(fake: FakeApi, *reads: dict[str, Any]) -> dict[str, str]:
    fake.on("GET", "/v2/pods", ok(200, {"pods": []}))
    fake.on("POST", "/v2/pods", ok(201, cpu_pod("PROVISIONING")))
    fake.on("GET", "/v2/pods/pod1", *(ok(200, r) for r in reads))
    fake.on("DELETE", "/v2/pods/pod1", ok(204))
    return {
        "RUNPOD_API_URL": API, "RUNPOD_API_KEY": "rpa_TESTKEY_0123456789abcdef",
        "RUNPOD_PROXY_URL_TEMPLATE": PROXY, "FRUTEBOX_POLL_INTERVAL_S": "0.001",
        "FRUTEBOX_API_CHECK_S": "0", "FRUTEBOX_RESTART_CHECK_S": "0",
        "FRUTEBOX_RETRY_BACKOFF_S": "0",
    }  # fmt: skip


def test_a_seeder_that_keeps_restarting_without_progress_fails_and_is_terminated(
    fake: FakeApi,
) -> None:
    # Each read shows a container started anew (RunPod's startedAt and runtime.uptime).
    reads = [
        {**cpu_pod("RUNNING", f"2026-11-30T12:0{i}:00Z"), "runtime": {"uptime": 2}}
        for i in range(6)
    ]
    env = scripted(fake, *reads)
    fake.on("GET", STATUS_URL, running_status(0))
    fake.on("GET", "/v2/pods/pod1/logs", httpx.Response(200, content=b""))
    done = run("seed create", request_for("vol-1"), env=env, transport=httpx.MockTransport(fake))
    assert done.code == 1 and "crash-loops" in done.err
    assert "restarted its container 3 time(s) without a new byte in place" in done.err
    assert fake.calls("DELETE", "/v2/pods/pod1")


def test_a_seeding_pod_that_dies_fails_and_is_terminated(fake: FakeApi) -> None:
    env = scripted(fake, cpu_pod("RUNNING"), cpu_pod("EXITED"))
    fake.on("GET", STATUS_URL, httpx.Response(502))
    fake.on("GET", "/v2/pods/pod1/logs", httpx.Response(200, content=b""))
    done = run("seed create", request_for("vol-1"), env=env, transport=httpx.MockTransport(fake))
    assert done.code == 1 and "went to EXITED while seeding" in done.err
    assert fake.calls("DELETE", "/v2/pods/pod1")


def test_a_cancelled_seed_terminates_its_pod(fake: FakeApi) -> None:
    env = scripted(fake, cpu_pod("RUNNING"))

    def cancel(request: httpx.Request) -> httpx.Response:
        raise Cancelled("Cancelled by SIGTERM before finishing.")

    fake.on("GET", STATUS_URL, cancel)
    done = run("seed create", request_for("vol-1"), env=env, transport=httpx.MockTransport(fake))
    assert done.code == 1 and "Cancelled" in done.err
    assert fake.calls("DELETE", "/v2/pods/pod1")
