"""Armed windows in the plan: armed now or not and until when, no pod outside the window (its
seed and volume kept), and a month of only armed hours plus a bring-up per opening, said so."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from frutebox_infra.planner.plan import HOURS_PER_MONTH, FleetPlan, plan_fleet
from frutebox_infra.report.diff_report import fleet_text
from frutebox_infra.report.plan_report import plan_data, plan_markdown, plan_table
from frutebox_infra.stack.environment import Environment
from frutebox_infra.views.diff import diff_plans
from frutebox_infra.views.plan import PlanView
from tests.factories import real_registry, settings

WINDOW = "Mon-Fri 08:00-20:00 Europe/Berlin"
INSIDE = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)  # Thursday 11:00 in Berlin
OUTSIDE = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)  # Saturday


def plan(now: datetime | None, **config: object) -> FleetPlan:
    values: dict[str, object] = {"models": ["qwen3-8b", "sdxl-1.0"], **config}
    return plan_fleet(real_registry(), settings(**values), stack="w",
                      environment=Environment(now=now))  # fmt: skip


def test_inside_and_outside_the_window() -> None:
    config = {"overrides": {"qwen3-8b": {"armedWindow": WINDOW}}}
    inside, outside = plan(INSIDE, **config), plan(OUTSIDE, **config)
    (w,) = inside.windows
    assert (w.model_id, w.armed_now) == ("qwen3-8b", True)
    assert w.until is not None and w.until.isoformat() == "2026-12-03T20:00:00+01:00"
    assert outside.dormant == {"qwen3-8b"} and inside.dormant == frozenset()
    assert outside.window_of("qwen3-8b").until.isoformat() == "2026-12-07T08:00:00+01:00"  # type: ignore[union-attr]
    # Everything else is the same plan: the model keeps its placement, seed and volume share.
    assert outside.volume == inside.volume
    assert outside.seeding is not None and outside.seeding.of("qwen3-8b") is not None
    assert [m.placement for m in outside.models] == [m.placement for m in inside.models]


def test_the_month_counts_armed_hours_and_a_bring_up_per_opening() -> None:
    always = plan(INSIDE)
    windowed = plan(INSIDE, armedWindow=WINDOW)
    assert always.windows == () and windowed.usd_per_hour_best == always.usd_per_hour_best
    hours = 60 * HOURS_PER_MONTH / 168
    openings = 5 * HOURS_PER_MONTH / 168
    expected = sum(
        pod.usd_per_hour_best * (hours + openings * windowed.window_of(pod.anchor).rearm_s / 3600)  # type: ignore[union-attr]
        for pod in windowed.pods
    )
    assert windowed.usd_per_month_best == pytest.approx(
        expected + windowed.volume.usd_per_month, abs=0.01
    )
    assert windowed.usd_per_month_best < always.usd_per_month_best * 0.4
    diff = diff_plans(always, windowed)
    assert diff.usd_per_month_best.after == windowed.usd_per_month_best
    assert "only its armed hours plus a bring-up per opening" in fleet_text(diff)


def test_preview_says_per_model_armed_now_or_not_and_until_when() -> None:
    config = {"overrides": {"qwen3-8b": {"armedWindow": WINDOW}}}
    text = plan_table(PlanView(plan=plan(OUTSIDE, **config)))
    assert "armed windows (the month counts only armed hours plus a bring-up per opening):" in text
    assert (
        "qwen3-8b: `Mon-Fri 08:00-20:00 Europe/Berlin`: not armed now (no pod; its weights stay"
        " on the volume), until Mon 2026-12-07 08:00 CET" in text
    )
    assert "armed now, until Thu 2026-12-03 20:00 CET" in plan_table(
        PlanView(plan=plan(INSIDE, **config))
    )
    assert "**armed windows" in plan_markdown(PlanView(plan=plan(INSIDE, **config)))
    (w,) = plan_data(PlanView(plan=plan(OUTSIDE, **config)))["windows"]
    assert w["armedNow"] is False and w["hoursPerMonth"] == pytest.approx(260.7, abs=0.1)


def test_no_window_no_change() -> None:
    view = PlanView(plan=plan(INSIDE))
    assert "armed windows" not in plan_table(view) and "windows" not in plan_data(view)
    assert plan_table(view) == plan_table(PlanView(plan=plan(None)))
