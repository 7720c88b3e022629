"""The Pulumi shell under Pulumi's mocks: which resources a plan declares, with which inputs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pulumi
import pytest

from frutebox_infra.deploy.requests import (
    pod_request,
    seed_fingerprint,
    seed_request,
    seeded_ids,
)
from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.stack.endpoints import STEP_STACK_KEY_ENV
from frutebox_infra.stack.stack_file import parse_settings
from tests.factories import SECRET_SIG, SECRET_SIG_VALUE, real_registry

OWNER = "0123456789abcdef"
MINTED = "m" * 43
"""What the mocked mint command prints."""


class Recorder(pulumi.runtime.Mocks):
    """Answers each registration like the deploy step would, and remembers what was declared."""

    def __init__(self) -> None:
        self.resources: dict[str, pulumi.runtime.MockResourceArgs] = {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.resources[args.name] = args
        state = dict(args.inputs)
        if args.typ == "command:local:Command":
            if args.name == "serving-key":
                state["stdout"] = MINTED
            elif args.name.endswith(("-volume", "-size")):
                state["stdout"] = json.dumps({"volumeId": "vol-123", "size": 17, "owner": OWNER})
            elif args.name.endswith("-seed"):
                state["stdout"] = json.dumps(
                    {"podId": "cpu-1", "volumeId": "vol-123", "state": "done"}
                )
            else:
                model = args.name.removesuffix("-pod")
                state["stdout"] = json.dumps(
                    {"podId": f"pod-{model}", "gpuId": "NVIDIA RTX A4000", "gpuCount": 1,
                     "costPerHour": 0.17, "url": f"https://pod-{model}-8080.example"}
                )  # fmt: skip
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[Any]]:
        return {}, []


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    mocks = Recorder()
    pulumi.runtime.set_mocks(mocks, project="frutebox-infra", stack="dev", preview=False)
    yield mocks


def dev_plan(**overrides: Any) -> FleetPlan:
    config = {"models": ["qwen3-8b", "sdxl-1.0"], "dataCenter": "EU-RO-1",
              "budgetUsdPerHour": 5, **overrides}  # fmt: skip
    settings = parse_settings(config, where="test")
    return plan_fleet(real_registry(), settings, stack="dev")


@pulumi.runtime.test
def test_plan_declares_a_protected_volume_and_one_server_per_model(recorder: Recorder) -> Any:
    from frutebox_infra.program.fleet import Credentials, declare_fleet

    plan = dev_plan()
    fleet = declare_fleet(plan, Credentials(runpod_api_key="rk-secret", hf_token=None))

    def check(_: Any) -> None:
        res = recorder.resources
        assert res["weights"].typ == "frutebox:index:WeightsVolume"
        assert res["qwen3-8b"].typ == "frutebox:index:ModelServer"
        assert res["sdxl-1.0"].typ == "frutebox:index:ModelServer"
        volume = res["weights-volume"]
        assert json.loads(volume.inputs["stdin"]) == {
            "name": "frutebox-dev-weights", "size": plan.volume.size_gb, "dataCenter": "EU-RO-1",
            "type": "STANDARD",
        }  # fmt: skip
        assert volume.inputs["triggers"] == ["EU-RO-1", "STANDARD"]
        assert volume.inputs["create"].endswith("frutebox_infra.runpod volume create")
        size = res["weights-size"]
        assert json.loads(size.inputs["stdin"]) == {
            "volumeId": "vol-123",
            "size": plan.volume.size_gb,
        }
        assert size.inputs["update"].endswith("frutebox_infra.runpod volume grow")
        assert set(res) == {"serving-key", "weights", "weights-volume", "weights-size",
                            "qwen3-8b", "qwen3-8b-pod", "qwen3-8b-seed", "sdxl-1.0",
                            "sdxl-1.0-pod", "sdxl-1.0-seed"}  # fmt: skip

    return pulumi.Output.all(*(s.pod_id for s in fleet.servers.values())).apply(check)


@pulumi.runtime.test
def test_pod_stdin_is_the_plan_request_with_the_volume_id(recorder: Recorder) -> Any:
    from frutebox_infra.program.fleet import Credentials, declare_fleet

    plan = dev_plan()
    fleet = declare_fleet(plan, Credentials())
    model = plan.model("qwen3-8b")
    assert model is not None

    def check(_: Any) -> None:
        pod = recorder.resources["qwen3-8b-pod"]
        request = json.loads(pod.inputs["stdin"])
        expected = pod_request(
            model,
            plan.settings,
            stack="dev",
            volume_id="vol-123",
            owner=OWNER,
            seeded=seeded_ids(plan),
        )
        assert request == json.loads(expected.to_json())
        body = request["candidates"][0]
        assert body["mounts"] == {"network": [{"volumeId": "vol-123", "path": "/workspace"}]}
        # Ours provably: the stack's token in the env, the stack's volume mounted.
        assert body["env"]["FRUTEBOX_OWNER"] == OWNER == request["owner"]
        assert body["gpu"] == {
            "id": model.candidates[0].gpu.id, "count": 1, "minCudaVersion": "12.1"
        }  # fmt: skip
        assert request["ollamaPull"] == ["qwen3:8b"]
        triggers = pod.inputs["triggers"]
        placement = model.candidates[0]
        assert triggers == [
            "EU-RO-1",
            "frutebox-dev-weights",
            f"{placement.count}x {placement.gpu.id}",
        ]
        assert STEP_STACK_KEY_ENV not in pod.inputs.get("environment", {})

    return fleet.servers["qwen3-8b"].pod_id.apply(check)


@pulumi.runtime.test
def test_each_seeded_model_has_a_seed_replaced_only_when_its_job_changes(
    recorder: Recorder,
) -> Any:
    from frutebox_infra.program.fleet import Credentials, declare_fleet

    plan = dev_plan()
    fleet = declare_fleet(plan, Credentials(runpod_api_key="rk-secret", hf_token="hf-secret"))

    def check(_: Any) -> None:
        seed = recorder.resources["qwen3-8b-seed"]
        assert seed.typ == "command:local:Command"
        expected = seed_request(plan, "qwen3-8b", volume_id="vol-123", owner=OWNER)
        assert json.loads(seed.inputs["stdin"]) == json.loads(expected.to_json())
        assert seed.inputs["create"].endswith("frutebox_infra.runpod seed create")
        assert seed.inputs["update"].endswith("frutebox_infra.runpod seed update")
        assert seed.inputs["delete"].endswith("frutebox_infra.runpod seed delete")
        fingerprint = seed_fingerprint(plan, "qwen3-8b")
        assert seed.inputs["triggers"] == [fingerprint, "EU-RO-1", "STANDARD"]
        assert seed.inputs["environment"][SECRET_SIG] == SECRET_SIG_VALUE
        assert "hf-secret" not in seed.inputs["stdin"]

    return fleet.servers["qwen3-8b"].pod_id.apply(check)


@pulumi.runtime.test
def test_seeding_off_declares_no_seed(recorder: Recorder) -> Any:
    from frutebox_infra.program.fleet import Credentials, declare_fleet

    fleet = declare_fleet(dev_plan(seeding=False), Credentials())

    def check(_: Any) -> None:
        assert not [name for name in recorder.resources if name.endswith("-seed")]

    return fleet.servers["qwen3-8b"].pod_id.apply(check)


@pulumi.runtime.test
def test_secrets_reach_the_deploy_step_only_as_secret_environment(recorder: Recorder) -> Any:
    from frutebox_infra.program.fleet import Credentials, declare_fleet

    fleet = declare_fleet(dev_plan(), Credentials(runpod_api_key="rk-secret", hf_token="hf-secret"))

    def check(_: Any) -> None:
        pod = recorder.resources["qwen3-8b-pod"]
        wrapped = pod.inputs["environment"]
        # Pulumi's wire form of a secret: the whole environment is encrypted in state.
        assert wrapped[SECRET_SIG] == SECRET_SIG_VALUE
        env = wrapped["value"]
        # Under the stack's own name: the step prefers an exported key (endpoints.py).
        assert env[STEP_STACK_KEY_ENV] == "rk-secret"
        assert env["FRUTEBOX_HF_TOKEN"] == "hf-secret"
        assert "rk-secret" not in pod.inputs["stdin"]
        assert "hf-secret" not in pod.inputs["stdin"]

    return fleet.servers["qwen3-8b"].pod_id.apply(check)


def test_the_sdk_s_debug_lines_are_dropped_unless_the_variable_keeps_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from frutebox_infra.program.fleet import SDK_DEBUG_ENV, drop_sdk_debug_lines

    sdk_debug = pulumi.log.debug
    monkeypatch.setattr(pulumi.log, "debug", sdk_debug)  # restored after the test
    assert not drop_sdk_debug_lines({SDK_DEBUG_ENV: "1"})
    assert pulumi.log.debug is sdk_debug
    assert drop_sdk_debug_lines({})
    assert pulumi.log.debug is not sdk_debug
    pulumi.log.debug("dropped, not sent")  # takes what the SDK's takes and returns nothing
    assert pulumi.log.info is not pulumi.log.debug


def test_read_config_is_the_project_s_keys_as_the_engine_passes_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from frutebox_infra.program.fleet import read_config

    passed = {
        "frutebox-infra:models": '["qwen3-8b"]',
        "frutebox-infra:dataCenter": "EU-RO-1",
        "frutebox-infra:runpodApiKey": "rk-secret",
        "command:anything": "another package's",
    }
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps(passed))
    assert read_config() == {
        "models": '["qwen3-8b"]',
        "dataCenter": "EU-RO-1",
        "runpodApiKey": "rk-secret",
    }


@pulumi.runtime.test
def test_the_serving_key_is_minted_once_never_echoed_and_kept_secret(recorder: Recorder) -> Any:
    from frutebox_infra.program.fleet import Credentials, serving_key

    key = serving_key(Credentials())

    def check(pair: list[Any]) -> None:
        assert pair == [MINTED, True]
        mint = recorder.resources["serving-key"]
        assert mint.typ == "command:local:Command"
        # Created once: no update or delete to run it again, so every later `up` keeps it.
        assert "secrets.token_urlsafe(32)" in mint.inputs["create"]
        assert not mint.inputs.get("update") and not mint.inputs.get("delete")
        assert mint.inputs["logging"] == "none"  # the engine never shows its stdout

    return pulumi.Output.all(key, pulumi.Output.from_input(key.is_secret())).apply(check)


@pulumi.runtime.test
def test_a_stack_key_replaces_the_minted_one_and_is_exported_as_a_secret(
    recorder: Recorder,
) -> Any:
    from frutebox_infra.program.fleet import Credentials, serving_key

    given = "k" * 40
    key = serving_key(Credentials(serving_key=given))
    assert "serving-key" not in recorder.resources  # nothing minted beside a stack key

    def check(pair: list[Any]) -> None:
        value, secret = pair
        assert value == given
        assert secret

    return pulumi.Output.all(key, pulumi.Output.from_input(key.is_secret())).apply(check)


def test_a_stack_key_unfit_for_the_gateway_is_refused_naming_the_key_and_fix() -> None:
    from frutebox_infra.stack.serving_key import key_problem

    assert key_problem("A" * 43) is None
    assert key_problem("Zx-_09" * 6) is None
    for bad in ("short", "x" * 31, "has space " * 4, 'quote"' * 6, "brace}" * 6):
        problem = key_problem(bad)
        assert problem is not None
        assert "frutebox-infra:servingKey" in problem and "Fix:" in problem
        assert bad not in problem  # never the value itself
