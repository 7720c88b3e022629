"""The sweep at the end of every `up`, under Pulumi's mocks: run once the volume and pods are in
place, told what the state records, never in a preview."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pulumi
import pytest

from frutebox_infra.deploy.requests import sweep_request
from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from tests.factories import real_registry, settings

OWNER = "0123456789abcdef"


class Mocks(pulumi.runtime.Mocks):
    """Answers each command like the deploy step would; remembers the functions called."""

    def __init__(self, said: str = "") -> None:
        self.calls: list[pulumi.runtime.MockCallArgs] = []
        self.said = said

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        state = dict(args.inputs)
        if args.name.endswith(("-volume", "-size")):
            state["stdout"] = json.dumps({"volumeId": "vol-1", "size": 17, "owner": OWNER})
        elif args.name.endswith("-pod"):
            state["stdout"] = json.dumps({"podId": f"pod-{args.name.removesuffix('-pod')}"})
        elif args.name.endswith("-seed"):
            state["stdout"] = json.dumps({"podId": "cpu-1", "volumeId": "vol-1", "state": "done"})
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[Any]]:
        self.calls.append(args)
        return {"stdout": "{}", "stderr": self.said}, []


def dev_plan() -> FleetPlan:
    return plan_fleet(real_registry(), settings(models=["qwen3-8b", "sdxl-1.0"]), stack="dev")


@pytest.fixture
def up() -> Iterator[Mocks]:
    mocks = Mocks(said="volume v9 ... deleting it so that it does not bill")
    pulumi.runtime.set_mocks(mocks, project="frutebox-infra", stack="dev", preview=False)
    yield mocks


@pytest.fixture
def preview() -> Iterator[Mocks]:
    mocks = Mocks()
    pulumi.runtime.set_mocks(mocks, project="frutebox-infra", stack="dev", preview=True)
    yield mocks


@pulumi.runtime.test
def test_an_up_sweeps_once_everything_is_in_place_told_what_the_state_records(up: Mocks) -> Any:
    from frutebox_infra.program.fleet import Credentials, declare_fleet

    plan = dev_plan()
    fleet = declare_fleet(plan, Credentials(runpod_api_key="rk-secret"))
    assert fleet.swept is not None

    def check(said: str) -> None:
        assert said == up.said  # what the step logged is shown on the stack
        [call] = up.calls
        assert call.token == "command:local:run"
        assert call.args["command"].endswith("frutebox_infra.runpod stack sweep")
        pods = [f"pod-{m}" for m in fleet.servers]
        expected = sweep_request(plan, volume_id="vol-1", owner=OWNER, pod_ids=pods)
        assert json.loads(call.args["stdin"]) == json.loads(expected.to_json())
        # The stack's key reaches the step as the resources' steps get it (endpoints.py).
        assert call.args["environment"] == {"FRUTEBOX_STACK_RUNPOD_API_KEY": "rk-secret"}

    return fleet.swept.apply(check)


@pulumi.runtime.test
def test_a_preview_never_sweeps(preview: Mocks) -> Any:
    from frutebox_infra.program.fleet import Credentials, declare_fleet

    fleet = declare_fleet(dev_plan(), Credentials())
    assert fleet.swept is None

    def check(_: Any) -> None:
        assert preview.calls == []

    return fleet.volume.volume_id.apply(check)
