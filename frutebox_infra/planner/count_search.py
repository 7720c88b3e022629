"""The count search: per GPU type the smallest count that fits, off a GPU table.

Every model of a stack is searched against the same GPU types, so what depends only on them,
the cloud, the image and the engine (which types have a price and run the image, their $/h
at each count, the engine's memory cap at each count, the KV precision on each) is kept per
registry in a `GpuTable`, and a model's search does only the arithmetic of its own fit
requests. The table holds nothing taken from a model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from frutebox_infra.catalog.schema import Cloud, Gpu, Image, Registry
from frutebox_infra.estimates.fit import (
    GB,
    MIB,
    FitRequest,
    MemoryModel,
    cap_key,
    card_caps,
    count_share,
    fewest_gpus,
    fits,
)
from frutebox_infra.recipes import Recipe


@dataclass(frozen=True, kw_only=True, order=True)
class Fitting:
    """A GPU type at one count and its pod's price: what the search reports where a model
    fits, and what the ranking keeps. Ordered as the ranking sorts: cheapest first, then less
    VRAM, then the registry's order (no two types alike, so the count is never compared)."""

    usd_per_hour: float
    """The whole pod's USD per hour in the stack's cloud."""
    vram_gb: int
    """The whole pod's VRAM."""
    position: int
    """The GPU type's index in the registry's `gpus`."""
    count: int


class GpuRow(NamedTuple):
    """One GPU type as the search reads it."""

    position: int
    """Its index in the registry's `gpus`."""
    gpu: Gpu
    top: int
    """The most of it one pod may have (`top_count`)."""
    fittings: tuple[Fitting, ...]
    """What the search reports of a fit at each count (index = count; 0 unused)."""

    @classmethod
    def at_prices(cls, position: int, gpu: Gpu, top: int, usd: Sequence[float]) -> GpuRow:
        """The row of a GPU type whose pod costs `usd[count]` per hour at each count."""
        fittings = tuple(
            Fitting(usd_per_hour=usd[n], vram_gb=gpu.vram_gb * n, position=position, count=n)
            for n in range(top + 1)
        )
        return cls(position, gpu, top, fittings)

    @property
    def usd(self) -> tuple[float, ...]:
        """A pod's USD per hour at each count (index = count; 0 unused), to the cent."""
        return tuple(fitting.usd_per_hour for fitting in self.fittings)


@dataclass(frozen=True, kw_only=True)
class Rung:
    """A GPU type on one count's ladder."""

    cap_bytes: float
    """The bytes per GPU the engine lets weights and KV cache use there at that count."""
    fitting: Fitting
    """The type at that count."""


Ladder = tuple[Rung, ...]
"""The GPU types that may have one count, the largest cap first."""


@dataclass(frozen=True, kw_only=True)
class GpuGroup:
    """The GPU types one fit request is searched on: those where the engine caches KV at
    `kv_bytes` per element, in the registry's order, with their ladders per engine cap."""

    kv_bytes: int
    rows: tuple[GpuRow, ...]
    made_ladders: dict[tuple[MemoryModel, bool, bool], tuple[Ladder, ...]] = field(
        default_factory=dict, compare=False, repr=False
    )
    """The ladders made so far, by the engine cap's `cap_key`."""

    @cached_property
    def largest_bytes(self) -> int:
        """The largest card's memory: below its `fewest_gpus` no type of the group fits."""
        return max(row.gpu.memory_mib for row in self.rows) * MIB

    @cached_property
    def by_memory(self) -> tuple[GpuRow, ...]:
        """The rows, the largest card first: where a pipeline fits (one GPU that holds its
        weights) is a prefix of them."""
        return tuple(sorted(self.rows, key=lambda row: -row.gpu.memory_mib))

    def ladders(self, table: GpuTable, request: FitRequest) -> tuple[Ladder, ...]:
        """Per count (index = count, up to the group's top), the group's types that may have
        that many, by the request's engine cap there, largest first."""
        key = cap_key(request)
        ladders = self.made_ladders.get(key)
        if ladders is None:
            caps = table.caps(request)
            ladders = self.made_ladders[key] = tuple(
                tuple(
                    sorted(
                        (
                            Rung(cap_bytes=caps[row.position][count], fitting=row.fittings[count])
                            for row in self.rows
                            if row.top >= count
                        ),
                        key=lambda rung: -rung.cap_bytes,
                    )
                )
                for count in range(max(row.top for row in self.rows) + 1)
            )
        return ladders


@dataclass(frozen=True, kw_only=True, eq=False)
class GpuTable:
    """A registry's GPU types as the count search reads them: each view made on first use,
    and kept for every model the registry plans."""

    registry: Registry
    made_rows: dict[tuple[Cloud, tuple[str, ...], bool], tuple[GpuRow, ...]] = field(
        default_factory=dict, repr=False
    )
    """`rows` made so far, by cloud, the image's GPU architectures and FP8 only."""
    made_caps: dict[tuple[MemoryModel, bool, bool], tuple[tuple[float, ...], ...]] = field(
        default_factory=dict, repr=False
    )
    """`caps` made so far, by the engine cap's `cap_key`."""
    made_groups: dict[tuple[Recipe, Cloud, tuple[str, ...], bool], tuple[GpuGroup, ...]] = field(
        default_factory=dict, repr=False
    )
    """`by_kv_bytes` made so far, by recipe, cloud, the image's GPU architectures and FP8 only."""

    @property
    def gpus(self) -> tuple[Gpu, ...]:
        return self.registry.gpus

    @cached_property
    def tops(self) -> tuple[int, ...]:
        """The most of each GPU type one pod may have, in the registry's order."""
        return tuple(top_count(self.registry, g) for g in self.gpus)

    @cached_property
    def counts(self) -> range:
        """Every count a pod may have."""
        return range(1, self.registry.max_gpus_per_pod + 1)

    def rows(self, cloud: Cloud, image: Image, fp8_only: bool) -> tuple[GpuRow, ...]:
        """The GPU types with a `cloud` price that `image` can drive (native-FP8 ones only
        where `fp8_only`), in the registry's order: those the search asks to fit."""
        key = cloud, image.gpu_architectures, fp8_only
        rows = self.made_rows.get(key)
        if rows is None:
            rows = self.made_rows[key] = tuple(
                GpuRow.at_prices(
                    i, gpu, top, (0.0, *(round(price * n, 2) for n in range(1, top + 1)))
                )
                for i, (gpu, top) in enumerate(zip(self.gpus, self.tops, strict=True))
                if (price := gpu_price(gpu, cloud)) is not None
                and gpu_refusal(image, gpu, fp8_only=fp8_only) is None
            )
        return rows

    def caps(self, request: FitRequest) -> tuple[tuple[float, ...], ...]:
        """Per GPU type, the bytes per GPU the request's engine lets weights and KV cache use
        at each count (`engine_cap_bytes`; index = count)."""
        key = cap_key(request)
        caps = self.made_caps.get(key)
        if caps is None:
            tops = zip(self.gpus, self.tops, strict=True)
            caps = self.made_caps[key] = tuple(card_caps(key, g.memory_mib, top) for g, top in tops)
        return caps

    def by_kv_bytes(
        self, recipe: Recipe, cloud: Cloud, image: Image, fp8_only: bool
    ) -> tuple[GpuGroup, ...]:
        """`rows` grouped by the bytes per KV element `recipe`'s engine caches on them (one
        fit request per group), each group in the registry's order."""
        key = recipe, cloud, image.gpu_architectures, fp8_only
        groups = self.made_groups.get(key)
        if groups is None:
            grouped: dict[int, list[GpuRow]] = {}
            for row in self.rows(cloud, image, fp8_only):
                grouped.setdefault(recipe.kv_dtype_bytes(row.gpu), []).append(row)
            groups = self.made_groups[key] = tuple(
                GpuGroup(kv_bytes=k, rows=tuple(rows)) for k, rows in grouped.items()
            )
        return groups


_last: GpuTable | None = None
"""The table of the registry planned last: one registry plans every model of a stack."""


def gpu_table(registry: Registry) -> GpuTable:
    """`registry`'s table, made once while the same registry is asked for (by identity: a
    registry never changes once built)."""
    global _last
    if _last is None or _last.registry is not registry:
        _last = GpuTable(registry=registry)
    return _last


def smallest_counts(
    request: FitRequest,
    rows: Sequence[GpuRow],
    caps: Sequence[tuple[float, ...]],
    allowed: Sequence[int],
) -> list[Fitting]:
    """Per GPU type of `rows`, the smallest of `allowed` (ascending) up to its top at which
    `request` fits, if one does: what `fits` says of each count in turn, with the engine's cap
    per count taken from `caps` (`GpuTable.caps`). Counts below `fewest_gpus` are not asked."""
    found: list[Fitting] = []
    arch = request.architecture
    if request.engine is MemoryModel.DIFFUSION:
        # `fits` of a pipeline: one GPU that holds its weights (no other count is asked).
        if 1 in allowed:
            needed = request.weights_gb * GB
            for _, gpu, _top, fittings in rows:
                if needed <= gpu.memory_mib * MIB:
                    found.append(fittings[1])
        return found
    if arch is None:
        for _, gpu, top, fittings in rows:
            for count in allowed:
                if count > top:
                    break
                if fits(request, gpu, count):
                    found.append(fittings[count])
                    break
        return found
    required = request.required_sequences
    for position, gpu, top, fittings in rows:
        fewest = fewest_gpus(request, gpu)
        by_count = caps[position]
        for count in allowed:
            if count > top:
                break
            if count < fewest:
                continue
            share = count_share(request, arch, count)
            pool = by_count[count] - share.weights_per_gpu
            # `fits`'s test, on the cap it would work out.
            if max(pool, 0.0) / share.per_sequence >= required:
                found.append(fittings[count])
                break
    return found


def smallest_counts_of(
    table: GpuTable, request: FitRequest, group: GpuGroup, allowed: Sequence[int]
) -> list[Fitting]:
    """`smallest_counts` on a whole group, count by count up its ladders: at one count the
    test passes on a cap exactly where it passes on every larger cap, so each count asks its
    ladder only down to the first type that fails, and the types it passes on that no smaller
    count did take it. No count below the largest card's `fewest_gpus` is asked; on a smaller
    card every count below its own fails the test, since the weights it would hold per GPU
    exceed the card. A pipeline fits on one GPU that holds its weights: the group's cards
    largest first, down to the first that cannot. In the ladders' (or cards') order, not the
    registry's."""
    if request.engine is MemoryModel.DIFFUSION:
        needed = request.weights_gb * GB
        found = []
        if 1 in allowed:
            for row in group.by_memory:
                if needed > row.gpu.memory_mib * MIB:
                    break
                found.append(row.fittings[1])
        return found
    arch = request.architecture
    required = request.required_sequences
    if arch is None or required <= 0:
        return smallest_counts(request, group.rows, table.caps(request), allowed)
    ladders = group.ladders(table, request)
    least = int(request.weights_gb * GB / group.largest_bytes)  # `fewest_gpus` of the largest
    taken: dict[int, Fitting] = {}
    left, above = len(group.rows), len(ladders)
    for count in allowed:
        if count < least:
            continue
        if count >= above:
            break
        share = count_share(request, arch, count)  # kept for the estimates of the counts taken
        weights, per_sequence = share.weights_per_gpu, share.per_sequence
        for rung in ladders[count]:
            pool = rung.cap_bytes - weights
            # `fits`'s test, on the cap it would work out (no room fails: `required` > 0).
            if pool <= 0.0 or pool / per_sequence < required:
                break
            position = rung.fitting.position
            if position not in taken:
                taken[position] = rung.fitting
                left -= 1
        if not left:
            break
    return list(taken.values())


def gpu_price(gpu: Gpu, cloud: Cloud) -> float | None:
    """USD per GPU per hour in `cloud`; None where no price was ever observed."""
    prices = gpu.price_usd_per_hour
    return prices.secure if cloud is Cloud.SECURE else prices.community


def top_count(registry: Registry, gpu: Gpu) -> int:
    """The most GPUs of a type one pod may have: the type's own cap and the registry's."""
    return min(gpu.max_count, registry.max_gpus_per_pod)


def gpu_refusal(image: Image, gpu: Gpu, *, fp8_only: bool) -> str | None:
    """Why no count of `gpu` can serve, before any fit: FP8 weights (`fp8_only`), the image's
    kernels."""
    if fp8_only and not gpu.fp8:
        return "FP8 checkpoint needs a native-FP8 GPU"
    return image_gpu_problem(image, gpu)


def image_gpu_problem(image: Image, gpu: Gpu) -> str | None:
    """Why `image` cannot drive `gpu` (no kernels built for its architecture), or None."""
    if image.drives(gpu):
        return None
    return (
        f"image {image.reference} has no kernels for {gpu.architecture}"
        f" (it runs on {', '.join(image.gpu_architectures)})"
    )
