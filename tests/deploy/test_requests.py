"""Plans rendered for the deploy step: RunPod pod bodies, pod and volume requests, deadlines."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from functools import cache
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry as SchemaRegistry
from referencing import Resource
from referencing.jsonschema import DRAFT202012

from frutebox_infra.catalog.schema import Registry
from frutebox_infra.deploy.requests import (
    HEALTH_BASE_S,
    health_deadline_s,
    pod_body,
    pod_name,
    pod_name_of,
    pod_request,
    seed_fingerprint,
    seed_pod_name,
    seed_request,
    seeded_ids,
    volume_name,
    volume_request,
)
from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.plumbing.validation import validate
from frutebox_infra.seeding.protocol import SeedPlan
from frutebox_infra.stack.environment import Environment
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
    # Unseeded: its download at 100 MB/s, then SGLang reads it all at 237 MB/s (STANDARD).
    download, read = (weights_gb or 0) * 1000 / 100, (weights_gb or 0) * 1000 / 237
    assert big_s == HEALTH_BASE_S + math.ceil(download + read)
    fixed = replace(fleet.settings, health_timeout_seconds=1234)
    assert health_deadline_s(big, fixed) == 1234


@pytest.mark.parametrize(
    ("model_id", "read"),
    [
        pytest.param("qwen3-235b-a22b", True, id="sglang-reads-before-serving"),
        pytest.param("sdxl-1.0", False, id="comfyui-reads-on-first-request"),
    ],
)
def test_a_seeded_models_deadline_has_no_download(model_id: str, read: bool) -> None:
    fleet, _ = all_servable_plan()
    m = fleet.model(model_id)
    assert m is not None and m.resolution.serving is not None
    weights_gb = m.resolution.serving.weights_disk_gb or 0
    seeded = health_deadline_s(m, fleet.settings, seeded={model_id})
    unseeded = health_deadline_s(m, fleet.settings)
    assert seeded == HEALTH_BASE_S + math.ceil(weights_gb * 1000 / 237 if read else 0)
    assert unseeded - seeded == pytest.approx(weights_gb * 1000 / 100, abs=1)
    # What the pod request carries: the deadline of the models its plan seeds.
    request = pod_request(
        m, fleet.settings, stack="prod", volume_id="v", owner=OWNER, seeded=seeded_ids(fleet)
    )
    assert request.timeouts.healthySeconds == seeded


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


def seeded_plan(*models: str, **keys: Any) -> FleetPlan:
    return plan_fleet(
        real_registry(),
        settings(models=list(models), **keys),
        stack="prod",
        environment=Environment(hf_token=True),
    )


def test_a_seed_request_names_its_model_job_and_the_flavors_to_walk() -> None:
    plan = seeded_plan("qwen-3.6-27b")
    request = seed_request(plan, "qwen-3.6-27b", volume_id="vol-1", owner=OWNER)
    assert (
        request.name == seed_pod_name("prod", "qwen-3.6-27b") == "frutebox-prod-qwen-3.6-27b-seed"
    )
    assert [(c.id, c.vcpuCount) for c in request.cpus] == [("cpu3c", 2), ("cpu3g", 2)]
    seed = validate(SeedPlan, request.plan)
    [job] = seed.jobs
    assert job.modelId == "qwen-3.6-27b" and job.kind == "hf-snapshot"
    assert seed.port == request.status.port and request.status.path == "/status"
    assert request.pod["mounts"] == {"network": [{"volumeId": "vol-1", "path": "/workspace"}]}
    assert request.pod["cloud"] == "SECURE" and request.pod["dataCenterIds"] == ["EU-RO-1"]
    assert request.pod["image"] == real_registry().seeder_image.reference  # type: ignore[union-attr]
    assert "gpu" not in request.pod and "env" not in request.pod  # the step adds env and cpu
    decision = plan.seeding.of("qwen-3.6-27b")  # type: ignore[union-attr]
    assert decision is not None and request.timeoutSeconds == decision.timeout_s
    assert request.hfTokenEnv == []


@pytest.mark.parametrize(
    ("model_id", "token_env"),
    [
        pytest.param("stable-audio-open-1.0", ["HF_TOKEN"], id="gated-file-needs-the-token"),
        pytest.param("sdxl-1.0", [], id="open-files-need-none"),
        pytest.param("qwen3-8b", [], id="ollama-library-needs-none"),
    ],
)
def test_only_a_seed_of_a_gated_source_asks_for_the_token(
    model_id: str, token_env: list[str]
) -> None:
    plan = seeded_plan(model_id)
    assert seed_request(plan, model_id, volume_id="v", owner=OWNER).hfTokenEnv == token_env


def test_a_seed_is_replaced_when_its_job_changes_and_only_then() -> None:
    plan = seeded_plan("qwen-3.6-27b")
    same = seeded_plan("qwen-3.6-27b", seedCpuFlavor="cpu3g", seedTimeoutSeconds=7200)
    other = seeded_plan("qwen3-235b-a22b")
    assert seed_fingerprint(plan, "qwen-3.6-27b") == seed_fingerprint(same, "qwen-3.6-27b")
    assert seed_fingerprint(other, "qwen3-235b-a22b") != seed_fingerprint(plan, "qwen-3.6-27b")
    cpus = seed_request(same, "qwen-3.6-27b", volume_id="v", owner=OWNER).cpus
    assert [c.id for c in cpus] == ["cpu3g"]


def test_seeded_ids_are_the_models_a_cpu_pod_seeds() -> None:
    assert seeded_ids(seeded_plan("qwen3-8b", "sdxl-1.0")) == {"qwen3-8b", "sdxl-1.0"}
    assert seeded_ids(seeded_plan("qwen3-8b", seeding=False)) == frozenset()
