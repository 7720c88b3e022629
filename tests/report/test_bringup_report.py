"""Bring-up in the plan's views: the table section, the Markdown and the data, all the plan's."""

from __future__ import annotations

import json

import pytest

from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.report.bringup_report import (
    bringup_lines,
    bringup_markdown,
    duration,
    model_bringup_data,
    money,
    seeding_data,
)
from frutebox_infra.report.plan_report import plan_data, plan_markdown, plan_table
from frutebox_infra.seeding.bringup import CPU_POD_START_S, GPU_POD_START_S
from frutebox_infra.stack.environment import Environment
from frutebox_infra.views.plan import PlanView
from tests.factories import real_registry, settings

PROD = ["qwen-3.6-27b", "qwen3-235b-a22b", "kimi-k2.6", "sdxl-1.0", "ace-step-v1-3.5b"]
MODEL_KEYS = {
    "seeded", "notSeededReason", "weightsGb", "seedSeconds", "seedUsd", "seedTimeoutSeconds",
    "gpuBeforeServingSeconds", "gpuBeforeServingUsd", "gpuWithoutSeedingSeconds",
    "gpuWithoutSeedingUsd",
}  # fmt: skip
SEEDING_KEYS = {"enabled", "cpuFlavor", "vcpus", "cpuUsdPerHour", "noCpuReason", "assumptions",
                "firstDeploy"}  # fmt: skip
ASSUMPTION_KEYS = {"gpuStartSeconds", "cpuStartSeconds", "downloadMBps", "volumeReadMBps"}
FIRST_DEPLOY_KEYS = {"cpuPodSeconds", "seedUsd", "gpuBeforeServingUsd", "gpuWithoutSeedingUsd",
                     "totalUsd", "gpuSavedFraction"}  # fmt: skip


def plan(models: list[str], **keys: object) -> FleetPlan:
    return plan_fleet(
        real_registry(), settings(models=models, **keys), stack="prod", environment=Environment()
    )


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        pytest.param(44.6, "45s", id="seconds"),
        pytest.param(59.4, "59s", id="just-under-a-minute"),
        pytest.param(60, "1m00s", id="a-minute"),
        pytest.param(431, "7m11s", id="minutes"),
        pytest.param(3599, "59m59s", id="just-under-an-hour"),
        pytest.param(5810, "1h36m", id="hours"),
    ],
)
def test_durations_read_as_a_person_reads_them(seconds: float, shown: str) -> None:
    assert duration(seconds) == shown


@pytest.mark.parametrize(
    ("value", "shown"),
    [(0.0, "$0.00"), (0.0024, "<$0.01"), (0.005, "$0.01"), (7.3096, "$7.31")],
)
def test_money_never_shows_a_cost_as_free(value: float, shown: str) -> None:
    assert money(value) == shown


def test_the_table_shows_each_models_seed_and_gpu_time_and_the_first_deploy() -> None:
    p = plan(PROD)
    assert p.seeding is not None
    lines = bringup_lines(PlanView(plan=p))
    text = "\n".join(lines)
    assert f"GPU start {GPU_POD_START_S} s, CPU start {CPU_POD_START_S} s" in text
    kimi = next(line for line in text.splitlines() if line.startswith("kimi-k2.6"))
    b = p.seeding.of("kimi-k2.6").bringup  # type: ignore[union-attr]
    assert kimi.split()[1:] == [
        "584", "GB", duration(b.seed_s), "cpu3c", money(b.seed_usd),
        duration(b.gpu_before_serving_s), money(b.gpu_before_serving_usd),
        money(b.gpu_without_seeding_usd),
    ]  # fmt: skip
    d = p.seeding.first_deploy
    assert f"= {money(d.total_usd)}" in text and f"({d.gpu_saved_fraction:.0%} less)" in text
    assert text in plan_table(PlanView(plan=p))  # what preview's log shows
    assert "not seeded" not in text


def test_a_model_that_is_not_seeded_says_why_in_every_view() -> None:
    p = plan(["sdxl-1.0"], seeding=False)
    text = "\n".join(bringup_lines(PlanView(plan=p)))
    row = next(line for line in text.splitlines() if line.startswith("sdxl-1.0"))
    assert row.split()[3:5] == ["-", "-"]
    assert "sdxl-1.0: not seeded: seeding is off (frutebox-infra:seeding: false)" in text
    assert "first deploy: GPU" in text and "seeding" not in text.split("first deploy:")[1][:12]
    md = "\n".join(bringup_markdown(PlanView(plan=p)))
    assert "`sdxl-1.0` not seeded: seeding is off" in md and md in plan_markdown(PlanView(plan=p))


def test_the_markdown_table_has_a_row_per_model() -> None:
    md = bringup_markdown(PlanView(plan=plan(PROD)))
    rows = [line for line in md if line.startswith("| `")]
    assert [r.split("`")[1] for r in rows] == PROD
    assert all(r.count("|") == md[4].count("|") for r in rows)


def test_the_data_is_the_plans_figures_under_pinned_keys() -> None:
    p = plan(PROD)
    assert p.seeding is not None
    data = json.loads(json.dumps(plan_data(PlanView(plan=p)), allow_nan=False))
    seeding = data["seeding"]
    assert set(seeding) == SEEDING_KEYS
    assert set(seeding["assumptions"]) == ASSUMPTION_KEYS
    assert set(seeding["firstDeploy"]) == FIRST_DEPLOY_KEYS
    assert (seeding["cpuFlavor"], seeding["vcpus"], seeding["cpuUsdPerHour"]) == ("cpu3c", 2, 0.06)
    d = p.seeding.first_deploy
    assert seeding["firstDeploy"]["totalUsd"] == d.total_usd
    assert seeding["firstDeploy"]["gpuSavedFraction"] == round(d.gpu_saved_fraction, 4)
    for m in data["models"]:
        assert set(m["bringup"]) == MODEL_KEYS
        decision = p.seeding.of(m["id"])
        assert m["bringup"] == model_bringup_data(decision)
        assert m["bringup"]["gpuBeforeServingUsd"] == decision.bringup.gpu_before_serving_usd  # type: ignore[union-attr]
    assert seeding_data(PlanView(plan=plan([]))) is not None and model_bringup_data(None) is None
