"""`exposure: private`: the key is checked like every stack key, the plan refuses a data centre
without global networking and an Ollama model (pulled through a published port), preview says
per model who can reach it and how, and the pod bodies publish no port and ask for global
networking, while a public stack's bodies read exactly as before."""

from __future__ import annotations

from typing import Any

import pytest

from frutebox_infra.deploy.requests import pod_request
from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.planner.resolver import Exposure
from frutebox_infra.plumbing.errors import ConfigError
from frutebox_infra.report.plan_report import plan_data, reach_lines
from frutebox_infra.stack.settings import STACK_KEYS
from frutebox_infra.stack.stack_file import parse_settings
from frutebox_infra.views.plan import PlanView
from tests.factories import real_registry, settings

SGLANG, COMFY, OLLAMA = "qwen-3.6-27b", "sdxl-1.0", "qwen3-8b"
OWNER = "0123456789abcdef"


def private_plan(models: list[str], **config: Any) -> FleetPlan:
    values: dict[str, Any] = {"exposure": "private", "budgetUsdPerHour": 100, **config}
    return plan_fleet(real_registry(), settings(models=models, **values), stack="prod")


def test_exposure_defaults_to_public_and_takes_private() -> None:
    assert settings().exposure == "public"
    assert settings(exposure="private").exposure == "private"
    assert STACK_KEYS["exposure"].default == "public"


@pytest.mark.parametrize("value", ["Private", "internal", True, ""])
def test_a_bad_exposure_names_the_file_the_key_and_the_fix(value: object) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_settings({"dataCenter": "EU-RO-1", "budgetUsdPerHour": 1, "exposure": value},
                       where="stacks/Pulumi.test.yaml")  # fmt: skip
    text = str(raised.value)
    assert "stacks/Pulumi.test.yaml" in text and "exposure" in text
    assert "public (RunPod's proxy, behind the stack's key) or private" in text


@pytest.mark.parametrize("dc", ["EUR-IS-1", "CA-MTL-1", "AP-JP-1"])
def test_private_where_global_networking_is_not_offered_is_a_problem_with_the_fix(dc: str) -> None:
    plan = private_plan([SGLANG], dataCenter=dc)
    [problem] = [p for p in plan.problems if p.rule == "private-without-global-network"]
    assert dc in problem.message
    assert "EU-RO-1" in problem.fix and "US-KS-2" in problem.fix
    assert "frutebox-infra:exposure to public" in problem.fix
    public = plan_fleet(real_registry(), settings(models=[SGLANG], dataCenter=dc,
                        budgetUsdPerHour=100), stack="prod")  # fmt: skip
    assert not [p for p in public.problems if p.rule == "private-without-global-network"]


def test_private_in_a_networked_centre_plans() -> None:
    assert private_plan([SGLANG, COMFY]).ok


def test_a_private_ollama_model_is_a_problem() -> None:
    plan = private_plan([OLLAMA])
    [problem] = [p for p in plan.problems if p.rule == "private-ollama-pull"]
    assert OLLAMA in problem.message and "exposure to public" in problem.fix


def test_preview_says_per_model_who_can_reach_it_and_how() -> None:
    plan = private_plan([SGLANG, COMFY])
    text = " ".join("\n".join(reach_lines(plan)).split())
    assert "no port is published" in text and "own GPU pods" in text
    [sglang_plan] = [m for m in plan.models if m.model_id == SGLANG]
    sglang = plan.exposure_of(sglang_plan)
    assert sglang is not None and sglang_plan.placement is not None
    port = sglang_plan.placement.pod.port
    assert sglang.private and sglang.keyed
    assert sglang.address == f"<podId>.runpod.internal:{port}"
    assert f"{SGLANG} private: only the account's own GPU pods, with the key (gateway), at" in text
    assert f"<podId>.runpod.internal:{port} (global networking; no port published" in text
    data = plan_data(PlanView(plan=plan))
    assert data["exposure"] == "private"
    [sglang_data] = [m for m in data["models"] if m["id"] == SGLANG]
    assert sglang_data["exposure"] == {
        "reachableBy": "key", "gateway": True, "reason": sglang.reason, "network": "private",
        "address": f"<podId>.runpod.internal:{port}", "from": "ownPods",
    }  # fmt: skip


def test_an_open_model_on_a_private_stack_is_open_to_the_accounts_pods_only() -> None:
    open_ = Exposure(keyed=False, reason="a fixed ENTRYPOINT", private_port=8000)
    assert open_.text.startswith("private: only the account's own GPU pods, without a key (no"
                                 " gateway yet: a fixed ENTRYPOINT), at <podId>.runpod.internal"
                                 ":8000")  # fmt: skip
    assert Exposure(keyed=False, reason="x").text == "anyone — no gateway yet: x"


def test_public_preview_reads_as_before() -> None:
    plan = plan_fleet(real_registry(), settings(models=[SGLANG], budgetUsdPerHour=100),
                      stack="prod")  # fmt: skip
    text = "\n".join(reach_lines(plan))
    assert "reach   who can use each model's URL" in text and "runpod.internal" not in text
    [model] = plan_data(PlanView(plan=plan))["models"]
    assert "network" not in model["exposure"]


def test_private_bodies_publish_no_port_and_ask_for_global_networking() -> None:
    plan = private_plan([SGLANG])
    [model] = plan.models
    request = pod_request(model, plan.settings, stack="prod", volume_id="vol1", owner=OWNER)
    assert request.private
    for body in request.candidates:
        assert body["ports"] == [] and body["globalNetworking"] is True
    assert '"private":true' in request.to_json()


def test_public_bodies_leave_global_networking_out() -> None:
    plan = plan_fleet(real_registry(), settings(models=[SGLANG], budgetUsdPerHour=100),
                      stack="prod")  # fmt: skip
    [model] = plan.models
    request = pod_request(model, plan.settings, stack="prod", volume_id="vol1", owner=OWNER)
    assert not request.private and '"private"' not in request.to_json()
    for body in request.candidates:
        assert "globalNetworking" not in body and body["ports"]


def test_seeding_pods_stay_as_they_are() -> None:
    from frutebox_infra.deploy.requests import seed_request, seeded_ids

    plan = private_plan([SGLANG])
    [seeded] = sorted(seeded_ids(plan))
    request = seed_request(plan, seeded, volume_id="vol1", owner=OWNER)
    assert "globalNetworking" not in request.pod and request.pod["ports"]


def test_an_open_model_on_a_private_stack_is_warned_about_as_such() -> None:
    from dataclasses import replace

    registry = replace(real_registry(), gateway=None)  # every engine planned open
    plan = plan_fleet(registry, settings(models=[COMFY], exposure="private"), stack="s")
    assert any(w.startswith(f"{COMFY}: any of the account's own pods can use it without a key")
               for w in plan.warnings)  # fmt: skip
    assert not any(w.startswith(f"{COMFY}: anyone") for w in plan.warnings)
    text = " ".join("\n".join(reach_lines(plan)).split())
    assert "without a key (no gateway yet" in text
    [model] = plan_data(PlanView(plan=plan))["models"]
    assert (model["exposure"]["reachableBy"], model["exposure"]["from"]) == ("ownPods", "ownPods")


def test_every_gpu_a_private_pod_may_land_on_is_nvidia() -> None:
    # Global networking is for NVIDIA GPU pods only (RunPod docs, pods/networking): a private
    # plan filters nothing, because no GPU of the registry is anything else. A GPU of
    # another vendor added to registry/gpus.yaml must be kept out of private placements.
    assert all(g.id.startswith("NVIDIA ") for g in real_registry().gpus)
