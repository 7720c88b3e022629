"""The usage view: billed pod-hours beside counted output, counters summed as increases across
restarts (what a restart lost counted and said, unless the counters are kept on the volume),
idle hours, and why a model is not measured."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.views.usage import (
    BilledHour,
    CounterSample,
    UsageView,
    advise,
    compute_usage,
    increases,
)
from tests.factories import real_registry, settings

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def plan(*, measure: bool = True) -> FleetPlan:
    models = ["pixtral", "qwen-3.6-27b", "qwen3-8b"]
    return plan_fleet(real_registry(), settings(models=models, measureUsage=measure), stack="s")


def hours(pod: str, n: int, usd: float, first: int = 0) -> list[BilledHour]:
    return [BilledHour(pod_id=pod, start=at(first + h), usd=usd) for h in range(n)]


def tok(pod: str, model: str, h: float, value: float, started: str) -> CounterSample:
    return CounterSample(at=at(h), pod_id=pod, model_id=model, started_at=started,
                         output_tokens=value)  # fmt: skip


SAMPLES = [
    tok("a", "pixtral", 1, 100, "s1"),
    tok("a", "pixtral", 2, 250, "s1"),
    # The container restarted: 300 since then, though above the last value read.
    tok("a", "pixtral", 3, 300, "s2"),
    tok("a", "pixtral", 4, 300, "s2"),  # nothing served 13:00-14:00
]
OWNERS = {"a": "pixtral", "c": "qwen3-8b"}


def view(measure: bool = True, samples: list[CounterSample] = SAMPLES) -> UsageView:
    billed = hours("a", 4, 1.5) + hours("c", 2, 0.25) + hours("x", 1, 5.0)
    return compute_usage(plan=plan(measure=measure), hours=4, end=at(4), billed=billed,
                         samples=samples, owners=OWNERS)  # fmt: skip


def test_counters_are_summed_as_increases_across_a_restart() -> None:
    grown = increases(SAMPLES, {"a": T0})
    assert [i.output_tokens for i in grown] == [100, 150, 300, 0]
    # What was served between the 11:00 sample and the restart went with the process.
    assert [(i.restarted, i.lost) for i in grown] == [(False, False), (False, False),
                                                      (True, True), (False, False)]  # fmt: skip
    # A value that fell is a restart too, even with the same start time (an unread restart).
    fell = [tok("a", "pixtral", 1, 100, "s"), tok("a", "pixtral", 2, 30, "s")]
    assert [(i.output_tokens, i.lost) for i in increases(fell, {})] == [(100, False), (30, True)]
    # Another pod of the model counts from zero, and the last one's tail is lost.
    moved = [tok("a", "pixtral", 1, 100, "s"), tok("b", "pixtral", 2, 40, "t")]
    assert [(i.output_tokens, i.lost) for i in increases(moved, {})] == [(100, False), (40, True)]


KEPT = "/workspace/frutebox/counters/qwen-3.6-27b/sglang-v0.5.21"


def kept(pod: str, h: float, value: float, started: str, where: str = KEPT) -> CounterSample:
    return CounterSample(at=at(h), pod_id=pod, model_id="qwen-3.6-27b", started_at=started,
                         output_tokens=value, counter_dir=where)  # fmt: skip


def test_counters_kept_on_the_volume_carry_on_across_restarts_and_pods() -> None:
    samples = [
        kept("q", 1, 100, "s1"),
        kept("q", 2, 250, "s1"),
        kept("q", 3, 300, "s2"),  # restarted: 50 more, not 300
        kept("r", 4, 420, "t1"),  # a new pod, the same directory: 120 more
    ]
    grown = increases(samples, {"q": T0, "r": at(3)})
    assert [i.output_tokens for i in grown] == [100, 150, 50, 120]
    assert [i.restarted for i in grown] == [False, False, True, True]
    assert not any(i.lost for i in grown)
    v = compute_usage(plan=plan(), hours=4, end=at(4), billed=hours("q", 3, 1.0) + hours(
        "r", 1, 1.0, first=3), samples=samples, owners={"q": "qwen-3.6-27b",
                                                         "r": "qwen-3.6-27b"})  # fmt: skip
    row = next(m for m in v.models if m.model_id == "qwen-3.6-27b")
    assert (row.output_tokens, row.restarts_seen, row.counts_lost) == (420, 2, 0)
    assert row.counts_kept and row.lost_why is None


def test_a_kept_directory_found_emptied_or_left_for_another_release_loses_the_tail() -> None:
    emptied = [kept("q", 1, 100, "s"), kept("q", 2, 30, "s")]
    assert [(i.output_tokens, i.lost) for i in increases(emptied, {})] == [(100, False),
                                                                          (30, True)]  # fmt: skip
    # A new release counts in a new directory, from zero: what the old one grew since its
    # last sample is not read again.
    released = [kept("q", 1, 100, "s"), kept("q", 2, 30, "s2", where=KEPT + "-next")]
    assert [(i.output_tokens, i.lost) for i in increases(released, {})] == [(100, False),
                                                                           (30, True)]  # fmt: skip
    v = compute_usage(plan=plan(), hours=4, end=at(4), billed=hours("q", 2, 1.0),
                      samples=emptied, owners={"q": "qwen-3.6-27b"})  # fmt: skip
    row = next(m for m in v.models if m.model_id == "qwen-3.6-27b")
    assert row.counts_lost == 1 and "emptied" in (row.lost_why or "")


def test_counts_lost_at_restarts_are_counted_and_say_why() -> None:
    pix = next(m for m in view().models if m.model_id == "pixtral")
    assert (pix.restarts_seen, pix.counts_lost, pix.counts_kept) == (1, 1, False)
    assert "vLLM counted in its process's memory" in (pix.lost_why or "")


def test_billed_dollars_tokens_measured_cost_and_idle_hours() -> None:
    v = view()
    pix = next(m for m in v.models if m.model_id == "pixtral")
    assert (pix.hours_billed, pix.usd_billed, pix.output_tokens) == (4, 6.0, 550)
    assert pix.usd_per_million_measured == pytest.approx(6.0 / 550 * 1e6)
    assert pix.usd_per_million_estimate is not None  # the plan's full-load figure beside it
    assert (pix.idle_hours, pix.idle_usd) == (1, 1.5)
    assert v.foreign_usd == 5.0 and v.usd_billed == 6.5  # the foreign pod is not ours
    assert (v.idle_hours, v.output_tokens) == (1, 550)


def test_a_model_that_cannot_be_measured_says_why() -> None:
    unmeasured = view(measure=False)
    ollama = next(m for m in unmeasured.models if m.model_id == "qwen3-8b")
    assert ollama.output_tokens is None and ollama.idle_hours is None
    assert ollama.hours_billed == 2 and "eval_count" in (ollama.unmeasured or "")
    assert "measureUsage" in (ollama.unmeasured or "")
    sglang = next(m for m in unmeasured.models if m.model_id == "qwen-3.6-27b")
    assert "--enable-metrics" in (sglang.unmeasured or "")
    assert "measureUsage" in (sglang.unmeasured or "")
    # Measured, Ollama is counted by the keeper in front of it: here never sampled yet.
    measured = next(m for m in view().models if m.model_id == "qwen3-8b")
    assert "--record" in (measured.unmeasured or "")


def ollama_samples(uncounted: int) -> list[CounterSample]:
    """qwen3-8b's keeper read twice: 10 then 40 tokens, and `uncounted` answers by the second."""
    where = "/workspace/frutebox/counters/qwen3-8b/ollama-3.14.2-slim-bookworm"
    return [
        CounterSample(at=at(h), pod_id="c", model_id="qwen3-8b", started_at="s",
                      output_tokens=tokens, uncounted=n, counter_dir=where)
        for h, tokens, n in ((1, 10, 0), (2, 40, uncounted))
    ]  # fmt: skip


def test_answers_that_carried_no_count_make_the_output_a_lower_bound() -> None:
    samples = ollama_samples(uncounted=2)
    ollama = next(m for m in view(samples=samples).models if m.model_id == "qwen3-8b")
    assert ollama.unmeasured is None and ollama.output_tokens == 40
    assert ollama.answers_uncounted == 2 and ollama.lower_bound and not ollama.counts_lost


def test_a_measurable_pod_never_sampled_says_so() -> None:
    v = compute_usage(plan=plan(), hours=4, end=at(4), billed=hours("a", 2, 1.0), samples=[],
                      owners={"a": "pixtral"})  # fmt: skip
    (pix,) = [m for m in v.models if m.model_id == "pixtral"]
    assert pix.output_tokens is None and "--record" in (pix.unmeasured or "")


def test_billing_outside_the_window_is_not_counted() -> None:
    billed = hours("a", 6, 1.0, first=-2)  # 08:00-14:00; the window is 10:00-14:00
    v = compute_usage(plan=plan(), hours=4, end=at(4), billed=billed, samples=SAMPLES,
                      owners={"a": "pixtral"})  # fmt: skip
    pix = next(m for m in v.models if m.model_id == "pixtral")
    assert (pix.hours_billed, pix.usd_billed) == (4, 4.0)


def test_advice_names_the_window_that_would_have_saved_most_net_of_re_arms() -> None:
    # Busy 08:00-11:59 every day for a week, idle the rest: $1/h, around the clock.
    start = datetime(2026, 11, 30, 0, 0, tzinfo=UTC)  # a Monday
    billed = [BilledHour(pod_id="a", start=start + timedelta(hours=h), usd=1.0)
              for h in range(7 * 24)]  # fmt: skip
    served = {b.start for b in billed if 8 <= b.start.hour < 12}
    tip = advise("m", billed, served, rearm=0.5)
    assert tip is not None
    assert tip.window == "daily 08:00-12:00 UTC" and tip.openings == 7
    assert (tip.idle_usd, tip.saved_usd) == (7 * 20.0, 7 * 20.0 - 7 * 0.5)
    # Weekdays only: the weekend closed too.
    weekdays = {s for s in served if s.weekday() < 5}
    tip = advise("m", billed, weekdays, rearm=0.5)
    assert tip is not None and tip.window == "Mon-Fri 08:00-12:00 UTC"
    assert tip.saved_usd == 7 * 24 - 5 * 4 - 5 * 0.5


def test_no_advice_when_re_arming_costs_more_than_the_idle_hours_and_disarm_when_unused() -> None:
    billed = [BilledHour(pod_id="a", start=at(h), usd=1.0) for h in range(3)]
    assert advise("m", billed, {at(0), at(2)}, rearm=5.0) is None
    assert advise("m", billed, {at(0), at(1), at(2)}, rearm=0.1) is None  # nothing idle
    tip = advise("m", billed, set(), rearm=0.1)
    assert tip is not None and tip.window is None and tip.saved_usd == 3.0


def test_the_view_advises_from_its_own_hours() -> None:
    samples = [tok("a", "pixtral", h, 100.0 * min(h, 2), "s") for h in range(1, 25)]
    billed = hours("a", 24, 1.5)
    v = compute_usage(plan=plan(), hours=24, end=at(24), billed=billed, samples=samples,
                      owners={"a": "pixtral"})  # fmt: skip
    (tip,) = v.advice
    assert tip.model_id == "pixtral" and tip.window == "daily 10:00-12:00 UTC"
    assert tip.rearm_usd > 0 and tip.saved_usd == pytest.approx(
        22 * 1.5 - 2 * tip.rearm_usd, abs=1e-3
    )
