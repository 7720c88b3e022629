"""Co-location: small models of one engine share one pod when that makes the fleet cheaper.

Pure: works on the per-model plans the planner already made. Only engines whose server holds
several models (`Recipe.sharing`) are grouped, and only members the server can serve with one
launch (Ollama's context and parallel slots are server-wide). A group's fit reuses fit.py's
estimate per member on the group's GPU and adds the members up under the one engine reserve
that estimate already counts (or, for a server that swaps models, takes the largest).

The grouping minimises the fleet's best-case $/h, then its worst case, then the number of
models that share (or, when that breaks the budget, the worst case first: `worst_first`).
Per class of compatible models it is exact up to `EXACT_LIMIT` members (dynamic programming
over subsets, with unfit sets pruned) and a greedy heuristic above.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TypeVar

from frutebox_infra.catalog.schema import Gpu, Registry
from frutebox_infra.estimates.fit import Fit, estimate
from frutebox_infra.estimates.speed import SpeedEstimate
from frutebox_infra.planner.floor import floor_of, meets
from frutebox_infra.planner.ranking import (
    PlacementOption,
    fit_request,
    gpu_price,
    image_gpu_problem,
)
from frutebox_infra.recipes.base import ServeOptions, Sharing
from frutebox_infra.stack.settings import StackSettings

EXACT_LIMIT = 10
"""Largest class of compatible models grouped exactly: 3^10 subset pairs plan in well under a
second; beyond it the greedy heuristic (see `_greedy`) decides."""

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True, order=True)
class Cost:
    """What a group, or a grouping, costs, compared in field order: its $/h in the case ranked
    first (the best case; the worst case when ranking worst case first), then in the other
    case, then how many models share a pod."""

    first_cents: int
    """Cents per hour in the case ranked first."""
    then_cents: int
    """Cents per hour in the other case."""
    shared_models: int

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            first_cents=self.first_cents + other.first_cents,
            then_cents=self.then_cents + other.then_cents,
            shared_models=self.shared_models + other.shared_models,
        )


@dataclass(frozen=True, kw_only=True)
class GroupPlacement:
    """One GPU type x count for a whole group, and each member's fit on it."""

    gpu: Gpu
    count: int
    usd_per_hour: float
    member_fits: tuple[Fit, ...]
    """In the group's member order."""
    needed_gb: float
    """Per GPU: the members' needs added up (SUM) or the largest (LARGEST), reserve included."""
    available_gb: float

    @property
    def label(self) -> str:
        return f"{self.count}x {self.gpu.name}"


@dataclass(frozen=True, kw_only=True)
class PodGroup:
    """Models served by one pod. `anchor` (the largest member) names the pod, so arming or
    disarming a smaller member updates that pod rather than creating another."""

    engine: str
    model_ids: tuple[str, ...]
    """The anchor first, then by id."""
    grouped: tuple[GroupPlacement, ...]
    """A shared pod's placements, cheapest first: the chosen one, then the fallbacks within
    the premium; empty for a pod of one model, whose placements are its `own`."""
    alone_usd_per_hour: float
    """What the members cost on a pod each (best case): the saving is measured against it."""
    sharing: Sharing | None = None
    own: tuple[PlacementOption, ...] = ()
    """A pod of one model: that model's placements, cheapest first."""

    @cached_property
    def placements(self) -> tuple[GroupPlacement, ...]:
        """Cheapest first: the chosen one, then the fallbacks within the premium. A pod of one
        model has its model's placements, made into the pod's when a report asks for them."""
        if self.grouped:
            return self.grouped
        return tuple(
            [
                GroupPlacement(
                    gpu=p.gpu,
                    count=p.count,
                    usd_per_hour=p.usd_per_hour,
                    member_fits=(p.fit,),
                    needed_gb=round(p.fit.needed_gb, 2),
                    available_gb=round(p.fit.available_gb, 2),
                )
                for p in self.own
            ]
        )

    @property
    def anchor(self) -> str:
        return self.model_ids[0]

    @property
    def shared(self) -> bool:
        return len(self.model_ids) > 1

    @property
    def placement(self) -> GroupPlacement:
        return self.placements[0]

    @property
    def usd_per_hour_best(self) -> float:
        return (self.grouped or self.own)[0].usd_per_hour

    @property
    def usd_per_hour_worst(self) -> float:
        return max([p.usd_per_hour for p in self.grouped or self.own])

    @property
    def saving_usd_per_hour(self) -> float:
        return round(self.alone_usd_per_hour - self.usd_per_hour_best, 2)


@dataclass(frozen=True, kw_only=True)
class Member:
    """What grouping needs to know about one planned model."""

    model_id: str
    alone: tuple[PlacementOption, ...]
    """Its own placements, cheapest first, the allowed fallbacks only."""
    min_sequences: int
    compatible: tuple[object, ...]
    """Members share a pod only with equal keys: engine, and what the server sets for all."""
    sharing: Sharing | None
    min_decode_tok_s: float = 0.0
    """Its stream-rate floor, which the group's GPU must meet for it too."""

    @property
    def weight_gb(self) -> float:
        return self.alone[0].fit.needed_gb


def members_of(
    plans: Iterable[tuple[str, tuple[PlacementOption, ...], bool]],
    settings: StackSettings,
) -> list[Member]:
    """Members from (model id, allowed placements cheapest first, may share) triples."""
    out = []
    for model_id, placements, may_share in plans:
        first = placements[0]
        override = settings.overrides.get(model_id)
        min_seq = (
            override.min_concurrent_sequences if override else None
        ) or settings.min_concurrent_sequences
        sharing = first.recipe.sharing if may_share else None
        serving = first.serving
        floor = floor_of(settings, override) if serving.token_context else 0.0
        out.append(
            Member(
                model_id=model_id,
                alone=placements,
                min_sequences=min_seq,
                compatible=(
                    str(first.recipe.runtime),
                    first.image.reference,
                    serving.context_tokens,
                    serving.concurrency,
                ),
                sharing=sharing,
                min_decode_tok_s=floor,
            )
        )
    return out


FitCache = dict[tuple[str, str, int], Fit]
"""A member's fit by (model id, GPU id, count): the same for every group it is tried in."""


def group_placements(
    registry: Registry,
    settings: StackSettings,
    members: Sequence[Member],
    cache: FitCache | None = None,
) -> tuple[GroupPlacement, ...]:
    """Per GPU type the smallest count the whole group fits, cheapest first, within the premium."""
    cache = {} if cache is None else cache
    sharing = members[0].sharing
    assert sharing is not None
    found: list[GroupPlacement] = []
    for gpu in registry.gpus:
        price = gpu_price(gpu, settings.cloud)
        if price is None or any(not _gpu_allowed(m, gpu) for m in members):
            continue
        for count in range(1, min(gpu.max_count, registry.max_gpus_per_pod) + 1):
            placement = _on(members, sharing, gpu, count, round(price * count, 2), cache)
            if placement is not None:
                found.append(placement)
                break
    found.sort(key=lambda p: (p.usd_per_hour, p.gpu.vram_gb * p.count))
    if not found:
        return ()
    ceiling = found[0].usd_per_hour * settings.max_fallback_premium + 1e-9
    return tuple(p for p in found if p.usd_per_hour <= ceiling)


def _gpu_allowed(member: Member, gpu: Gpu) -> bool:
    first = member.alone[0]
    if first.serving.require_fp8 and not gpu.fp8:
        return False
    return image_gpu_problem(first.image, gpu) is None


def _on(
    members: Sequence[Member],
    sharing: Sharing,
    gpu: Gpu,
    count: int,
    usd: float,
    cache: FitCache,
) -> GroupPlacement | None:
    fits: list[Fit] = []
    for m in members:
        first = m.alone[0]
        if first.recipe.count_problem(first.model, count) is not None:
            return None
        key = (m.model_id, gpu.id, count)
        fit = cache.get(key)
        if fit is None:
            options = ServeOptions(min_sequences=m.min_sequences)
            request = fit_request(first.model, first.recipe, first.serving, options, gpu)
            fit = estimate(request, gpu, count)
            if fit.fits and _below_floor(m, gpu, count):
                fit = replace(
                    fit,
                    fits=False,
                    reason=(f"below its floor of {m.min_decode_tok_s:g} tok/s per stream"),
                )
            cache[key] = fit
        if not fit.fits:
            return None
        fits.append(fit)
    # Every member's `needed_gb` already includes the engine's reserve once (its budget is the
    # card less that reserve), so adding needs and comparing with one budget counts it once.
    available = min(f.available_gb for f in fits)
    needs = [f.needed_gb for f in fits]
    needed = sum(needs) if sharing is Sharing.SUM else max(needs)
    if needed > available:
        return None
    return GroupPlacement(
        gpu=gpu,
        count=count,
        usd_per_hour=usd,
        member_fits=tuple(fits),
        needed_gb=round(needed, 2),
        available_gb=round(available, 2),
    )


def _below_floor(member: Member, gpu: Gpu, count: int) -> bool:
    """Does the member decode below its floor on `count` x `gpu` (estimated as if alone)?"""
    if member.min_decode_tok_s <= 0:
        return False
    speed = replace(member.alone[0], gpu=gpu, count=count).speed
    return isinstance(speed, SpeedEstimate) and not meets(speed, member.min_decode_tok_s)


def choose_groups(
    registry: Registry,
    settings: StackSettings,
    members: Sequence[Member],
    *,
    worst_first: bool = False,
) -> tuple[tuple[str, ...], ...]:
    """The cheapest grouping of `members` into pods, each a tuple of model ids (any order).

    `worst_first` ranks by the worst-case $/h before the best case: what the planner asks for
    when the cheapest grouping breaks the budget (checked on the worst case), since the
    grouping with the least worst case is within budget whenever any grouping is.
    """
    classes: dict[tuple[object, ...], list[Member]] = {}
    singles: list[tuple[str, ...]] = []
    for m in sorted(members, key=lambda m: m.model_id):
        if m.sharing is None:
            singles.append((m.model_id,))
        else:
            classes.setdefault(m.compatible, []).append(m)
    groups = list(singles)
    for key in sorted(classes, key=repr):
        cls = classes[key]
        search = _exact if len(cls) <= EXACT_LIMIT else _greedy
        groups += search(_Costs(registry, settings, cls, worst_first=worst_first))
    return tuple(groups)


class _Costs:
    """Group costs by member bitmask, computed once each; None where the group fits nowhere."""

    def __init__(
        self,
        registry: Registry,
        settings: StackSettings,
        members: list[Member],
        *,
        worst_first: bool = False,
    ):
        self.registry, self.settings, self.members = registry, settings, members
        self.worst_first = worst_first
        self._cache: dict[int, Cost | None] = {}
        self._fits: FitCache = {}

    def ids(self, mask: int) -> tuple[str, ...]:
        return tuple(m.model_id for i, m in enumerate(self.members) if mask >> i & 1)

    def cost(self, mask: int, *, prune: bool = True) -> Cost | None:
        """`prune`: trust that a subset one member smaller was priced first (the exact search
        does so), and call a group unfit when such a subset fits nowhere."""
        if mask in self._cache:
            return self._cache[mask]
        chosen = [m for i, m in enumerate(self.members) if mask >> i & 1]
        result: Cost | None
        if len(chosen) == 1:
            prices = [p.usd_per_hour for p in chosen[0].alone]
            result = self._ranked(_cents(prices[0]), _cents(max(prices)), 0)
        elif prune and any(self._cache.get(mask & ~(1 << i), ()) is None for i in _bits(mask)):
            result = None  # a member less already fits nowhere: a member more cannot either
        else:
            placements = group_placements(self.registry, self.settings, chosen, self._fits)
            result = (
                self._ranked(
                    _cents(placements[0].usd_per_hour),
                    _cents(max(p.usd_per_hour for p in placements)),
                    len(chosen),
                )
                if placements
                else None
            )
        self._cache[mask] = result
        return result

    def _ranked(self, best: int, worst: int, shared: int) -> Cost:
        first, then = (worst, best) if self.worst_first else (best, worst)
        return Cost(first_cents=first, then_cents=then, shared_models=shared)


def _exact(costs: _Costs) -> list[tuple[str, ...]]:
    """Optimal partition: best(S) = min over T ∋ lowest(S) of cost(T) + best(S \\ T)."""
    n = len(costs.members)
    # Costs of subsets in order of size, so the pruning in `_Costs.cost` sees every subset
    # one member smaller before it is asked about a larger one.
    for size in range(1, n + 1):
        for mask in range(1, 1 << n):
            if mask.bit_count() == size:
                costs.cost(mask)
    nothing = Cost(first_cents=0, then_cents=0, shared_models=0)
    best: dict[int, tuple[Cost, tuple[int, ...]]] = {0: (nothing, ())}
    for mask in range(1, 1 << n):
        low = mask & -mask
        rest_bits = mask & ~low
        winner: tuple[Cost, tuple[int, ...]] | None = None
        sub = rest_bits
        while True:
            group = sub | low
            cost = costs.cost(group)
            if cost is not None:
                before, parts = best[mask & ~group]
                total = cost + before
                if winner is None or total < winner[0]:
                    winner = (total, (group, *parts))
            if sub == 0:
                break
            sub = (sub - 1) & rest_bits
        assert winner is not None  # every member alone always fits
        best[mask] = winner
    return [costs.ids(g) for g in best[(1 << n) - 1][1]]


def _greedy(costs: _Costs) -> list[tuple[str, ...]]:
    """Largest first, each model joins the open group it makes cheapest to run, or stays
    alone when no join costs less than its own pod. Every join saves, so the result never
    costs more than a pod per model; it is not always optimal (bench/colocation.py says how
    close it comes)."""
    order = sorted(
        range(len(costs.members)),
        key=lambda i: (-costs.members[i].weight_gb, costs.members[i].model_id),
    )
    groups: list[int] = []
    for i in order:
        bit = 1 << i
        alone = costs.cost(bit)
        assert alone is not None
        best_gain, best_at = 0, -1
        for at, group in enumerate(groups):
            joined = costs.cost(group | bit, prune=False)
            before = costs.cost(group)
            if joined is None or before is None:
                continue
            gain = before.first_cents + alone.first_cents - joined.first_cents
            if gain > best_gain:
                best_gain, best_at = gain, at
        if best_at < 0:
            groups.append(bit)
        else:
            groups[best_at] |= bit
    return [costs.ids(g) for g in groups]


def all_partitions(items: Sequence[T]) -> Iterator[list[list[T]]]:
    """Every way to split `items` into groups (Bell(n) of them): the exhaustive reference the
    tests and bench/colocation.py check the subset search against, never used to plan."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in all_partitions(rest):
        yield [[first], *part]
        for i in range(len(part)):
            yield [*part[:i], [first, *part[i]], *part[i + 1 :]]


def _bits(mask: int) -> Iterable[int]:
    i = 0
    while mask:
        if mask & 1:
            yield i
        mask >>= 1
        i += 1


def _cents(usd: float) -> int:
    return round(usd * 100)


def shares(total_usd: float, weights: Sequence[float]) -> tuple[float, ...]:
    """`total_usd` split in proportion to `weights`, in whole cents that add up exactly
    (largest remainder; ties to the earlier member)."""
    cents = _cents(total_usd)
    whole = sum(weights)
    exact = [cents * w / whole if whole else cents / len(weights) for w in weights]
    floors = [int(x) for x in exact]
    left = cents - sum(floors)
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - floors[i]), i))
    for i in order[:left]:
        floors[i] += 1
    return tuple(c / 100 for c in floors)


def group_pods(
    registry: Registry,
    settings: StackSettings,
    planned: Sequence[tuple[str, tuple[PlacementOption, ...]]],
) -> tuple[tuple[PodGroup, ...], dict[str, tuple[PlacementOption, ...]]]:
    """Pods for the planned models (id, allowed placements cheapest first), one each unless
    `settings.colocate` finds sharing cheaper, in the order of their first member; and each
    model's placements as seen from its pod."""
    if not settings.colocate:
        # A pod per model, seen from which a model's placements are its own.
        alone = tuple(alone_pod(mid, placements, None) for mid, placements in planned)
        return alone, dict(planned)
    members = members_of(
        ((mid, placements, not _own_pod(settings, mid)) for mid, placements in planned),
        settings,
    )
    by_id = {m.model_id: m for m in members}
    groups = choose_groups(registry, settings, members)
    pods, views = _build(registry, settings, groups, by_id)
    worst = sum(p.usd_per_hour_worst for p in pods)
    if worst > settings.budget_usd_per_hour + 1e-9:
        # The cheapest grouping breaks the budget in the worst case: take the grouping with
        # the least worst case, which is within budget whenever any grouping is.
        groups = choose_groups(registry, settings, members, worst_first=True)
        pods, views = _build(registry, settings, groups, by_id)
    order = {mid: i for i, (mid, _) in enumerate(planned)}
    pods.sort(key=lambda p: min(order[i] for i in p.model_ids))
    return tuple(pods), views


def _own_pod(settings: StackSettings, model_id: str) -> bool:
    override = settings.overrides.get(model_id)
    return override is not None and (
        override.own_pod or override.gpu is not None or override.gpu_count is not None
    )


def _build(
    registry: Registry,
    settings: StackSettings,
    groups: Sequence[tuple[str, ...]],
    by_id: Mapping[str, Member],
) -> tuple[list[PodGroup], dict[str, tuple[PlacementOption, ...]]]:
    views: dict[str, tuple[PlacementOption, ...]] = {}
    pods = []
    for ids in groups:
        pod, seen = build_pod(registry, settings, [by_id[i] for i in ids])
        pods.append(pod)
        views.update(seen)
    return pods, views


def build_pod(
    registry: Registry, settings: StackSettings, members: Sequence[Member]
) -> tuple[PodGroup, dict[str, tuple[PlacementOption, ...]]]:
    """The pod of one chosen group, and each member's placements as seen from it: the pod's
    GPU, the member's own fit there, and its share of the pod's $/h (in proportion to the
    memory it needs, in cents that add up to the pod's price)."""
    if len(members) == 1:
        only = members[0]
        return alone_pod(only.model_id, only.alone, only.sharing), {only.model_id: only.alone}
    alone = sum(m.alone[0].usd_per_hour for m in members)
    ordered = sorted(members, key=lambda m: (-m.weight_gb, m.model_id))
    placements = group_placements(registry, settings, ordered)
    assert placements, "choose_groups only returns groups that fit"
    views: dict[str, list[PlacementOption]] = {m.model_id: [] for m in ordered}
    for gp in placements:
        split = shares(gp.usd_per_hour, [f.needed_gb for f in gp.member_fits])
        for m, fit, usd in zip(ordered, gp.member_fits, split, strict=True):
            views[m.model_id].append(
                replace(m.alone[0], gpu=gp.gpu, count=gp.count, usd_per_hour=usd, fit=fit)
            )
    pod = PodGroup(
        engine=str(ordered[0].alone[0].recipe.runtime),
        model_ids=tuple(m.model_id for m in ordered),
        grouped=placements,
        alone_usd_per_hour=round(alone, 2),
        sharing=ordered[0].sharing,
    )
    return pod, {k: tuple(v) for k, v in views.items()}


def alone_pod(
    model_id: str, placements: tuple[PlacementOption, ...], sharing: Sharing | None
) -> PodGroup:
    """The pod of a model that shares it with none: its own placements, as the pod's."""
    first = placements[0]
    return PodGroup(
        engine=str(first.recipe.runtime),
        model_ids=(model_id,),
        grouped=(),
        alone_usd_per_hour=round(first.usd_per_hour, 2),
        sharing=sharing,
        own=placements,
    )
