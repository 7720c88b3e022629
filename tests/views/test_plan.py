"""The plan view: what the plan's reports show beside the plan, the deploy step's pod names
and the bring-up's assumptions, taken from where they are decided."""

from __future__ import annotations

from frutebox_infra.deploy.requests import pod_name_of
from frutebox_infra.planner.plan import plan_fleet
from frutebox_infra.seeding.bringup import CPU_POD_START_S, GPU_POD_START_S, VOLUME_READ_MB_PER_S
from frutebox_infra.views.plan import PlanView
from tests.factories import real_registry, settings


def test_pod_names_are_the_deploy_steps_and_shared_by_a_pods_members() -> None:
    plan = plan_fleet(
        real_registry(),
        settings(models=["qwen3-8b", "llama-3.2-1b", "sdxl-1.0"], colocate=True),
        stack="prod",
    )
    v = PlanView(plan=plan)
    assert v.pod_names == {m.model_id: pod_name_of(plan, m.model_id) for m in plan.models}
    assert v.pod_names["llama-3.2-1b"] == "frutebox-prod-qwen3-8b"
    assert [v.pod_name(p) for p in plan.pods] == [v.pod_names[p.anchor] for p in plan.pods]


def test_bringup_assumptions_are_the_seeding_steps_at_the_stacks_link_and_volume() -> None:
    s = settings(models=["qwen3-8b"], volumeType="HIGH_PERFORMANCE", downloadMBps=40)
    a = PlanView(plan=plan_fleet(real_registry(), s, stack="prod")).bringup_assumptions
    assert (a.gpu_start_s, a.cpu_start_s) == (GPU_POD_START_S, CPU_POD_START_S)
    assert (a.download_mb_per_s, a.volume_type) == (40, "HIGH_PERFORMANCE")
    assert a.volume_read_mb_per_s == VOLUME_READ_MB_PER_S["HIGH_PERFORMANCE"]
