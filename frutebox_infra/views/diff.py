"""Cost and fit difference of one stack's plan before and after a config change (pure)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from enum import StrEnum

from frutebox_infra.planner import HOURS_PER_MONTH, FleetPlan, ModelPlan, PlanProblem, SpeedEstimate


class Change(StrEnum):
    ADDED = "added"
    REMOVED = "removed"
    CHANGED = "changed"
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class ModelSnapshot:
    """What a reviewer compares for one armed model on one side of the change."""

    engine: str | None
    image: str | None
    gpu: str | None
    """GPU type name of the placement taken (None when the model cannot be placed)."""
    gpu_count: int | None
    usd_per_hour_best: float
    """USD per hour of the pod on the placement taken."""
    usd_per_hour_worst: float
    """USD per hour of the dearest allowed fallback placement."""
    fallbacks: int
    context_tokens: int | None
    full_context_sequences: float | None
    """Full-context sequences the placement holds; None for a coarse (headroom-rule) estimate."""
    configured_sequences: int | None
    problems: tuple[str, ...]
    decode_tok_s_per_stream: float | None = None
    """The speed model's estimate at the configured streams (None: no estimate or no tokens)."""
    decode_tok_s_aggregate: float | None = None
    usd_per_million_output_tokens: float | None = None

    @property
    def placement(self) -> str | None:
        return f"{self.gpu_count}x {self.gpu}" if self.gpu else None


@dataclass(frozen=True)
class ModelChange:
    """One model across the change: armed before, after, or both."""

    model_id: str
    before: ModelSnapshot | None
    after: ModelSnapshot | None

    @property
    def change(self) -> Change:
        if self.before is None:
            return Change.ADDED
        if self.after is None:
            return Change.REMOVED
        return Change.CHANGED if self.changed_fields else Change.UNCHANGED

    @property
    def changed_fields(self) -> tuple[str, ...]:
        """Snapshot fields that differ; every field for a model added or removed."""
        names = tuple(f.name for f in fields(ModelSnapshot))
        if self.before is None or self.after is None:
            return names
        return tuple(n for n in names if getattr(self.before, n) != getattr(self.after, n))

    @property
    def usd_per_hour_best(self) -> Amount:
        return Amount(_usd(self.before, best=True), _usd(self.after, best=True))

    @property
    def usd_per_hour_worst(self) -> Amount:
        return Amount(_usd(self.before, best=False), _usd(self.after, best=False))


@dataclass(frozen=True)
class Amount:
    """A number before and after the change (0 on a side where the stack does not exist)."""

    before: float
    after: float

    @property
    def delta(self) -> float:
        # `+ 0.0` turns -0.0 into 0.0 so an unchanged amount never prints as "-$0.00".
        return round(self.after - self.before, 2) + 0.0


@dataclass(frozen=True)
class FleetDiff:
    """A stack's plan before and after a config change, and the verdict on the after side."""

    stack: str
    base_exists: bool
    head_exists: bool
    models: tuple[ModelChange, ...]
    """Every model armed on either side, by id."""
    usd_per_hour_best: Amount
    usd_per_hour_worst: Amount
    usd_per_month_best: Amount
    usd_per_month_worst: Amount
    """Pods for 730 h plus the volume as it will really be (it never shrinks)."""
    volume_size_gb: Amount
    """Before: the base plan's size; after: the larger of that and the head plan's size."""
    volume_planned_gb: int
    """What the head plan asks for; a request below the current size is ignored by `up`."""
    volume_usd_per_month: Amount
    budget_usd_per_hour: Amount
    within_budget: bool | None
    """The after side's verdict; None when the stack is removed."""
    budget_headroom_usd_per_hour: float | None
    problems: tuple[PlanProblem, ...]
    """Problems of the after side: each one fails `pulumi preview`."""
    warnings: tuple[str, ...]
    windowed: bool = False
    """A side has armed windows: its month counts only armed hours plus a bring-up each."""
    first_deploy_usd: Amount = Amount(0.0, 0.0)
    """Bringing the whole stack up from nothing: seeding plus GPU time before serving."""
    added_bringup_usd: float = 0.0
    """Bringing up what the change arms, once: its seeds and GPU time before it serves."""

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def changes(self) -> tuple[ModelChange, ...]:
        return tuple(m for m in self.models if m.change is not Change.UNCHANGED)

    @property
    def unchanged(self) -> tuple[str, ...]:
        return tuple(m.model_id for m in self.models if m.change is Change.UNCHANGED)

    @property
    def volume_shrink_ignored(self) -> bool:
        """True when the head plan asks for a smaller volume than exists: it keeps its size."""
        return self.volume_planned_gb < self.volume_size_gb.before


@dataclass(frozen=True, kw_only=True)
class DiffView:
    """A change's diff and what to call its two sides (a ref, or the work tree)."""

    diff: FleetDiff
    base: str
    head: str


def snapshot(m: ModelPlan) -> ModelSnapshot:
    p = m.placement
    serving = m.resolution.serving
    image = m.resolution.image
    seqs = p.fit.full_context_sequences if p else None
    speed = p.speed if p else None
    known = speed if isinstance(speed, SpeedEstimate) else None
    per_million = known.usd_per_million_output_tokens if known else None
    return ModelSnapshot(
        engine=m.resolution.engine,
        image=image.reference if image else None,
        gpu=p.gpu.name if p else None,
        gpu_count=p.count if p else None,
        usd_per_hour_best=round(m.usd_per_hour_best, 2),
        usd_per_hour_worst=round(m.usd_per_hour_worst, 2),
        fallbacks=len(m.fallbacks),
        context_tokens=serving.context_tokens if serving and serving.token_context else None,
        full_context_sequences=None if seqs is None else round(seqs, 2),
        configured_sequences=p.fit.configured_sequences if p else None,
        problems=tuple(str(x) for x in m.problems),
        # Rounded as shown, so a shift in the last digit of a float is no change.
        decode_tok_s_per_stream=round(known.decode_tok_s_per_stream, 1) if known else None,
        decode_tok_s_aggregate=round(known.decode_tok_s_aggregate) if known else None,
        usd_per_million_output_tokens=None if per_million is None else round(per_million, 2),
    )


def diff_plans(before: FleetPlan | None, after: FleetPlan | None) -> FleetDiff:
    """Compare two plans of one stack; None is a side where the stack file does not exist."""
    old = {m.model_id: snapshot(m) for m in before.models} if before else {}
    new = {m.model_id: snapshot(m) for m in after.models} if after else {}
    models = tuple(ModelChange(i, old.get(i), new.get(i)) for i in sorted(old.keys() | new.keys()))

    def side(get: Callable[[FleetPlan], float]) -> Amount:
        return Amount(get(before) if before else 0.0, get(after) if after else 0.0)

    # The volume is protected and grow-only: after a shrinking change, and even after the stack
    # file is removed, it keeps its size and bills for it.
    planned = after.volume.size_gb if after else 0
    old_size = before.volume.size_gb if before else 0
    real = after.with_volume_at_least(old_size) if after else before
    kept = real.volume.size_gb if real else 0
    kept_usd = real.volume.usd_per_month if real else 0.0
    best = side(lambda p: p.usd_per_hour_best)
    worst = side(lambda p: p.usd_per_hour_worst)
    return FleetDiff(
        stack=after.stack if after else before.stack if before else "",
        base_exists=before is not None,
        head_exists=after is not None,
        models=models,
        usd_per_hour_best=best,
        usd_per_hour_worst=worst,
        # Armed windows: only the armed hours and a bring-up per opening (plan.py).
        usd_per_month_best=Amount(
            before.usd_per_month_best if before else 0.0,
            round(after.pods_usd_per_month(worst=False) + kept_usd, 2)
            if after and after.windows
            else round(best.after * HOURS_PER_MONTH + kept_usd, 2),
        ),
        usd_per_month_worst=Amount(
            before.usd_per_month_worst if before else 0.0,
            round(after.pods_usd_per_month(worst=True) + kept_usd, 2)
            if after and after.windows
            else round(worst.after * HOURS_PER_MONTH + kept_usd, 2),
        ),
        volume_size_gb=Amount(old_size, kept),
        volume_planned_gb=planned,
        volume_usd_per_month=Amount(before.volume.usd_per_month if before else 0.0, kept_usd),
        budget_usd_per_hour=side(lambda p: p.settings.budget_usd_per_hour),
        windowed=bool((before and before.windows) or (after and after.windows)),
        within_budget=after.within_budget if after else None,
        budget_headroom_usd_per_hour=after.budget_headroom_usd_per_hour if after else None,
        problems=after.problems if after else (),
        warnings=after.warnings if after else (),
        first_deploy_usd=side(_first_deploy_usd),
        added_bringup_usd=_added_bringup_usd(after, models),
    )


def _first_deploy_usd(plan: FleetPlan) -> float:
    return plan.seeding.first_deploy.total_usd if plan.seeding else 0.0


def _added_bringup_usd(after: FleetPlan | None, models: tuple[ModelChange, ...]) -> float:
    seeding = after.seeding if after else None
    if seeding is None:
        return 0.0
    added = [seeding.of(m.model_id) for m in models if m.change is Change.ADDED]
    return round(sum(d.bringup.seed_usd + d.bringup.gpu_before_serving_usd for d in added if d), 2)


def _usd(side: ModelSnapshot | None, *, best: bool) -> float:
    if side is None:
        return 0.0
    return side.usd_per_hour_best if best else side.usd_per_hour_worst
