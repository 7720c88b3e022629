"""The plan as a pull-request comment: one table row per model, the totals, the verdict."""

from __future__ import annotations

from frutebox_infra.environment import Environment
from frutebox_infra.plan import FleetPlan, plan_fleet
from frutebox_infra.report.markdown import plan_markdown
from frutebox_infra.report.text import usd
from tests.factories import real_registry, settings


def real_plan(models: list[str], **config: object) -> FleetPlan:
    return plan_fleet(
        real_registry(), settings(models=models, **config), stack="prod", environment=Environment()
    )


def rows(md: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in md.splitlines()
        if line.startswith("|")
    ]


def test_one_row_per_model_with_consistent_columns() -> None:
    plan = real_plan(["qwen3-8b", "kimi-k2.6", "sdxl-1.0"])
    table = rows(plan_markdown(plan))
    header, rule, *body = table
    assert header[0] == "model" and len(header) == 9
    assert all(len(r) == len(header) for r in table)
    assert set("".join(rule)) <= set("-:")
    assert [r[0] for r in body] == ["`qwen3-8b`", "`kimi-k2.6`", "`sdxl-1.0`"]
    for r, m in zip(body, plan.models, strict=True):
        assert m.placement is not None
        assert r[1] == m.resolution.engine
        assert r[3] == m.placement.label
        assert r[6] == usd(m.usd_per_hour_best) and r[7] == usd(m.usd_per_hour_worst)
        assert r[8] == str(len(m.fallbacks))


def test_totals_and_verdict_of_a_good_plan() -> None:
    plan = real_plan(["qwen3-8b", "sdxl-1.0"], budgetUsdPerHour=2)
    md = plan_markdown(plan)
    assert "`prod`" in md.splitlines()[0] and "ready to deploy" in md.splitlines()[0]
    assert f"{plan.volume.size_gb} GB" in md and usd(plan.volume.usd_per_month) in md
    assert usd(plan.usd_per_month_best) in md and usd(plan.usd_per_month_worst) in md
    assert "within budget" in md
    assert "Problems" not in md


def test_a_failing_plan_says_so_and_lists_problems_with_fixes() -> None:
    md = plan_markdown(real_plan(["qwen3-8b", "ghost"], budgetUsdPerHour=0.01))
    assert "preview fails" in md.splitlines()[0]
    assert "**over budget**" in md
    assert "**Problems:**" in md
    problems = md.split("**Problems:**", 1)[1]
    assert "unknown-model" in problems and "over-budget" in problems and "Fix:" in problems


def test_a_model_without_a_placement_has_dashes() -> None:
    table = rows(plan_markdown(real_plan(["stable-audio-open-1.0"])))
    assert table[2][0] == "`stable-audio-open-1.0`"
    assert all(cell in ("—", "-") for cell in table[2][3:])


def test_warnings_are_folded_away() -> None:
    md = plan_markdown(real_plan(["sdxl-1.0"]))
    assert "<details><summary>Warnings</summary>" in md and "</details>" in md
    assert "revision" in md.split("<details>", 1)[1]


def test_ends_with_a_newline() -> None:
    assert plan_markdown(real_plan([])).endswith("\n")
