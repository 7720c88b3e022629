"""After an ambiguous create, on the real engine against the realistic emulator: what the create
made is looked for itself, for the whole window, so `up` leaves exactly one volume, one pod
and no seeding pod of ours, however late the listing shows it; and what an earlier run could
not see is swept by the next `up`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from frutebox_infra.deploy.requests import pod_name, seed_pod_name
from tests.e2e.deployment import SEEDED, SMALL, TIME_SCALE, TRANSFERS, Deployment
from tests.e2e.processes import wait_for
from tests.e2e.project import PulumiProject
from tests.e2e.test_status import status

pytestmark = pytest.mark.engine

QWEN = {**SMALL, "models": ["qwen3-8b"]}
LISTING_LAG_S = 5.0
"""The realistic account's listing lag, emulated seconds (realism.py)."""
LATE_S = 60.0
"""When the 503'd create's object lists, emulated seconds after that create: 30 s and more
after the retried create's object, which lists after the usual lag."""
LATER = 30.0
SEED_LATE_S = 100.0
"""Later still for a seeding pod: after its seeding (10 s start, 52 s of download) is over."""


def _output(proc: Any) -> str:
    return str(proc.stdout) + str(proc.stderr)


def _listed_at(record: dict[str, Any]) -> float:
    """When the listing shows a pod or volume of the emulator's state, emulated seconds."""
    own = record.get("emulator", record)
    created = own.get("created_wall", own.get("createdWall"))
    listed = own.get("listed_wall", own.get("listedWall"))
    real = listed if listed is not None else created + LISTING_LAG_S / TIME_SCALE
    return float(real) * TIME_SCALE


def _late_by(first: dict[str, Any], retried: dict[str, Any]) -> float:
    return _listed_at(first) - _listed_at(retried)


def _ours(deployment: Deployment, name: str) -> list[dict[str, Any]]:
    """Every pod of ours named `name` the account ever held, oldest first."""
    return [p for p in deployment.state()["pods"]
            if p["name"] == name and not p["emulator"]["foreign"]]  # fmt: skip


def test_a_503_d_volume_listed_30s_after_the_retried_one_leaves_one_volume(
    deployment: Deployment,
) -> None:
    deployment.fault({"op": "volumes.create", "action": "return-503-after-create",
                      "listAfterSeconds": LATE_S})  # fmt: skip
    deployment.project.write_stack("small", QWEN)
    up = deployment.project.up("small")
    every = [v for v in deployment.state()["volumes"] if not v["foreign"]]
    assert len(every) == 2, every  # the 503'd create did make one
    first, retried = every
    assert _late_by(first, retried) >= LATER
    [kept] = deployment.volumes()
    assert kept["id"] == retried["id"] and first["deleted"]
    assert deployment.project.outputs("small")["volume"]["id"] == kept["id"]
    assert f"volume {first['id']} is a duplicate of {kept['id']}" in _output(up)
    code, data, err = status(deployment.project, stack="small")
    assert code == 0, err
    assert data["untrackedVolumes"] == [] and data["inSync"]


def test_a_503_d_pod_listed_30s_after_the_retried_one_leaves_one_pod(
    deployment: Deployment,
) -> None:
    deployment.fault({"op": "pods.create", "action": "return-503-after-create",
                      "listAfterSeconds": LATE_S})  # fmt: skip
    deployment.project.write_stack("small", QWEN)
    up = deployment.project.up("small")
    first, retried = _ours(deployment, pod_name("small", "qwen3-8b"))
    assert _late_by(first, retried) >= LATER
    [live] = deployment.live_pods()
    assert live["id"] == retried["id"]
    assert deployment.project.outputs("small")["pods"]["qwen3-8b"]["podId"] == live["id"]
    assert f"pod {first['id']} is a duplicate of {live['id']}" in _output(up)
    code, data, err = status(deployment.project, stack="small")
    assert code == 0, err
    assert data["untracked"] == [] and data["inSync"]


@pytest.mark.parametrize("late_s", [LATE_S, SEED_LATE_S])
def test_a_503_d_seeding_pod_listed_30s_after_the_retried_one_leaves_none(
    project: PulumiProject, late_s: float
) -> None:
    # A CPU pod that starts in 10 s: the seeding is over before the 503'd pod lists.
    deployment = Deployment.start(project, transfers=replace(TRANSFERS, cpu_start_s=10.0))
    try:
        # With seeding on, the first pod created is the model's seeding CPU pod.
        deployment.fault({"op": "pods.create", "action": "return-503-after-create",
                          "listAfterSeconds": late_s})  # fmt: skip
        project.write_stack("small", {**SEEDED, "models": ["qwen3-8b"]})
        up = project.up("small")
        first, retried = _ours(deployment, seed_pod_name("small", "qwen3-8b"))
        assert "cpu" in first and _late_by(first, retried) >= LATER
        # Both seeding pods are gone; only the GPU pod lives.
        [live] = deployment.live_pods()
        assert live["name"] == pod_name("small", "qwen3-8b")
        assert f"pod {first['id']} is a duplicate of {retried['id']}" in _output(up)
        code, data, err = status(project, stack="small")
        assert code == 0, err
        assert data["untracked"] == [] and data["inSync"]
    finally:
        deployment.stop()


def test_a_later_up_sweeps_a_volume_of_the_stack_s_token_that_an_earlier_run_left(
    deployment: Deployment,
) -> None:
    # The 503'd volume lists long after the window: the first `up` says it never saw it...
    never_s = 1500.0
    deployment.fault({"op": "volumes.create", "action": "return-503-after-create",
                      "listAfterSeconds": never_s})  # fmt: skip
    project = deployment.project
    project.write_stack("small", QWEN)
    first_up = project.up("small")
    assert "was not seen" in _output(first_up)
    [kept] = [v for v in deployment.state()["volumes"] if not v["foreign"] and
              v["id"] == project.outputs("small")["volume"]["id"]]  # fmt: skip
    # ... then it lists, billing, and `frutebox status` names it untracked.
    clock = deployment.emulator.app.account.clock
    wait_for("the late volume to list", lambda: all(
        (v["listedWall"] or 0) <= clock.now() for v in deployment.volumes()
    ), timeout_s=2 * never_s / TIME_SCALE)  # fmt: skip
    code, data, _ = status(project, stack="small")
    [left] = data["untrackedVolumes"]
    assert code == 3
    assert left["id"] != kept["id"]
    foreign = [v["id"] for v in deployment.state()["volumes"] if v["foreign"]]
    # The next `up`, with nothing changed in the stack, deletes it and nothing else.
    second_up = project.up("small")
    assert left["id"] in _output(second_up)
    assert [v["id"] for v in deployment.volumes()] == [kept["id"]]
    assert [v["id"] for v in deployment.state()["volumes"] if v["foreign"] and
            not v["deleted"]] == foreign  # fmt: skip
    code, data, err = status(project, stack="small")
    assert code == 0, err
    assert data["untrackedVolumes"] == [] and data["inSync"]
