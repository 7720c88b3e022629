"""The diff report: the terminal table and the pull-request Markdown carry the same numbers,
and the JSON contract's keys are pinned in order."""

from __future__ import annotations

import json

import pytest

from frutebox_infra.planner.plan import FleetPlan
from frutebox_infra.report.diff_report import (
    DIFF_VERSION,
    diff_data,
    diff_markdown,
    diff_table,
    fit_text,
    signed_usd,
)
from frutebox_infra.report.text import usd
from frutebox_infra.views.diff import DiffView, FleetDiff, diff_plans
from tests.views.test_diff import dev_plan


@pytest.fixture
def arming_diff() -> tuple[FleetDiff, FleetPlan, FleetPlan]:
    before = dev_plan(models=["qwen3-8b"])
    after = dev_plan()
    return diff_plans(before, after), before, after


def test_renderers_contain_the_numbers(
    arming_diff: tuple[FleetDiff, FleetPlan, FleetPlan],
) -> None:
    d, before, after = arming_diff
    table = diff_table(DiffView(diff=d, base="origin/main", head="HEAD"))
    markdown = diff_markdown(DiffView(diff=d, base="origin/main", head="HEAD"))
    data = diff_data(DiffView(diff=d, base="origin/main", head="HEAD"))
    hourly = (f"{usd(before.usd_per_hour_best)}/h → {usd(after.usd_per_hour_best)}/h"
              f" ({signed_usd(d.usd_per_hour_best.delta)}/h)")  # fmt: skip
    monthly = f"{usd(before.usd_per_month_worst)}/month → {usd(after.usd_per_month_worst)}/month"
    volume = f"{before.volume.size_gb} GB → {after.volume.size_gb} GB"
    for text in (table, markdown):
        assert hourly in text and monthly in text and volume in text
        for m in d.changes:
            assert m.after is not None
            assert signed_usd(m.usd_per_hour_best.delta) in text
            assert fit_text(m.after) in text
            assert f"{m.after.gpu_count}x {m.after.gpu}" in text
    assert "| added | `llama-3.2-1b` |" in markdown
    assert markdown.startswith("### frutebox diff: `dev` — ✅ ok, within budget\n")
    assert "**Budget:**" in markdown and "headroom" in markdown
    assert data["cost"]["usdPerHourBest"] == {
        "before": before.usd_per_hour_best,
        "after": after.usd_per_hour_best,
        "delta": d.usd_per_hour_best.delta,
    }
    assert json.loads(json.dumps(data)) == data


def test_the_json_keys_are_stable(arming_diff: tuple[FleetDiff, FleetPlan, FleetPlan]) -> None:
    data = diff_data(DiffView(diff=arming_diff[0], base="a", head="b"))
    assert data["version"] == DIFF_VERSION == 1
    assert list(data) == [
        "version", "stack", "base", "head", "baseExists", "headExists", "ok", "models",
        "unchanged", "cost", "volume", "budget", "problems", "warnings",
    ]  # fmt: skip
    assert list(data["models"][0]) == [
        "id", "change", "changedFields", "before", "after", "usdPerHourBest", "usdPerHourWorst",
    ]  # fmt: skip
    assert list(data["models"][0]["after"]) == [
        "engine", "image", "gpuType", "gpuCount", "usdPerHourBest", "usdPerHourWorst",
        "fallbacks", "contextTokens", "fullContextSequences", "configuredSequences", "problems",
        "decodeTokensPerSecondPerStream", "decodeTokensPerSecondAggregate",
        "usdPerMillionOutputTokens",
    ]  # fmt: skip
    assert list(data["cost"]) == [
        "usdPerHourBest", "usdPerHourWorst", "usdPerMonthBest", "usdPerMonthWorst",
        "firstDeployUsd", "addedBringupUsd",
    ]  # fmt: skip
    assert list(data["volume"]) == ["sizeGb", "usdPerMonth", "shrinkIgnored"]
    assert list(data["budget"]) == ["maxUsdPerHour", "withinBudget", "headroomUsdPerHour"]
    assert list(data["cost"]["usdPerHourBest"]) == ["before", "after", "delta"]


def test_a_shrinking_volume_is_shown_as_kept() -> None:
    d = diff_plans(dev_plan(), dev_plan(models=["llama-3.2-1b"]))
    assert d.volume_shrink_ignored
    assert d.volume_size_gb.after == d.volume_size_gb.before
    assert "never shrinks" in diff_table(DiffView(diff=d, base="a", head="b"))
    assert "never shrinks" in diff_markdown(DiffView(diff=d, base="a", head="b"))


def test_arming_a_model_shows_what_bringing_it_up_costs_once(
    arming_diff: tuple[FleetDiff, FleetPlan, FleetPlan],
) -> None:
    d, before, after = arming_diff
    assert after.seeding is not None and before.seeding is not None
    armed = [after.seeding.of(m.model_id) for m in d.changes if m.before is None]
    assert len(armed) == 2 and all(armed)  # llama-3.2-1b and sdxl-1.0
    once = round(sum(a.bringup.seed_usd + a.bringup.gpu_before_serving_usd for a in armed if a), 2)
    assert d.added_bringup_usd == once > 0
    assert d.first_deploy_usd.after == after.seeding.first_deploy.total_usd
    line = f"{usd(once)} once for the models armed (seeding + GPU before serving)"
    assert f"bring-up {line}" in diff_table(DiffView(diff=d, base="a", head="b"))
    assert f"- **Bring-up:** {line}" in diff_markdown(DiffView(diff=d, base="a", head="b"))
    data = diff_data(DiffView(diff=d, base="a", head="b"))["cost"]
    assert data["addedBringupUsd"] == once
    assert data["firstDeployUsd"]["after"] == after.seeding.first_deploy.total_usd


def test_a_change_that_costs_no_bring_up_says_nothing_of_it() -> None:
    d = diff_plans(dev_plan(), dev_plan())
    assert d.added_bringup_usd == 0 and d.first_deploy_usd.delta == 0
    assert "bring-up" not in diff_table(DiffView(diff=d, base="a", head="b"))
