"""Never pay for a pod that does not serve, on the real engine against the realistic emulator:
a crash-looping launch fails fast, a 5xx'd volume create leaves one volume, a read-only key
creates nothing, and a broken in-place change is rolled back."""

from __future__ import annotations

from typing import Any

import pytest

from frutebox_infra.emulator.keys import Scope
from tests.e2e.deployment import API_KEY, SMALL, Deployment
from tests.e2e.project import PulumiProject
from tests.e2e.test_status import status

pytestmark = pytest.mark.engine

QWEN = {**SMALL, "models": ["qwen3-8b"]}
READ_ONLY_KEY = "rk-e2e-readonly-4d1e"


def _output(proc: Any) -> str:
    return str(proc.stdout) + str(proc.stderr)


def test_a_crash_looping_launch_fails_within_the_bound_with_its_log_and_bills_nothing(
    deployment: Deployment,
) -> None:
    deployment.fault({"op": "pods.create", "action": "crash-loop"})
    deployment.project.write_stack("small", QWEN)
    up = deployment.project.up("small", check=False)
    assert up.returncode != 0
    out = _output(up)
    assert "crash-loops" in out and "the server exited during start-up" in out
    # Failed by the restarts it saw, not by running out the health deadline.
    assert "never became healthy" not in out
    assert "terminated so that it does not bill" in out
    assert deployment.live_pods() == []
    [pod] = [p for p in deployment.state()["pods"] if not p["emulator"]["foreign"]]
    assert pod["emulator"]["billed"][-1][1] is not None  # its billing interval is closed


def test_a_volume_create_answering_5xx_after_creating_leaves_exactly_one_volume(
    deployment: Deployment,
) -> None:
    # The create happens but answers 503; the listing shows it late, so the look right after
    # sees nothing and the retry creates a second: the sweep deletes the extra.
    deployment.fault({"op": "volumes.create", "action": "return-503-after-create"})
    deployment.project.write_stack("small", QWEN)
    up = deployment.project.up("small")
    assert "duplicate of" in _output(up)
    assert len(deployment.volumes()) == 1
    created = [r for r in deployment.requests("volumes.create")]
    assert [r["status"] for r in created] == [503, 201]
    [volume] = deployment.volumes()
    assert deployment.project.outputs("small")["volume"]["id"] == volume["id"]
    code, data, err = status(deployment.project, stack="small")
    assert code == 0, err
    assert data["untrackedVolumes"] == [] and data["inSync"]


def test_a_read_only_key_fails_before_anything_is_created_naming_its_source(
    project: PulumiProject,
) -> None:
    keys = {API_KEY: Scope.ALL, READ_ONLY_KEY: Scope.READ_ONLY}
    deployment = Deployment.start(project, api_keys=keys, any_key=False)
    try:
        project.extra_env.pop("RUNPOD_API_KEY")
        project.write_stack("small", QWEN)
        project.init("small")
        project.pulumi("config", "set", "--secret", "runpodApiKey", READ_ONLY_KEY,
                       "--stack", "small")  # fmt: skip
        up = project.up("small", check=False)
        assert up.returncode != 0
        out = _output(up)
        assert "stack secret frutebox-infra:runpodApiKey" in out and "may not write" in out
        assert "`pulumi up` and `pulumi destroy` the key needs write access" in out
        assert READ_ONLY_KEY not in out
        assert deployment.volumes() == [] and deployment.live_pods() == []
        assert [r["status"] for r in deployment.requests("volumes.create")] == [403]
        assert deployment.requests("pods.create") == []
    finally:
        deployment.stop()


def test_a_broken_in_place_change_is_rolled_back_and_the_pod_keeps_serving(
    deployment: Deployment,
) -> None:
    project = deployment.project
    project.write_stack("small", QWEN)
    project.up("small")
    [before] = deployment.live_pods()
    recorded = project.outputs("small")["pods"]["qwen3-8b"]["podId"]
    # An in-place change (the context is env) whose new container crash-loops.
    changed = {**QWEN, "overrides": {"qwen3-8b": {"context": 8192}}}
    project.write_stack("small", changed)
    deployment.fault({"op": "pods.update", "action": "crash-loop"})
    up = project.up("small", check=False)
    assert up.returncode != 0
    out = _output(up)
    assert "crash-loops" in out and "The change was rolled back" in out
    [after] = deployment.live_pods()
    assert after["id"] == before["id"] == recorded
    assert after["env"] == before["env"]  # the previous settings, secrets included
    assert project.outputs("small")["pods"]["qwen3-8b"]["podId"] == recorded
    probes = [r for r in deployment.requests("proxy") if r["pod"] == after["id"]]
    assert probes[-1]["status"] == 200  # serving again
    # The change itself, fixed (here: the fault is gone), goes through on the next `up`.
    project.up("small")
    [fixed] = deployment.live_pods()
    assert fixed["id"] == recorded and fixed["env"]["OLLAMA_CONTEXT_LENGTH"] == "8192"
