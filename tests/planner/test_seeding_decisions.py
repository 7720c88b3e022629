"""Which models a CPU pod seeds before their GPU pod, their jobs and bring-up, and the pods
that then read the volume offline."""

from __future__ import annotations

from dataclasses import replace

import pytest

from frutebox_infra.catalog.schema import Registry
from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.planner.seeding_decisions import Seeding, reading_seeded
from frutebox_infra.seeding.protocol import FilesJob, HfSnapshotJob, OllamaJob
from frutebox_infra.stack.environment import Environment
from tests.factories import real_registry, settings

PROD = ["qwen-3.6-27b", "qwen3-235b-a22b", "kimi-k2.6", "sdxl-1.0", "ace-step-v1-3.5b"]


def planned(models: list[str], registry: Registry | None = None, **keys: object) -> FleetPlan:
    return plan_fleet(
        registry or real_registry(),
        settings(models=models, **keys),
        stack="prod",
        environment=Environment(hf_token=True),
    )


def seeding(plan: FleetPlan) -> Seeding:
    assert plan.seeding is not None
    return plan.seeding


def test_every_placed_model_seeds_by_default_with_the_job_its_engine_reads() -> None:
    plan = planned(["qwen-3.6-27b", "kimi-k2.6", "sdxl-1.0", "qwen3-8b"])
    s = seeding(plan)
    assert s.on and s.cpu is not None and s.cpu.flavor.id == "cpu3c" and s.no_cpu is None
    kinds = {m.model_id: type(m.job) for m in s.models}
    assert kinds == {"qwen-3.6-27b": HfSnapshotJob, "kimi-k2.6": HfSnapshotJob,
                     "sdxl-1.0": FilesJob, "qwen3-8b": OllamaJob}  # fmt: skip
    assert plan.ok and all(m.why_not is None for m in s.models)


def test_seeded_pods_read_offline_and_without_the_token_and_pass_the_launch_check() -> None:
    plan = planned(["qwen-3.6-27b", "kimi-k2.6", "qwen3-8b"])
    env = {m.model_id: dict(m.placement.pod.env) for m in plan.models if m.placement}
    assert env["qwen-3.6-27b"]["HF_HUB_OFFLINE"] == "1"
    assert env["kimi-k2.6"]["LLAMA_ARG_OFFLINE"] == "1"
    assert "HF_HUB_OFFLINE" not in env["qwen3-8b"] and "LLAMA_ARG_OFFLINE" not in env["qwen3-8b"]
    assert all(p.seeded for m in plan.models for p in m.candidates)
    assert not [p for p in plan.problems if p.rule == "launch-rejected"]
    # The pod the seed job read is the one the placement launches: the seeded render.
    for m in plan.models:
        decision = seeding(plan).of(m.model_id)
        assert m.placement is not None and decision is not None and decision.seeded
        assert m.placement.pod == m.placement.recipe.pod(
            m.placement.model, m.placement.image, m.placement.gpu, m.placement.count,
            m.placement.serving, seeded=True,
        )  # fmt: skip


def test_with_seeding_off_nothing_seeds_and_the_gpu_pods_download_as_before() -> None:
    plan = planned(["qwen-3.6-27b"], seeding=False)
    [m] = seeding(plan).models
    assert not m.seeded and "seeding is off (frutebox-infra:seeding: false)" in (m.why_not or "")
    assert m.bringup.gpu_before_serving_usd == m.bringup.gpu_without_seeding_usd
    assert "HF_HUB_OFFLINE" not in plan.models[0].placement.pod.env  # type: ignore[union-attr]
    assert not seeding(plan).cpus and seeding(plan).first_deploy.seed_usd == 0


def only_in(registry: Registry, data_centre: str) -> Registry:
    flavors = tuple(replace(f, data_centers=(data_centre,))
                    for f in registry.cpu_flavors)  # fmt: skip
    return replace(registry, cpu_flavors=flavors)


def test_a_data_centre_without_a_cpu_flavor_says_so_and_its_gpu_pods_download() -> None:
    plan = planned(["qwen-3.6-27b"], only_in(real_registry(), "US-TX-3"))
    s = seeding(plan)
    assert s.cpus == () and s.no_cpu == "no recorded CPU flavor is offered in EU-RO-1"
    assert any("seeding: no recorded CPU flavor is offered in EU-RO-1" in w for w in plan.warnings)
    [m] = s.models
    assert not m.seeded and "its GPU pod downloads the weights itself" in (m.why_not or "")
    assert plan.ok


@pytest.mark.parametrize(
    ("keys", "flavors"),
    [
        pytest.param({}, ["cpu3c", "cpu3g"], id="cheapest-first"),
        pytest.param({"seedCpuFlavor": "cpu3g"}, ["cpu3g"], id="the-one-named"),
        pytest.param({"seedVcpus": 8}, ["cpu3c", "cpu3g"], id="more-vcpus"),
    ],
)
def test_the_cpu_flavors_to_walk_follow_the_stack_keys(
    keys: dict[str, object], flavors: list[str]
) -> None:
    s = seeding(planned(["sdxl-1.0"], **keys))
    assert [c.flavor.id for c in s.cpus] == flavors
    assert {c.vcpus for c in s.cpus} == {keys.get("seedVcpus", 2)}


def test_an_unknown_cpu_flavor_is_a_problem_naming_the_key() -> None:
    plan = planned(["sdxl-1.0"], seedCpuFlavor="cpu9z")
    [problem] = [p for p in plan.problems if p.rule == "unknown-cpu-flavor"]
    assert "seedCpuFlavor 'cpu9z'" in problem.message and "cpu3c" in problem.message
    assert "frutebox-infra:seedCpuFlavor" in problem.fix


def test_the_bring_up_adds_up_to_the_first_deploy() -> None:
    s = seeding(planned(PROD))
    d = s.first_deploy
    assert d.seed_usd == pytest.approx(sum(m.bringup.seed_usd for m in s.models), abs=1e-3)
    assert d.gpu_before_serving_usd < d.gpu_without_seeding_usd
    kimi = s.of("kimi-k2.6")
    assert kimi is not None and kimi.timeout_s > kimi.bringup.seed_s
    # The finding, stated: 67% of the GPU $ before serving goes, under the 80% target.
    assert 0.6 < d.gpu_saved_fraction < 0.8


def test_a_shared_ollama_pod_seeds_each_member_into_the_anchors_store() -> None:
    plan = planned(["qwen3-8b", "llama-3.2-1b"], colocate=True)
    [pod] = plan.pods
    assert pod.shared
    stores = {m.model_id: m.job.store for m in seeding(plan).models
              if isinstance(m.job, OllamaJob)}  # fmt: skip
    assert set(stores.values()) == {f"ollama/models/{pod.anchor}"}
    assert set(stores) == {"qwen3-8b", "llama-3.2-1b"}


def test_an_unplaced_model_has_no_seeding_decision() -> None:
    plan = planned(["qwen3-8b", "ghost"])
    assert [m.model_id for m in seeding(plan).models] == ["qwen3-8b"]
    assert seeding(plan).of("ghost") is None and not seeding(plan).seeds("ghost")


def test_a_model_without_a_seeding_rule_says_why_and_downloads_on_its_gpu() -> None:
    registry = real_registry()
    images = dict(registry.images)
    sglang = next(r for r in images if str(r) == "sglang")
    images[sglang] = replace(images[sglang], cache_env={})
    plan = planned(["qwen-3.6-27b", "sdxl-1.0"], replace(registry, images=images))
    qwen = seeding(plan).of("qwen-3.6-27b")
    assert qwen is not None and not qwen.seeded
    assert qwen.why_not == (
        "its pod sets no HF_HOME on the volume (registry/images.yaml cache_env): its GPU pod"
        " downloads the weights itself"
    )
    assert seeding(plan).seeds("sdxl-1.0")
    assert "HF_HUB_OFFLINE" not in plan.models[0].placement.pod.env  # type: ignore[union-attr]


@pytest.mark.parametrize("model_id", ["qwen-3.6-27b", "kimi-k2.6", "qwen3-8b", "sdxl-1.0"])
def test_a_seeded_placement_reads_offline_and_is_otherwise_the_same_placement(
    model_id: str,
) -> None:
    plan = planned([model_id], seeding=False)
    [placement] = plan.models[0].candidates[:1]
    carried = reading_seeded(placement)
    assert carried.seeded and not placement.seeded
    assert carried.pod == replace(placement, seeded=True).pod
    assert carried.speed == placement.speed and carried.gpu == placement.gpu
    assert reading_seeded(carried) == carried


def test_decisions_follow_the_plans_model_order_when_a_shared_pods_anchor_comes_later() -> None:
    plan = planned(["llama-3.2-1b", "qwen3-8b"], colocate=True)
    [pod] = plan.pods
    assert pod.model_ids == ("qwen3-8b", "llama-3.2-1b")  # the anchor first, not the plan's
    s = seeding(plan)
    assert [m.model_id for m in s.models] == ["llama-3.2-1b", "qwen3-8b"]
    assert all(s.of(m.model_id) is m for m in s.models)
    assert s.seeded_ids == {"llama-3.2-1b", "qwen3-8b"}


def test_a_seeded_model_plan_differs_from_its_unseeded_one_only_in_its_placements() -> None:
    on, off = planned(PROD), planned(PROD, seeding=False)

    assert seeding(on).seeded_ids == set(PROD)
    for seeded, plain in zip(on.models, off.models, strict=True):
        assert seeded.candidates and all(p.seeded for p in seeded.candidates)
        assert replace(seeded, placement=plain.placement, fallbacks=plain.fallbacks) == plain
        assert [replace(p, seeded=False) for p in seeded.candidates] == list(plain.candidates)
