"""The speed model's facts: GPU datasheet figures, parameter counts, engine calibration."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Annotated, Literal

from frutebox_infra.catalog.vocabulary import Runtime, SpecDecode
from frutebox_infra.plumbing.validation import Check

LinkKind = Literal["nvlink", "pcie"]


@dataclass(frozen=True, kw_only=True)
class Interconnect:
    """How the GPUs of one RunPod pod of this type reach each other: the link tensor
    parallelism's all-reduces cross, at its per-direction bandwidth (datasheets quote NVLink
    as the sum of both directions)."""

    kind: LinkKind
    generation: Annotated[int, Check(ge=1, le=6)]
    gb_s_per_direction: Annotated[float, Check(gt=0, le=2000)]


@dataclass(frozen=True, kw_only=True)
class GpuSpeed:
    """Datasheet figures the speed model reads: memory bandwidth, dense tensor throughput
    (NVIDIA's headline tensor TFLOPS assume 2:4 sparsity; these are half of them) and the
    interconnect between the GPUs of a pod."""

    memory_bandwidth_gb_s: Annotated[float, Check(gt=0, le=20_000)]
    bf16_dense_tflops: Annotated[float, Check(gt=0, le=10_000)]
    """Dense BF16/FP16 tensor TFLOPS with FP32 accumulation."""
    fp8_dense_tflops: Annotated[float, Check(gt=0, le=20_000)] | None = None
    """Dense FP8 tensor TFLOPS; None on GPUs without FP8 tensor cores (Ampere)."""
    interconnect: Interconnect
    datasheet: str
    """Where the figures come from (named apart from the price's `source`, which
    `frutebox prices --write` rewrites)."""


@dataclass(frozen=True, kw_only=True)
class Parameters:
    """Parameter counts from the model card, in billions: every weight, and the weights one
    token runs through (a MoE's shared weights plus its experts-per-token)."""

    total_billions: Annotated[float, Check(gt=0, le=100_000)]
    active_billions: Annotated[float, Check(gt=0, le=100_000)] | None = None
    """Required for a MoE; a dense model's active count is its total."""
    source: str

    def __post_init__(self) -> None:
        self._active_within_total()

    def _active_within_total(self) -> None:
        if (self.active_billions or 0) > self.total_billions:
            raise ValueError(
                f"active_billions {self.active_billions} is more than total_billions"
                f" {self.total_billions}"
            )

    @property
    def active(self) -> float:
        """Active weights, as a count."""
        return (self.active_billions or self.total_billions) * 1e9

    @property
    def total(self) -> float:
        return self.total_billions * 1e9


PARAMETERS_TOLERANCE = 0.1
"""How far the expert structure (layers x experts x expert size, plus the shared weights the
active count implies) may land from the published total before the facts count as wrong."""


FIGURES = ("bandwidth_efficiency", "compute_efficiency", "step_overhead_us", "layer_overhead_us")


@dataclass(frozen=True, kw_only=True)
class EngineSpeed:
    """How close one engine's kernels come to the hardware, fitted on published measurements;
    or, for an engine running another's kernels (Ollama runs llama.cpp's), just that name."""

    kernels_of: Runtime | None = None
    bandwidth_efficiency: Annotated[float, Check(gt=0, le=1)] | None = None
    """Share of the datasheet memory bandwidth a decode step's weight and KV reads reach."""
    compute_efficiency: Annotated[float, Check(gt=0, le=1)] | None = None
    """Share of the dense tensor TFLOPS a compute-bound step (prefill, a large batch) reaches."""
    step_overhead_us: Annotated[float, Check(ge=0, le=1_000_000)] | None = None
    """Fixed time per forward step that no read overlaps: scheduling, sampling, launches."""
    layer_overhead_us: Annotated[float, Check(ge=0, le=100_000)] | None = None
    """Time per layer per step that no read overlaps: kernel boundaries, small ops."""
    fitted_on: tuple[str, ...] = ()
    """The bench/speed_measurements.yaml rows the figures were fitted on."""
    source: str

    def __post_init__(self) -> None:
        self._figures_or_alias()

    def _figures_or_alias(self) -> None:
        given = [name for name in FIGURES if getattr(self, name) is not None]
        if self.kernels_of is not None:
            if given or self.fitted_on:
                raise ValueError(
                    f"kernels_of {self.kernels_of} borrows that engine's figures: drop"
                    f" {', '.join([*given, *(['fitted_on'] if self.fitted_on else [])])}"
                )
            return
        missing = [name for name in FIGURES if getattr(self, name) is None]
        if not self.fitted_on:
            missing.append("fitted_on")
        if missing:
            raise ValueError(
                "an engine needs its figures and the rows they were fitted on (or kernels_of"
                f" another engine); missing: {', '.join(missing)}"
            )


@dataclass(frozen=True, kw_only=True)
class EngineFigures:
    """An engine's resolved figures, as the speed model uses them."""

    bandwidth_efficiency: float
    compute_efficiency: float
    step_overhead_us: float
    layer_overhead_us: float


@dataclass(frozen=True, kw_only=True)
class LinkSpeed:
    """What a collective over one kind of link costs beyond its bytes, fitted like an engine."""

    collective_latency_us: Annotated[float, Check(ge=0, le=100_000)]
    """One all-reduce (or expert dispatch) of a step: synchronisation and launch."""
    link_efficiency: Annotated[float, Check(gt=0, le=1)]
    """Share of the per-direction link bandwidth a ring all-reduce reaches."""
    fitted_on: Annotated[tuple[str, ...], Check(min_length=1)]
    source: str


@dataclass(frozen=True, kw_only=True)
class Acceptance:
    """The stated acceptance assumption of one speculative-decoding method."""

    token_acceptance: Annotated[float, Check(gt=0, lt=1)]
    """Chance each drafted token is accepted, given the ones before it were."""
    draft_step_cost: Annotated[float, Check(gt=0, le=1)]
    """One drafting step's time as a share of one target decode step."""
    source: str


@dataclass(frozen=True, kw_only=True)
class MeasuredSpeed:
    """A decode rate our own fleet measured (`frutebox usage --learn`): the model on the
    engine and GPUs it ran on, with where and when. A plan of the same model, engine, GPU
    type and count decodes at this rate instead of the estimate's."""

    model: str
    engine: Runtime
    gpu: str
    """The GPU type id (registry/gpus.yaml)."""
    gpu_count: Annotated[int, Check(strict=True, ge=1, le=8)]
    decode_tok_s_per_stream: Annotated[float, Check(gt=0, le=100_000)]
    pod: str
    engine_version: str
    """The engine image the pod ran (registry/images.yaml tag)."""
    date: str
    """When it was measured (YYYY-MM-DD)."""
    source: str


@dataclass(frozen=True, kw_only=True)
class SpeedFacts:
    """registry/speed.yaml: per-engine calibration, link costs and acceptance assumptions."""

    engines: dict[Runtime, EngineSpeed]
    links: dict[LinkKind, LinkSpeed]
    speculative: dict[SpecDecode, Acceptance] = field(default_factory=dict)
    measured: tuple[MeasuredSpeed, ...] = ()
    """The fleet's own measurements, newest last."""

    def measured_on(
        self, model: str, engine: Runtime, gpu: str, count: int
    ) -> MeasuredSpeed | None:
        """The newest measured row for this model, engine, GPU type and count, if any."""
        rows = [
            r
            for r in self.measured
            if (r.model, r.engine, r.gpu, r.gpu_count) == (model, engine, gpu, count)
        ]
        return max(rows, key=lambda r: r.date) if rows else None

    def __post_init__(self) -> None:
        self._aliases_resolve()

    def _aliases_resolve(self) -> None:
        broken = sorted(
            f"{name} -> {entry.kernels_of}"
            for name, entry in self.engines.items()
            if entry.kernels_of is not None and self.engine(entry.kernels_of) is None
        )
        if broken:
            raise ValueError(
                f"kernels_of must name an engine with its own figures: {', '.join(broken)}"
            )
        if SpecDecode.NONE in self.speculative:
            raise ValueError("speculative has no entry for 'none'")

    def engine(self, runtime: Runtime) -> EngineFigures | None:
        """The figures an engine runs at, through the engine whose kernels it runs."""
        known = self._engine_figures
        if runtime not in known:
            known[runtime] = self._figures(runtime)
        return known[runtime]

    @cached_property
    def _engine_figures(self) -> dict[Runtime, EngineFigures | None]:
        """`engine`'s answers, each worked out once: every model's estimates ask."""
        return {}

    def _figures(self, runtime: Runtime) -> EngineFigures | None:
        entry = self.engines.get(runtime)
        if entry is not None and entry.kernels_of is not None:
            entry = self.engines.get(entry.kernels_of)
        if entry is None or entry.kernels_of is not None:
            return None
        assert entry.bandwidth_efficiency and entry.compute_efficiency
        assert entry.step_overhead_us is not None and entry.layer_overhead_us is not None
        return EngineFigures(
            bandwidth_efficiency=entry.bandwidth_efficiency,
            compute_efficiency=entry.compute_efficiency,
            step_overhead_us=entry.step_overhead_us,
            layer_overhead_us=entry.layer_overhead_us,
        )

    @property
    def fitted_on(self) -> Mapping[str, tuple[str, ...]]:
        """Every fitted entry and the measurement rows it names."""
        rows = {f"engines.{name}": e.fitted_on for name, e in self.engines.items() if e.fitted_on}
        rows.update({f"links.{kind}": link.fitted_on for kind, link in self.links.items()})
        return rows
