"""`stack sweep`, run at the end of every `up`: what the stack's token proves ours and its state
does not record is removed; what merely looks like ours, and what the state records, stays."""

from __future__ import annotations

from typing import Any

from frutebox_infra.deploy.contract import OWNER_ENV, SweepRequest
from frutebox_infra.emulator.server import RunningEmulator
from tests.emulator_client import fault, live_pods, state
from tests.runpod.command import POD_NAME, env_for, pod_request, run
from tests.runpod.conftest import OWNER

BASE = "frutebox-dev-weights"
SEED_NAME = "frutebox-dev-qwen3-8b-seed"


def create_volume(emulator: RunningEmulator, name: str) -> str:
    volume = {"name": name, "size": 50, "dataCenter": "EU-RO-1"}
    return emulator.app.account.create_volume(volume).id


def create_pod(emulator: RunningEmulator, name: str, volume_id: str, owner: str = OWNER) -> str:
    body = {
        "name": name,
        "image": "img:1",
        "ports": ["8080/http"],
        "gpu": {"id": "NVIDIA RTX A4000", "count": 1},
        "dataCenterIds": ["EU-RO-1"],
        "env": {OWNER_ENV: owner},
        "mounts": {"network": [{"volumeId": volume_id, "path": "/workspace"}]},
    }
    return emulator.app.account.create_pod(body).id


def sweep(emulator: RunningEmulator, volume_id: str, pod_ids: list[str]) -> Any:
    request = SweepRequest(volumeName=BASE, owner=OWNER, volumeId=volume_id, podIds=pod_ids,
                           names=[POD_NAME, SEED_NAME])  # fmt: skip
    return run("stack sweep", request.to_json(), env=env_for(emulator))


def live_volumes(emulator: RunningEmulator) -> set[str]:
    return {v["id"] for v in state(emulator)["volumes"] if not v["deleted"]}


def test_untracked_pods_and_volumes_of_the_stack_are_removed_and_nothing_else(
    emulator: RunningEmulator,
) -> None:
    ours = f"{BASE}-{OWNER}"
    kept = create_volume(emulator, ours)
    late = create_volume(emulator, ours)  # an ambiguous create's, listed after its window
    theirs = create_volume(emulator, BASE)  # named like ours, without our token
    other_token = create_volume(emulator, f"{BASE}-0123456789abcdef")
    recorded = create_pod(emulator, POD_NAME, kept)
    left_seed = create_pod(emulator, SEED_NAME, kept)  # a cancelled run's seeding pod
    left_pod = create_pod(emulator, POD_NAME, kept)
    foreign = create_pod(emulator, POD_NAME, kept, owner="someoneelse0000")
    disarmed = create_pod(emulator, "frutebox-dev-llama-3.2-1b", kept)  # its delete comes later
    done = sweep(emulator, kept, [recorded])
    assert done.code == 0, done.err
    assert done.result == {"terminatedPods": [left_seed, left_pod], "deletedVolumes": [late]}
    assert {p["id"] for p in live_pods(emulator)} == {recorded, foreign, disarmed}
    assert live_volumes(emulator) == {kept, theirs, other_token}
    assert f"volume {late} ({ours}, 50 GB) is named with this stack's token" in done.err
    assert f"pod {left_pod} ({POD_NAME}" in done.err and "(untracked)" in done.err


def test_with_nothing_left_it_says_so_and_removes_nothing(emulator: RunningEmulator) -> None:
    kept = create_volume(emulator, f"{BASE}-{OWNER}")
    recorded = create_pod(emulator, POD_NAME, kept)
    done = sweep(emulator, kept, [recorded])
    assert done.code == 0, done.err
    assert done.result == {"terminatedPods": [], "deletedVolumes": []}
    assert "no pod or volume of this stack is left" in done.err


def test_a_listing_that_fails_fails_the_step_saying_what_may_bill(
    emulator: RunningEmulator,
) -> None:
    kept = create_volume(emulator, f"{BASE}-{OWNER}")
    fault(emulator, {"op": "volumes.list", "action": "return-403"})
    done = sweep(emulator, kept, [])
    assert done.code == 1
    assert "looking for volumes of this stack" in done.err and "may bill" in done.err
    assert "--terminate-untracked" in done.err


def test_a_volume_a_pod_still_mounts_is_named_when_it_cannot_go(
    emulator: RunningEmulator,
) -> None:
    kept = create_volume(emulator, f"{BASE}-{OWNER}")
    late = create_volume(emulator, f"{BASE}-{OWNER}")
    create_pod(emulator, "someone-elses-pod", late, owner="someoneelse0000")
    done = sweep(emulator, kept, [])
    assert done.code == 1
    assert f"removing volume {late}" in done.err and "mounted by pod" in done.err


def test_only_the_stack_is_swept_and_it_is_only_swept(emulator: RunningEmulator) -> None:
    env = env_for(emulator)
    assert "`stack sweep`" in run("stack create", pod_request("v"), env=env).err
    assert "`stack sweep`" in run("pod sweep", pod_request("v"), env=env).err
