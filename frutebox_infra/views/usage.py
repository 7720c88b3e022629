"""What an answer really cost: RunPod's billed hours per pod beside the tokens its engine
counted, per model and for the stack, against the plan's estimates.

Pure: the shell (`commands/usage.py`) reads RunPod's hourly billing, the stack's outputs and the
engines' counters and hands plain records in. Counters an engine keeps in its memory reset when
its container starts, so a pod's count is the sum of its increases between samples: a sample
whose container start time changed, or whose value fell, counts its whole value as the
increase since the restart, and what was served between the sample before and the restart is
lost (the view counts those restarts and says the figure is a lower bound). Counters kept on
the volume (SGLang's and vLLM's prometheus_client multiprocess directory, one per model and
release) carry on across restarts and pods: they are one series per directory, and nothing is
lost unless the directory itself was emptied. An hour a pod billed in which its counters did
not move is idle.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from frutebox_infra.planner import FleetPlan, ModelPlan, SpeedEstimate
from frutebox_infra.planner.armed import placement_rearm_s
from frutebox_infra.plumbing.times import time_or_none
from frutebox_infra.recipes.counts import COUNTS_ENV

HOUR = timedelta(hours=1)
WINDOWS = {"24h": 24, "7d": 168, "30d": 720}
"""`--since` choices, in hours; billing is read in hour buckets over that many."""
COUNTING_FLAGS = {"sglang": "--enable-metrics", "llamacpp": "--metrics"}
"""Engines whose counters exist only when launched with this flag (vLLM counts by default)."""
SPEED_ERROR = 0.25
"""How far a measured decode rate may sit from the estimate before `usage` says so: the speed
model's spread on its calibration rows (bench/speed_calibration.py)."""


@dataclass(frozen=True, kw_only=True)
class BilledHour:
    """One `PodBillingRecord` of an hour bucket: what the pod billed from `start` for an hour."""

    pod_id: str
    start: datetime
    usd: float


@dataclass(frozen=True, kw_only=True)
class CounterSample:
    """A pod's engine counters read at `at` (None: the engine does not report that one)."""

    at: datetime
    pod_id: str
    model_id: str
    started_at: str | None = None
    """The container's start as RunPod shows it: a new one means the counters restarted."""
    output_tokens: float | None = None
    decode_seconds: float | None = None
    prompts: float | None = None
    uncounted: float | None = None
    """Answers that carried no count of their own (Ollama's counts keeper: an OpenAI-style
    stream whose client did not ask for usage)."""
    counter_dir: str | None = None
    """The directory on the volume the engine keeps these counters in (prometheus_client's
    multiprocess directory): they carry on across restarts and pods of the model. None: in the
    engine's memory, gone with its container."""


@dataclass(frozen=True, kw_only=True)
class ModelUsage:
    """One model's (or one shared pod's models') billed time, what it served, what it cost."""

    model_id: str
    engine: str
    pod_ids: tuple[str, ...]
    hours_billed: int
    """Pod-hours RunPod billed (an hour bucket with any charge counts as one)."""
    usd_billed: float
    output_tokens: float | None
    """None when not measured (`unmeasured` says why)."""
    prompts: float | None = None
    """ComfyUI: prompts executed (it emits no tokens)."""
    usd_per_million_measured: float | None = None
    usd_per_million_estimate: float | None = None
    decode_tok_s_measured: float | None = None
    decode_tok_s_estimate: float | None = None
    decode_error: float | None = None
    """The estimate's stated relative error (the speed model's), when known."""
    idle_hours: int | None = None
    idle_usd: float | None = None
    unmeasured: str | None = None
    restarts_seen: int = 0
    """Container restarts and pod replacements seen between its samples in the period."""
    counts_lost: int = 0
    """Of those (and counter directories found emptied), how many lost what was served since
    the sample before: the output counted is then a lower bound (`lost_why` says why)."""
    counts_kept: bool = False
    """Its counters are kept on the volume (they outlived every restart seen)."""
    lost_why: str | None = None
    answers_uncounted: int = 0
    """Answers served in the period that carried no count of their own: the output counted is
    then a lower bound too."""

    @property
    def lower_bound(self) -> bool:
        """Some output went uncounted (lost at a restart, or an answer without a count)."""
        return bool(self.counts_lost or self.answers_uncounted)

    @property
    def speed_off(self) -> bool:
        """Measured decode speed and the estimate differ by more than the stated error."""
        m, e, err = self.decode_tok_s_measured, self.decode_tok_s_estimate, self.decode_error
        if m is None or e is None or e <= 0:
            return False
        return abs(m - e) / e > (err if err is not None else SPEED_ERROR)


@dataclass(frozen=True, kw_only=True)
class Advice:
    """A model whose idle hours cost more than closing them would have cost in bring-ups: the
    window (or disarm) that would have saved the most over the period, and the saving."""

    model_id: str
    window: str | None
    """An `armedWindow` value, e.g. `Mon-Fri 08:00-20:00 UTC`; None: disarm it."""
    idle_usd: float
    saved_usd: float
    """Idle dollars the window would have avoided, less its bring-ups."""
    openings: int
    rearm_usd: float
    """One re-arm: the GPU's start and the weights read off the volume (they stay seeded)."""


@dataclass(frozen=True, kw_only=True)
class UsageView:
    """`frutebox usage`: per model and for the stack over the last `hours` hours."""

    stack: str
    hours: int
    start: datetime
    end: datetime
    models: tuple[ModelUsage, ...]
    foreign_usd: float = 0.0
    """Billed to pods of the account that are not this stack's (not counted above)."""
    advice: tuple[Advice, ...] = ()

    @property
    def usd_billed(self) -> float:
        return round(sum(m.usd_billed for m in self.models), 6)

    @property
    def hours_billed(self) -> int:
        return sum(m.hours_billed for m in self.models)

    @property
    def output_tokens(self) -> float:
        return sum(m.output_tokens or 0.0 for m in self.models)

    @property
    def idle_hours(self) -> int:
        return sum(m.idle_hours or 0 for m in self.models)

    @property
    def idle_usd(self) -> float:
        return round(sum(m.idle_usd or 0.0 for m in self.models), 6)


# ---- counters -> increases -------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Increase:
    """What a pod's counters grew by over (`after`, `upto`]."""

    pod_id: str
    after: datetime
    upto: datetime
    output_tokens: float = 0.0
    decode_seconds: float = 0.0
    prompts: float = 0.0
    uncounted: float = 0.0
    restarted: bool = False
    """A new container (a restart, or another pod of the model) since the sample before."""
    lost: bool = False
    """What was served between the sample before and the restart was not counted: the counters
    it grew were gone with the container (or their directory emptied)."""
    kept: bool = False
    """The counters are kept in a directory on the volume."""

    @property
    def served(self) -> bool:
        return self.output_tokens > 0 or self.prompts > 0


def _grew(now: float | None, before: float | None) -> float:
    if now is None:
        return 0.0
    if before is None or now < before:
        return now  # counted from zero since the container (or directory) started
    return now - before


def _fell(s: CounterSample, before: CounterSample) -> bool:
    """A counter lower than it was: the process (or the directory) counting it started over."""
    pairs = (
        (s.output_tokens, before.output_tokens),
        (s.decode_seconds, before.decode_seconds),
        (s.prompts, before.prompts),
        (s.uncounted, before.uncounted),
    )
    return any(now is not None and was is not None and now < was for now, was in pairs)


def _since_start(s: CounterSample, first_billed: Mapping[str, datetime]) -> datetime:
    """Where a count from zero began: the container's start, else the pod's first billed hour."""
    started = time_or_none(s.started_at)
    if started is not None and started <= s.at:
        return started
    return min(first_billed.get(s.pod_id, s.at - HOUR), s.at)


def increases(
    samples: Iterable[CounterSample], first_billed: Mapping[str, datetime]
) -> list[Increase]:
    """Each model's samples in time order as increases. Counters in an engine's memory are one
    series per container: a pod's first sample counts from the first hour it billed (its
    container started after that), a restart's from the container's start. Counters kept on
    the volume are one series per directory, across restarts and pods. A restart or another
    pod since the model's sample before loses what was served in between, unless the counters
    it grew are kept on the volume."""
    by_model: dict[str, list[CounterSample]] = {}
    for s in samples:
        by_model.setdefault(s.model_id, []).append(s)
    found = []
    for series in by_model.values():
        series.sort(key=lambda s: s.at)
        last: dict[tuple[str, str], CounterSample] = {}
        prev_model: CounterSample | None = None
        for s in series:
            key = ("dir", s.counter_dir) if s.counter_dir else ("pod", s.pod_id)
            new_container = prev_model is not None and (
                prev_model.pod_id != s.pod_id or prev_model.started_at != s.started_at
            )
            before = last.get(key)
            if s.counter_dir is None and new_container:
                before = None  # the process that counted it is gone: a new series
            fell = before is not None and _fell(s, before)
            if before is not None and not fell:
                after = before.at
            else:
                # Counted from zero since the container started (a directory first seen: since
                # the first container that counted in it, taken as this one).
                after = _since_start(s, first_billed)
                if prev_model is not None and after < prev_model.at:
                    after = prev_model.at  # a restart and a fall-back start time: no overlap
            base = before if before is not None and not fell else None
            found.append(
                Increase(
                    pod_id=s.pod_id,
                    after=after,
                    upto=s.at,
                    output_tokens=_grew(s.output_tokens, base.output_tokens if base else None),
                    decode_seconds=_grew(s.decode_seconds, base.decode_seconds if base else None),
                    prompts=_grew(s.prompts, base.prompts if base else None),
                    uncounted=_grew(s.uncounted, base.uncounted if base else None),
                    restarted=new_container,
                    # The counters grown since the sample before are gone with their container
                    # (or directory), unless they carried on in the same directory.
                    lost=(new_container or fell) and base is None,
                    kept=s.counter_dir is not None,
                )
            )
            last[key] = s
            prev_model = s
    return found


def _middle_hour(inc: Increase) -> datetime:
    """The hour bucket holding the middle of (after, upto]: where the increase is counted."""
    middle = inc.after + (inc.upto - inc.after) / 2
    return middle.replace(minute=0, second=0, microsecond=0)


def _hours_touched(inc: Increase) -> set[datetime]:
    """The hour buckets (by start) an increase over (after, upto] is put in: those it covers
    for half an hour or more, and the one holding its middle (a short interval's), so a
    sample taken a little after the hour does not mark the next hour as served."""
    touched = {_middle_hour(inc)}
    hour = inc.after.replace(minute=0, second=0, microsecond=0)
    while hour < inc.upto:
        overlap = min(hour + HOUR, inc.upto) - max(hour, inc.after)
        if overlap >= HOUR / 2:
            touched.add(hour)
        hour += HOUR
    return touched


# ---- the plan's side -------------------------------------------------------------------------

IN_MEMORY = {
    "sglang": "SGLang counted in its process's memory; set frutebox-infra:measureUsage: true to"
    " keep its counters on the volume",
    "vllm": "vLLM counted in its process's memory; with frutebox-infra:measureUsage: true and"
    " seeding on, its counters are kept on the volume",
    "llamacpp": "llama.cpp counted in its server's memory; behind the gateway, with"
    " frutebox-infra:measureUsage: true, the counts keeper keeps its counters on the volume",
    "comfyui": "ComfyUI keeps /history in the server's memory; behind the gateway, with"
    " frutebox-infra:measureUsage: true, the counts keeper keeps its count on the volume",
}
"""Why a restart loses an engine's counts, per engine whose counters are in its memory."""
EMPTIED = "its counter directory on the volume was found emptied (or replaced)"


def unmeasured_reason(plan: ModelPlan, *, private: bool = False) -> str | None:
    """Why this model's served output cannot be counted, or None when it can; `private`: the
    stack's pods publish no port."""
    placement = plan.placement
    if placement is None:
        return "the plan has no placement for it"
    if private:
        return (
            "the stack is private: its pod publishes no port, so its counters cannot be read"
            " from outside RunPod (only the account's own pods reach"
            f" <podId>.runpod.internal:{placement.pod.port})"
        )
    engine = str(placement.recipe.runtime)
    if engine == "ollama" and COUNTS_ENV not in placement.pod.env:
        return (
            "Ollama keeps no counters: each answer carries eval_count, which only the caller"
            " sees; set frutebox-infra:measureUsage: true and the counts keeper in front of it"
            " counts what the answers carry"
        )
    flag = COUNTING_FLAGS.get(engine)
    # A word of the launch, or of the engine's line in a launch script (the gateway first).
    if flag and not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", placement.pod.args):
        return f"{engine} is launched without {flag}: set frutebox-infra:measureUsage: true"
    return None


def _estimates(plan: ModelPlan) -> tuple[float | None, float | None, float | None]:
    """The plan's full-load $/1M output tokens, decode tok/s per stream and stated error."""
    speed = plan.placement.speed if plan.placement else None
    if not isinstance(speed, SpeedEstimate):
        return None, None, None
    return speed.usd_per_million_output_tokens, speed.decode_tok_s_per_stream, SPEED_ERROR


# ---- advice ----------------------------------------------------------------------------------

DAYS = {"daily": frozenset(range(7)), "Mon-Fri": frozenset(range(5))}
"""The day sets a window is sought over (weekday numbers, Monday 0)."""


def rearm_usd(plan: ModelPlan, volume_type: str) -> float:
    """What one opening of a window costs: the GPU billed through its start and, for an engine
    that loads at start, the weights read off the volume (they stay seeded between windows)."""
    placement = plan.placement
    if placement is None:
        return 0.0
    return placement_rearm_s(placement, volume_type) / 3600 * placement.usd_per_hour


def _window_text(days: str, first: int, last: int) -> str:
    return f"{days} {first:02d}:00-{last + 1:02d}:00 UTC"


def advise(
    model_id: str,
    hours_of: Sequence[BilledHour],
    served: set[datetime],
    rearm: float,
) -> Advice | None:
    """The window (UTC, whole hours, daily or weekdays) that would have saved the most: every
    served hour inside it, the idle billed hours outside it saved, one re-arm per day it
    opened. None when no window saves anything."""
    idle_usd = round(sum(b.usd for b in hours_of if b.start not in served), 6)
    if idle_usd <= 0:
        return None
    served_billed = [b for b in hours_of if b.start in served]
    if not served_billed:
        total = round(sum(b.usd for b in hours_of), 6)
        return Advice(model_id=model_id, window=None, idle_usd=idle_usd, saved_usd=total,
                      openings=0, rearm_usd=round(rearm, 4))  # fmt: skip
    best: Advice | None = None
    days_seen = {b.start.date() for b in hours_of}
    for label, weekdays in DAYS.items():
        if any(b.start.weekday() not in weekdays for b in served_billed):
            continue
        hours_served = {b.start.hour for b in served_billed}
        first, last = min(hours_served), max(hours_served)
        inside = [
            b for b in hours_of if b.start.weekday() in weekdays and first <= b.start.hour <= last
        ]
        outside = [b for b in hours_of if b not in inside]
        openings = sum(1 for d in days_seen if d.weekday() in weekdays)
        saved = round(sum(b.usd for b in outside) - openings * rearm, 6)
        if saved > 0 and (best is None or saved > best.saved_usd):
            best = Advice(model_id=model_id, window=_window_text(label, first, last),
                          idle_usd=idle_usd, saved_usd=saved, openings=openings,
                          rearm_usd=round(rearm, 4))  # fmt: skip
    return best


# ---- the view --------------------------------------------------------------------------------


def compute_usage(
    *,
    plan: FleetPlan,
    hours: int,
    end: datetime,
    billed: Sequence[BilledHour],
    samples: Sequence[CounterSample],
    owners: Mapping[str, str],
) -> UsageView:
    """The usage over [end - hours, end). `owners` says which pods were this stack's and for
    which model (the state's pods, the ledger's, and live pods carrying the stack's token);
    billing of any other pod is foreign and only totalled."""
    start = end - hours * HOUR
    in_window = [b for b in billed if start <= b.start < end and b.usd > 0]
    first_billed: dict[str, datetime] = {}
    for b in billed:
        first_billed[b.pod_id] = min(first_billed.get(b.pod_id, b.start), b.start)
    grown = [i for i in increases(samples, first_billed) if start <= _middle_hour(i) < end]
    served_hours: dict[str, set[datetime]] = {}
    for inc in grown:
        if inc.served:
            served_hours.setdefault(inc.pod_id, set()).update(_hours_touched(inc))
    sampled = {s.pod_id for s in samples}
    plans = {m.model_id: m for m in plan.models}
    rows = []
    advice: list[Advice] = []
    model_ids = list(dict.fromkeys([*plans, *owners.values()]))
    for model_id in model_ids:
        pods = sorted({p for p, m in owners.items() if m == model_id})
        hours_of = [b for b in in_window if b.pod_id in pods]
        model_plan = plans.get(model_id)
        engine = (
            str(model_plan.placement.recipe.runtime)
            if model_plan is not None and model_plan.placement is not None
            else "?"
        )
        reason = (
            unmeasured_reason(model_plan, private=plan.private)
            if model_plan is not None
            else "no longer in the plan: its engine's launch is not known"
        )
        if reason is None and hours_of and not any(p in sampled for p in pods):
            reason = "no counter sample of its pods yet (`frutebox usage --record` takes one)"
        usd = round(sum(b.usd for b in hours_of), 6)
        est_usd, est_tok_s, error = _estimates(model_plan) if model_plan else (None, None, None)
        if reason is not None:
            rows.append(
                ModelUsage(
                    model_id=model_id,
                    engine=engine,
                    pod_ids=tuple(pods),
                    hours_billed=len(hours_of),
                    usd_billed=usd,
                    output_tokens=None,
                    usd_per_million_estimate=est_usd,
                    decode_tok_s_estimate=est_tok_s,
                    decode_error=error,
                    unmeasured=reason,
                )
            )
            continue
        mine = [i for i in grown if i.pod_id in pods]
        lost = [i for i in mine if i.lost]
        whys = dict.fromkeys(EMPTIED if i.kept else IN_MEMORY.get(engine, "") for i in lost)
        tokens = sum(i.output_tokens for i in mine)
        prompts = sum(i.prompts for i in mine)
        decode_s = sum(i.decode_seconds for i in mine)
        timed = sum(i.output_tokens for i in mine if i.decode_seconds > 0)
        idle = [b for b in hours_of if b.start not in served_hours.get(b.pod_id, set())]
        comfy = engine == "comfyui"
        served_any = set().union(*(served_hours.get(p, set()) for p in pods))
        tip = advise(
            model_id,
            hours_of,
            served_any,
            rearm_usd(model_plan, plan.settings.volume_type) if model_plan else 0.0,
        )
        if tip is not None:
            advice.append(tip)
        rows.append(
            ModelUsage(
                model_id=model_id,
                engine=engine,
                pod_ids=tuple(pods),
                hours_billed=len(hours_of),
                usd_billed=usd,
                output_tokens=None if comfy else tokens,
                prompts=prompts if comfy else None,
                usd_per_million_measured=usd / tokens * 1e6 if tokens > 0 else None,
                usd_per_million_estimate=est_usd,
                decode_tok_s_measured=timed / decode_s if decode_s > 0 else None,
                decode_tok_s_estimate=est_tok_s,
                decode_error=error,
                idle_hours=len(idle),
                idle_usd=round(sum(b.usd for b in idle), 6),
                restarts_seen=sum(i.restarted for i in mine),
                counts_lost=len(lost),
                counts_kept=bool(mine) and mine[-1].kept,
                lost_why="; ".join(w for w in whys if w) or None,
                answers_uncounted=round(sum(i.uncounted for i in mine)),
            )
        )
    ours = set(owners)
    foreign = round(sum(b.usd for b in in_window if b.pod_id not in ours), 6)
    return UsageView(
        stack=plan.stack,
        hours=hours,
        start=start,
        end=end,
        models=tuple(r for r in rows if r.hours_billed or r.model_id in plans),
        foreign_usd=foreign,
        advice=tuple(advice),
    )
