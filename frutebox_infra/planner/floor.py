"""The owner's stream-rate floor: which of a model's placements decode fast enough per stream,
in what order they are taken, and the figures of those refused.

Per GPU type the resolver ranks the smallest count that fits. Where that count decodes below
the floor and more GPUs add bandwidth to a stream (tensor parallelism; not llama.cpp's layer
split, where the GPUs take turns), the next larger count that fits is tried at its own price.
The placements that meet the floor are ranked by $/h (the default) or by $ per 1M output tokens
at full load, and the fallbacks are those within the stack's premium of the chosen one on that
same measure. A placement without an estimate (a fact is missing) is taken unchecked, and the
plan says so; a diffusion pipeline has no token rate and no floor.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Protocol

from frutebox_infra.estimates.speed import (
    LAYER_SPLIT_ENGINES,
    SpeedEstimate,
    SpeedUnknown,
    Workload,
    estimate_speed,
)
from frutebox_infra.planner.count_search import Fitting, GpuRow
from frutebox_infra.planner.placement_speed import speed_inputs
from frutebox_infra.planner.ranking import PlacementOption, Ranking
from frutebox_infra.planner.resolver import PlanProblem, Resolution
from frutebox_infra.stack.settings import ModelOverride, RankBy, StackSettings


@dataclass(frozen=True, kw_only=True)
class BelowFloor:
    """A placement refused for its speed, with the decode rate that refused it."""

    ranked: Fitting
    decode_tok_s_per_stream: float
    floor: float
    ranking: Ranking = field(compare=False, repr=False)

    @property
    def placement(self) -> PlacementOption:
        """Built when a report asks: most refusals are only counted."""
        return self.ranking.option(self.ranked)

    @property
    def estimate(self) -> SpeedEstimate:
        """The refused placement's whole estimate, worked out when a report asks."""
        speed = self.ranking.speed(self.ranked)
        assert isinstance(speed, SpeedEstimate)  # refused by its estimate
        return speed

    def __str__(self) -> str:
        ranked = self.ranked
        return (
            f"{ranked.count}x {self.ranking.registry.gpus[ranked.position].name}:"
            f" {self.decode_tok_s_per_stream:.1f} tok/s per stream at"
            f" {self.ranking.serving.concurrency} streams < {self.floor:g}"
        )


@dataclass(frozen=True, kw_only=True)
class SpeedChoice:
    """A model's placements after the floor: taken (chosen first), refused, and unchecked."""

    taken: tuple[PlacementOption, ...]
    below_floor: tuple[BelowFloor, ...] = ()
    """Refused placements the walk reached before it stopped, cheapest first."""
    unchecked: tuple[PlacementOption, ...] = field(default=())
    """Taken placements without an estimate: the floor was not checked there."""


def choose(ranking: Ranking, *, floor: float, rank_by: RankBy, premium: float) -> SpeedChoice:
    """The placements to take from `ranking` under `floor` tok/s per stream, ranked by
    `rank_by`, fallbacks within `premium` times the chosen one. Only the placements the walk
    reaches are built, and only their decode rates worked out (their whole estimates when
    asked for)."""
    if floor <= 0 and rank_by == "usdPerHour":
        # Nothing to estimate: the cheapest and everything within the premium, as ranked.
        return SpeedChoice(taken=ranking.within(premium))
    walk = _Walk(ranking, floor)
    if rank_by == "usdPerHour":
        taken = walk.taken(premium)
        unchecked = tuple(walk.unknown)  # every placement walked and taken, in order
    else:
        taken = _by_usd_per_million(walk.taken(None), premium)
        unchecked = tuple(p for p in taken if isinstance(p.speed, SpeedUnknown))
    return SpeedChoice(taken=taken, below_floor=tuple(walk.below), unchecked=unchecked)


@dataclass(frozen=True, kw_only=True, order=True)
class _Larger:
    """A larger count to walk, ordered by its $/h, then VRAM, then the order it was pushed in
    (no two alike, so nothing after it is compared). A pending one (with its GPU type's `row`)
    is the least a refused count's larger count can be (the next allowed count, fit or not),
    searched when the walk reaches it: many walks end before."""

    usd_per_hour: float
    vram_gb: int
    order: int
    fitting: Fitting = field(compare=False)
    row: GpuRow | None = field(compare=False)
    """While pending: the GPU type's row to search."""

    @classmethod
    def of(cls, fitting: Fitting, order: int, row: GpuRow | None) -> _Larger:
        return cls(
            usd_per_hour=fitting.usd_per_hour,
            vram_gb=fitting.vram_gb,
            order=order,
            fitting=fitting,
            row=row,
        )

    def before(self, ranked: Fitting) -> bool:
        """Walked before `ranked`: cheaper, or as cheap with less VRAM (a tie walks the ranked
        one first)."""
        return (self.usd_per_hour, self.vram_gb) < (ranked.usd_per_hour, ranked.vram_gb)


class _Walk:
    """Placements cheapest per hour first (then less VRAM), each refused one followed by its
    next count where more GPUs speed a stream (not llama.cpp's layer split, where they take
    turns). The ranking is in that order already: only the counts refusals add wait in a
    heap, behind a ranked placement they tie with."""

    def __init__(self, ranking: Ranking, floor: float):
        self.ranking = ranking
        self.floor = floor
        self.below: list[BelowFloor] = []
        self.unknown: list[PlacementOption] = []
        """Taken without an estimate, in the order taken."""

    def taken(self, premium: float | None) -> tuple[PlacementOption, ...]:
        """The placements that meet the floor: those up to `premium` times the first taken's
        $/h, or every one where `premium` is None."""
        ranking, floor, below, unknown = self.ranking, self.floor, self.below, self.unknown
        more_gpus_help = ranking.recipe.runtime not in LAYER_SPLIT_ENGINES
        gpus, ranked = ranking.registry.gpus, ranking.ranked
        rate_on = ranking.speed_model.decode_rate
        at, last = 0, len(ranked)
        larger: list[_Larger] = []
        taken: list[PlacementOption] = []
        ceiling = math.inf
        while True:
            if at < last:
                r = ranked[at]
                top = larger[0] if larger else None
                if top is not None and top.before(r):
                    if top.usd_per_hour > ceiling:
                        break
                    heapq.heappop(larger)
                    r = top.fitting
                    if top.row is not None:
                        self._search(larger, top)
                        continue
                else:
                    if r.usd_per_hour > ceiling:
                        break
                    at += 1
            elif larger and larger[0].usd_per_hour <= ceiling:
                top = heapq.heappop(larger)
                r = top.fitting
                if top.row is not None:
                    self._search(larger, top)
                    continue
            else:
                break
            rate = rate_on(gpus[r.position], r.count)
            if not isinstance(rate, float) or rate >= floor:
                p = ranking.option(r)
                taken.append(p)
                if isinstance(rate, SpeedUnknown):
                    unknown.append(p)
                if premium is not None:
                    ceiling = min(ceiling, p.usd_per_hour * premium + 1e-9)
                continue
            below.append(
                BelowFloor(ranked=r, decode_tok_s_per_stream=rate, floor=floor, ranking=ranking)
            )
            if more_gpus_help:
                row = ranking.row(r.position)
                more = ranking.next_count(r, row)
                if more is not None:
                    order = last + len(below)  # after every ranked one, as pushed
                    heapq.heappush(larger, _Larger.of(more, order, row))
        return tuple(taken)

    def _search(self, larger: list[_Larger], pending: _Larger) -> None:
        """A pending larger count searched: the count that fits from it up joins the walk in
        its place (its $/h and VRAM are at least the pending one's, so none walked before it
        would have come after)."""
        row = pending.row
        assert row is not None
        found = self.ranking.fitting_from(pending.fitting, row)
        if found is not None:
            heapq.heappush(larger, _Larger.of(found, pending.order, None))


class DecodeRate(Protocol):
    """What the floor reads of an estimate (whole or its decode first)."""

    @property
    def decode_tok_s_per_stream(self) -> float: ...


def meets(speed: DecodeRate, floor: float) -> bool:
    return speed.decode_tok_s_per_stream >= floor


def _by_usd_per_million(
    placements: tuple[PlacementOption, ...], premium: float
) -> tuple[PlacementOption, ...]:
    """Cheapest per output token first (unknown last, by $/h); fallbacks within the premium of
    the chosen one's $ per 1M, or of its $/h where no placement has an estimate."""
    if not placements:
        return ()
    order = sorted(placements, key=lambda p: (_per_million(p), p.usd_per_hour, p.total_vram_gb))
    best = _per_million(order[0])
    if math.isinf(best):
        ceiling = order[0].usd_per_hour * premium + 1e-9
        return tuple(p for p in order if p.usd_per_hour <= ceiling)
    return tuple(p for p in order if _per_million(p) <= best * premium + 1e-9)


def _per_million(p: PlacementOption) -> float:
    speed = p.speed
    if isinstance(speed, SpeedEstimate) and speed.usd_per_million_output_tokens is not None:
        return speed.usd_per_million_output_tokens
    return math.inf


def streams_meeting(p: PlacementOption, floor: float) -> tuple[int, SpeedEstimate] | None:
    """The most streams, fewer than configured, at which `p` meets `floor`, with its figures."""
    placement, load = speed_inputs(p.recipe, p.model, p.serving, p.gpu, p.count, p.usd_per_hour)
    for streams in range(load.concurrency - 1, 0, -1):
        fewer = Workload(
            concurrency=streams,
            context_tokens=load.context_tokens,
            prompt_tokens=load.prompt_tokens,
            output_tokens=load.output_tokens,
        )
        speed = estimate_speed(p.model, placement, fewer, p.speeds.facts)
        if isinstance(speed, SpeedEstimate) and meets(speed, floor):
            return streams, speed
    return None


def floor_problem(model_id: str, choice: SpeedChoice, floor: float, key: str) -> PlanProblem:
    """Why no placement of `model_id` is taken: every one decodes below `floor`, with the figures,
    and the fixes: fewer streams on the cheapest, or a lower floor at `key`."""
    below = choice.below_floor
    fastest = max(below, key=lambda b: b.decode_tok_s_per_stream)
    shown = "; ".join(str(b) for b in below[:4])
    more = f"; {len(below) - 4} more, the fastest {fastest}" if len(below) > 4 else ""
    cheapest = below[0].placement
    fewer = streams_meeting(cheapest, floor)
    lower = f"frutebox-infra:overrides.{model_id}.concurrency"
    streams = (
        f"lower {lower} to {fewer[0]} ({cheapest.label} then decodes"
        f" {fewer[1].decode_tok_s_per_stream:.1f} tok/s per stream), "
        if fewer is not None
        else ""
    )
    return PlanProblem(
        rule="below-speed-floor",
        message=f"{model_id}: no placement decodes {floor:g} tok/s per stream by the speed model's"
        f" estimate: {shown}{more}",
        fix=f"{streams}pin a faster GPU (overrides.{model_id}.gpu), or lower {key} (to"
        f" {math.floor(fastest.decode_tok_s_per_stream * 10) / 10:g} or less to take"
        f" {fastest.placement.label})",
    )


def floor_of(settings: StackSettings, override: ModelOverride | None) -> float:
    """The floor a model's placements are held to: its override's, else the stack's."""
    if override is not None and override.min_decode_tok_s is not None:
        return override.min_decode_tok_s
    return settings.min_decode_tok_s


def floor_key(override: ModelOverride | None, model_id: str) -> str:
    """The stack key that sets a model's floor, as a fix names it."""
    if override is not None and override.min_decode_tok_s is not None:
        return f"frutebox-infra:overrides.{model_id}.minDecodeTokensPerSecond"
    return (
        f"frutebox-infra:minDecodeTokensPerSecond (or overrides.{model_id}"
        ".minDecodeTokensPerSecond)"
    )


def cheapest_at_floor(resolution: Resolution, floor: float) -> SpeedChoice | None:
    """The cheapest placement per hour of `resolution` that decodes `floor` tok/s per stream
    (the catalog's view of what a stack with that floor takes); None where nothing fits."""
    if resolution.ranking is None:
        return None
    token = resolution.serving is not None and resolution.serving.token_context
    return choose(
        resolution.ranking, floor=floor if token else 0.0, rank_by="usdPerHour", premium=1.0
    )
