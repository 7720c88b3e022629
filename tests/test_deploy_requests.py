"""Plans rendered for the deploy step: RunPod pod bodies, pod and volume requests, deadlines."""

from __future__ import annotations

import json
import math
import re
from functools import cache

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry as SchemaRegistry
from referencing import Resource
from referencing.jsonschema import DRAFT202012

from frutebox_infra.deploy_requests import (
    HEALTH_BASE_S,
    health_deadline_s,
    pod_body,
    pod_name,
    pod_name_of,
    pod_request,
    volume_name,
    volume_request,
)
from frutebox_infra.environment import Environment
from frutebox_infra.plan import FleetPlan, plan_fleet
from frutebox_infra.registry import Registry
from tests.factories import flag, openapi_path, real_registry, settings

OWNER = "0123456789abcdef"


@cache
def create_pod_validator() -> Draft202012Validator:
    doc = json.loads(openapi_path().read_text())
    uri = "urn:runpod:openapi-v2"
    schemas = SchemaRegistry().with_resource(
        uri, Resource.from_contents(doc, default_specification=DRAFT202012)
    )
    schema = {"$ref": f"{uri}#/components/schemas/CreatePodRequest"}
    return Draft202012Validator(schema, registry=schemas)


def all_servable_plan() -> tuple[FleetPlan, Registry]:
    reg = real_registry()
    armed = [m.id for m in reg.models]
    fleet = plan_fleet(
        reg, settings(models=armed), stack="prod", environment=Environment(hf_token=True)
    )
    return fleet, reg


def test_the_validator_can_fail() -> None:
    validator = create_pod_validator()
    good = {"name": "x", "image": "a:b", "gpu": {"id": "NVIDIA H200", "count": 1}}
    assert not list(validator.iter_errors(good))
    assert list(validator.iter_errors({**good, "entrypoint": ["sh"]}))
    assert list(validator.iter_errors({k: v for k, v in good.items() if k != "name"}))
    assert list(validator.iter_errors({**good, "mounts": {"network": [{"volumeId": "v"}]}}))


def test_every_pod_body_is_a_valid_create_pod_request() -> None:
    fleet, _ = all_servable_plan()
    validator = create_pod_validator()
    bodies = 0
    for m in fleet.models:
        for p in m.candidates:
            body = pod_body(m, p, fleet.settings, stack="prod", volume_id="vol-123", owner=OWNER)
            errors = [e.message for e in validator.iter_errors(body)]
            assert not errors, (m.model_id, errors)
            assert body["mounts"] == {"network": [{"volumeId": "vol-123", "path": "/workspace"}]}
            assert body["dataCenterIds"] == ["EU-RO-1"]
            assert body["cloud"] == "SECURE"
            assert body["gpu"] == {
                "id": p.gpu.id, "count": p.count, "minCudaVersion": p.image.min_cuda_version
            }  # fmt: skip
            assert body["env"]["FRUTEBOX_OWNER"] == OWNER
            assert body["name"] == pod_name("prod", m.model_id)
            assert body["args"] == p.pod.args and body["image"] == p.pod.image
            assert body["ports"] == [f"{p.pod.port}/http"]
            bodies += 1
    assert bodies >= len([m for m in fleet.models if m.placement])


def test_pod_names_are_unique_per_stack_and_model() -> None:
    names = {pod_name(s, m) for s in ("dev", "prod") for m in ("qwen3-8b", "sdxl-1.0")}
    assert len(names) == 4


def test_pod_request_walks_candidates_cheapest_first() -> None:
    fleet, _ = all_servable_plan()
    for m in fleet.models:
        if m.placement is None:
            continue
        request = pod_request(m, fleet.settings, stack="prod", volume_id="vol-1", owner=OWNER)
        request = json.loads(request.to_json())
        costs = [c["gpu"]["count"] for c in request["candidates"]]
        assert len(costs) == 1 + len(m.fallbacks)
        prices = [p.usd_per_hour for p in m.candidates]
        assert prices == sorted(prices)
        for candidate in request["candidates"]:
            args = candidate["args"]
            if m.resolution.engine == "sglang":
                assert flag(args, "--tp-size") == str(candidate["gpu"]["count"])
            if m.resolution.engine == "vllm":
                assert flag(args, "--tensor-parallel-size") == str(candidate["gpu"]["count"])


@pytest.mark.parametrize(
    ("model_id", "pull", "token_env"),
    [
        pytest.param("qwen3-8b", "qwen3:8b", [], id="ollama-pull"),
        pytest.param("stable-audio-open-1.0", None, ["HF_TOKEN"], id="gated-token-env"),
        pytest.param("sdxl-1.0", None, [], id="open"),
    ],
)
def test_pod_request_carries_the_pull_and_the_token_env(
    model_id: str, pull: str | None, token_env: list[str]
) -> None:
    fleet, _ = all_servable_plan()
    m = fleet.model(model_id)
    assert m is not None
    request = pod_request(m, fleet.settings, stack="prod", volume_id="vol-1", owner=OWNER)
    assert request.ollamaPull == ([pull] if pull else [])
    assert request.hfTokenEnv == token_env
    assert request.health.path.startswith("/")


def test_health_deadlines_scale_with_the_weights_and_a_stack_key_overrides() -> None:
    fleet, _ = all_servable_plan()
    small, big = fleet.model("qwen3-8b"), fleet.model("qwen3-235b-a22b")
    assert small is not None and big is not None
    small_s, big_s = (health_deadline_s(m, fleet.settings) for m in (small, big))
    assert HEALTH_BASE_S < small_s < big_s
    weights_gb = big.resolution.serving.weights_disk_gb if big.resolution.serving else 0
    assert big_s == HEALTH_BASE_S + math.ceil((weights_gb or 0) * 1000 / 100)  # 100 MB/s
    fixed = fleet.settings.model_copy(update={"health_timeout_seconds": 1234})
    assert health_deadline_s(big, fixed) == 1234


def test_every_gpu_create_carries_its_images_cuda_floor() -> None:
    floors = {i.min_cuda_version for i in real_registry().images.values()}
    assert floors and all(re.fullmatch(r"\d+\.\d+", f) for f in floors)
    fleet, _ = all_servable_plan()
    for m in fleet.models:
        for p in m.candidates:
            body = pod_body(m, p, fleet.settings, stack="prod", volume_id="v", owner=OWNER)
            assert body["gpu"]["minCudaVersion"] == p.image.min_cuda_version




@pytest.mark.parametrize(("tier", "size"), [("STANDARD", 10), ("HIGH_PERFORMANCE", 500)])
def test_the_volume_request_carries_the_plan_s_size_tier_and_data_centre(
    tier: str, size: int
) -> None:
    plan = plan_fleet(
        real_registry(),
        settings(models=["qwen3-8b"], volumeType=tier, minVolumeGb=size),
        stack="d",
    )
    request = volume_request(plan)
    assert (request.name, request.size, request.type) == (volume_name("d"), size, tier)
    assert request.dataCenter == "EU-RO-1"


def test_a_model_s_pod_name_is_its_pod_s_and_none_without_a_pod() -> None:
    plan = plan_fleet(real_registry(), settings(models=["qwen3-8b", "ghost"]), stack="dev")
    assert pod_name_of(plan, "qwen3-8b") == pod_name("dev", "qwen3-8b") == "frutebox-dev-qwen3-8b"
    assert pod_name_of(plan, "ghost") is None
