"""Where one model fits: per GPU type the smallest count that fits, ranked cheapest first.

The search asks every GPU type and count only whether the model fits; the placements it
ranks (the fit estimated in full, the pod rendered) are built when asked for, since most
are ranked and never taken, and the reasons the other GPU types refuse it only when a
problem or a report needs them.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from functools import cached_property

from frutebox_infra.catalog.schema import Cloud, Gpu, Image, Model, Registry
from frutebox_infra.estimates.fit import Fit, FitRequest, estimate
from frutebox_infra.planner.count_search import (
    Fitting,
    GpuRow,
    gpu_refusal,
    gpu_table,
    smallest_counts,
    smallest_counts_of,
    top_count,
)

# The price and kernel rules live with the search; the planner's other modules read them here.
from frutebox_infra.planner.count_search import gpu_price as gpu_price
from frutebox_infra.planner.count_search import image_gpu_problem as image_gpu_problem
from frutebox_infra.planner.placement_speed import ModelSpeeds, Speed
from frutebox_infra.recipes import PodSpec, Recipe
from frutebox_infra.recipes.base import ServeOptions, Serving


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """One GPU type as considered: the smallest count that fits, or why none does."""

    gpu: Gpu
    count: int | None
    usd_per_hour: float | None
    fit: Fit | None
    rejected: str | None


@dataclass(frozen=True, kw_only=True)
class PlacementOption:
    """A placement that can run the model, with the exact pod it would run."""

    gpu: Gpu
    count: int
    usd_per_hour: float
    """USD per hour for the whole pod (price per GPU x count) in the stack's cloud."""
    fit: Fit
    recipe: Recipe = field(compare=False, repr=False)
    model: Model = field(compare=False, repr=False)
    image: Image = field(compare=False, repr=False)
    serving: Serving = field(compare=False, repr=False)
    speeds: ModelSpeeds = field(compare=False, repr=False)
    """The model's estimates as the recipe serves it (on any GPU type and count)."""
    seeded: bool = False
    """A CPU pod puts the weights on the volume first: the pod reads them offline."""

    @cached_property
    def pod(self) -> PodSpec:
        """Rendered on first use: most fitting placements are ranked, never deployed."""
        return self.recipe.pod(
            self.model, self.image, self.gpu, self.count, self.serving, self.seeded
        )

    @cached_property
    def speed(self) -> Speed:
        """Estimated in full on first use, like the pod: where a report or a ranking by
        output tokens asks (the floor asks only the decode rate, `ModelSpeeds.decode`)."""
        return self.speeds.at(self.gpu, self.count, self.usd_per_hour)

    @property
    def total_vram_gb(self) -> int:
        return self.gpu.vram_gb * self.count

    @property
    def label(self) -> str:
        return f"{self.count}x {self.gpu.name}"


@dataclass(frozen=True, kw_only=True)
class Ranking:
    """One model's ranked placements and the GPU types that refuse it, built on demand.

    Equal rankings rank the same GPU types, counts and prices: what the rest is built from.
    `built` and `requests` are caches, filled as placements are asked for; nothing else
    changes after the search.
    """

    ranked: tuple[Fitting, ...]
    """Per fitting GPU type its smallest count, cheapest first, then less VRAM: placements
    not yet built."""
    cloud: Cloud
    gpu_id: str | None
    registry: Registry = field(compare=False, repr=False)
    model: Model = field(compare=False, repr=False)
    recipe: Recipe = field(compare=False, repr=False)
    image: Image = field(compare=False, repr=False)
    serving: Serving = field(compare=False, repr=False)
    options: ServeOptions = field(compare=False, repr=False)
    allowed_counts: tuple[int, ...] = field(compare=False, repr=False)
    """GPU counts without a problem of their own (TP degree, FP8 sharding), ascending; only
    the pinned one where a count is pinned."""
    pinned_count: int | None = field(compare=False, repr=False)
    requests: dict[int, FitRequest] = field(compare=False, repr=False)
    """The fit request per KV precision, as the search made them."""
    built: dict[tuple[int, int], PlacementOption] = field(
        default_factory=dict, compare=False, repr=False
    )
    """The placements built so far, by GPU type index and count."""

    @cached_property
    def speed_model(self) -> ModelSpeeds:
        """The model's estimates on this ranking's GPU types and counts, made when asked for."""
        return ModelSpeeds(self.recipe, self.model, self.serving, self.registry.speed)

    def placements(self, n: int | None = None) -> tuple[PlacementOption, ...]:
        """The `n` cheapest placements (all by default), each built once."""
        return tuple(self.option(r) for r in self.ranked[:n])

    def option(self, ranked: Fitting) -> PlacementOption:
        """The placement of one ranked (or larger) count, built on first use."""
        key = ranked.position, ranked.count
        built = self.built.get(key)
        if built is None:
            gpu = self.registry.gpus[ranked.position]
            fit = estimate(self._request(gpu), gpu, ranked.count)
            built = self.built[key] = PlacementOption(
                gpu=gpu,
                count=ranked.count,
                usd_per_hour=ranked.usd_per_hour,
                fit=fit,
                recipe=self.recipe,
                model=self.model,
                image=self.image,
                serving=self.serving,
                speeds=self.speed_model,
            )
        return built

    def speed(self, ranked: Fitting) -> Speed:
        """The speed estimate of one ranked (or larger) count, without building its placement."""
        gpu = self.registry.gpus[ranked.position]
        return self.speed_model.at(gpu, ranked.count, ranked.usd_per_hour)

    def larger(self, ranked: Fitting) -> Fitting | None:
        """The next allowed count above `ranked`'s on its GPU type that fits, or None."""
        row = self.row(ranked.position)
        start = self.next_count(ranked, row)
        return None if start is None else self.fitting_from(start, row)

    def next_count(self, ranked: Fitting, row: GpuRow) -> Fitting | None:
        """The next allowed count above `ranked`'s on its GPU type (`row`), at most its top,
        at its $/h, whether or not it fits: the least a larger count can be, or None."""
        allowed = self.allowed_counts
        at = bisect_right(allowed, ranked.count)
        if at == len(allowed) or allowed[at] > row.top:
            return None
        return row.fittings[allowed[at]]

    def fitting_from(self, start: Fitting, row: GpuRow) -> Fitting | None:
        """The smallest allowed count from `start`'s up on its GPU type (`row`) that fits, or
        None: the count search on that one type."""
        request = self._request(row.gpu)
        allowed = self.allowed_counts
        counts = allowed[bisect_left(allowed, start.count) :]
        found = smallest_counts(request, (row,), gpu_table(self.registry).caps(request), counts)
        return found[0] if found else None

    @cached_property
    def rows(self) -> tuple[GpuRow, ...]:
        """The count search's rows: the GPU types it searched, in the registry's order."""
        return gpu_table(self.registry).rows(self.cloud, self.image, self.serving.require_fp8)

    def row(self, gpu_index: int) -> GpuRow:
        """The count search's row of a ranked GPU type (searched, so among its rows)."""
        rows = self.rows
        # The rows are some of the registry's types in its order: a type's row is at most
        # at its own index, and mostly there or just before.
        at = min(gpu_index, len(rows) - 1)
        while rows[at].position != gpu_index:
            at -= 1
        return rows[at]

    def within(self, premium: float) -> tuple[PlacementOption, ...]:
        """The cheapest placement and every other costing at most `premium` times it."""
        ranked = self.ranked
        if not ranked:
            return ()
        ceiling = ranked[0].usd_per_hour * premium + 1e-9
        return tuple([self.option(r) for r in ranked if r.usd_per_hour <= ceiling])

    @property
    def refused(self) -> tuple[Candidate, ...]:
        """The GPU types considered that fit at no count, in the registry's order, each with
        why (at its largest count estimated, else its last count refused)."""
        placed = {r.position for r in self.ranked}
        return tuple(
            self._refusal(gpu)
            for i, gpu in enumerate(self.registry.gpus)
            if i not in placed and (self.gpu_id is None or gpu.id == self.gpu_id)
        )

    def _refusal(self, gpu: Gpu) -> Candidate:
        price = gpu_price(gpu, self.cloud)
        if price is None:
            return Candidate(
                gpu=gpu,
                count=None,
                usd_per_hour=None,
                fit=None,
                rejected=f"no {self.cloud} price recorded",
            )
        refused = gpu_refusal(self.image, gpu, fp8_only=self.serving.require_fp8)
        if refused is not None:
            return Candidate(gpu=gpu, count=None, usd_per_hour=None, fit=None, rejected=refused)
        top = top_count(self.registry, gpu)  # >= 1: both caps are at least 1
        allowed = [c for c in self.allowed_counts if c <= top]
        if self.pinned_count is not None and self.pinned_count > top:
            return Candidate(
                gpu=gpu, count=None, usd_per_hour=None, fit=None, rejected=f"at most {top} per pod"
            )
        if allowed:
            fit = estimate(self._request(gpu), gpu, allowed[-1])
            return Candidate(
                gpu=gpu,
                count=allowed[-1],
                usd_per_hour=round(price * allowed[-1], 2),
                fit=fit,
                rejected=fit.reason,
            )
        problem = self.recipe.count_problem(self.model, self.pinned_count or top)
        return Candidate(
            gpu=gpu, count=top, usd_per_hour=round(price * top, 2), fit=None, rejected=problem
        )

    def _request(self, gpu: Gpu) -> FitRequest:
        """The fit request on `gpu`, made once per KV precision and kept in `requests`."""
        dtype = self.recipe.kv_dtype_bytes(gpu)
        request = self.requests.get(dtype)
        if request is None:
            request = self.requests[dtype] = request_at(
                self.model, self.serving, self.options, dtype
            )
        return request


def rank(
    registry: Registry,
    model: Model,
    recipe: Recipe,
    image: Image,
    serving: Serving,
    options: ServeOptions,
    cloud: Cloud,
    gpu_id: str | None,
    gpu_count: int | None = None,
) -> Ranking:
    """Per GPU type (only `gpu_id` when set) the smallest count (only `gpu_count` when set)
    that fits, cheapest first (then less VRAM, then the registry's order)."""
    # What depends on the count alone (TP degree, FP8 sharding) or on the KV precision alone
    # is the same on every GPU type: the allowed counts, and a fit request per KV precision.
    table = gpu_table(registry)
    allowed = recipe.allowed_counts(model, table.counts if gpu_count is None else (gpu_count,))
    requests: dict[int, FitRequest] = {}
    found: list[Fitting] = []
    for group in table.by_kv_bytes(recipe, cloud, image, serving.require_fp8):
        dtype = group.kv_bytes
        if gpu_id is None:
            request = requests[dtype] = request_at(model, serving, options, dtype)
            found += smallest_counts_of(table, request, group, allowed)
            continue
        rows = tuple(row for row in group.rows if row.gpu.id == gpu_id)
        if rows:
            request = requests[dtype] = request_at(model, serving, options, dtype)
            found += smallest_counts(request, rows, table.caps(request), allowed)
    found.sort()  # ties in $/h and VRAM keep the registry's order: the index comes next
    return Ranking(
        ranked=tuple(found),
        cloud=cloud,
        gpu_id=gpu_id,
        registry=registry,
        model=model,
        recipe=recipe,
        image=image,
        serving=serving,
        options=options,
        allowed_counts=allowed,
        pinned_count=gpu_count,
        requests=requests,
    )


def fit_request(
    model: Model, recipe: Recipe, serving: Serving, options: ServeOptions, gpu: Gpu
) -> FitRequest:
    """What must fit on `gpu`: the engine's memory model and KV precision on that card."""
    return request_at(model, serving, options, recipe.kv_dtype_bytes(gpu))


def request_at(
    model: Model, serving: Serving, options: ServeOptions, kv_dtype_bytes: int
) -> FitRequest:
    """What must fit where the engine caches KV at `kv_dtype_bytes` per element."""
    return FitRequest(
        engine=serving.memory_model,
        weights_gb=serving.weights_vram_gb,
        context_tokens=serving.context_tokens,
        configured_sequences=serving.concurrency,
        min_sequences=options.min_sequences,
        kv_dtype_bytes=kv_dtype_bytes,
        architecture=model.architecture,
        static_allocation=serving.static_allocation,
        speculative=serving.speculative,
    )
