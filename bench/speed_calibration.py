"""The speed model's estimates against published measurements: each row's ratio, the median and
the worst error, against the targets (median error within 25%, every row within a factor of 2).

Every row of bench/speed_measurements.yaml states a published configuration as the model's
inputs (engine, GPU type and count, model and precision, parallelism, speculative decoding,
concurrency, prompt and output lengths) and the figure it reports, with its source. The
estimate is `frutebox_infra.estimates.speed.estimate_speed` with the registry's facts
(registry/speed.yaml), exactly as the planner would call it.

`--fit` refits the engine and link figures of registry/speed.yaml on the rows (least squares
on the log of each ratio, each engine on its own rows, the links on every multi-GPU row) and
prints them with a leave-one-out cross-validation: each row estimated by the figures fitted on
all the other rows.
`--quick` runs a few rows through the same code (for CI); a crash or a row the model cannot
estimate exits 1.

Run: .venv/bin/python bench/speed_calibration.py [--quick] [--fit]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field
from support.common import Results, heading, print_table

from frutebox_infra.catalog.files import load_registry
from frutebox_infra.catalog.schema import Model, Registry, Runtime, SpecDecode, WeightFormat
from frutebox_infra.catalog.speed_facts import SpeedFacts
from frutebox_infra.estimates.speed import Placement, SpeedEstimate, Workload, estimate_speed
from frutebox_infra.plumbing.validation import validate

ROWS_FILE = Path(__file__).with_name("speed_measurements.yaml")
MEDIAN_TARGET = 0.25
WORST_TARGET = 2.0
QUICK_ROWS = (
    "xd-a6000-7b-q4_0-tg128",
    "xd-a6000-7b-f16-tg128",
    "xd-a100-70b-q4_0-pp512",
    "sgl-h200-q36-35b-fp8-c16",
    "ix-h100-gptoss-vllm-tp4-c64-1k1k",
    "ix-h100-minimax-vllm-tp4ep4-c4",
    "ar-4rtxpro-minimax-nvfp4-vllm-c1",
)
"""`--quick`: a row of each kind the full run estimates (each engine; decode and prefill; a
weights override; speculative decoding; expert parallelism; a KV cache dtype)."""
Metric = Literal["decode_tok_s_per_stream", "decode_tok_s_aggregate", "prefill_tok_s"]
FIGURE_LABELS: dict[str, str] = {
    "decode_tok_s_per_stream": "decode/stream",
    "decode_tok_s_aggregate": "decode total",
    "prefill_tok_s": "prefill",
}


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RowWeights(_Strict):
    format: WeightFormat
    vram_gb: float = Field(gt=0)
    non_expert_bytes_per_weight: float | None = None


class RowSpeculation(_Strict):
    method: SpecDecode
    steps: int = Field(ge=1)
    acceptance: float | None = Field(default=None, gt=0, lt=1)
    acceptance_source: str | None = None


class Row(_Strict):
    """One published measurement and the configuration it was taken in."""

    id: str
    engine: Runtime
    gpu: str
    gpu_count: int = Field(ge=1, le=8)
    model: str
    weights: RowWeights | None = None
    kv_dtype_bytes: int = 2
    expert_parallel: bool = False
    speculative: RowSpeculation | None = None
    concurrency: int = Field(ge=1)
    context_tokens: int = Field(ge=0)
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    metric: Metric
    value: float = Field(gt=0)
    unit: Literal["tok_s", "ms_per_token"]
    reports: str
    source: str

    @property
    def published_tok_s(self) -> float:
        return 1000 / self.value if self.unit == "ms_per_token" else self.value


class Measurements(_Strict):
    models: tuple[Model, ...]
    rows: tuple[Row, ...]


def load_rows(registry: Registry) -> tuple[dict[str, Model], tuple[Row, ...]]:
    """The measured models (the file's own and the catalog's) and the rows."""
    doc = validate(Measurements, yaml.safe_load(ROWS_FILE.read_text(encoding="utf-8")))
    models = {m.id: m for m in registry.models} | {m.id: m for m in doc.models}
    for row in doc.rows:
        if row.model not in models or registry.gpu(row.gpu) is None:
            sys.exit(f"{ROWS_FILE}: row {row.id} names an unknown model or GPU")
    return models, doc.rows


def inputs(row: Row, model: Model, registry: Registry) -> tuple[Placement, Workload]:
    """The row's configuration as the speed model's inputs."""
    gpu = registry.gpu(row.gpu)
    assert gpu is not None
    weights = row.weights or RowWeights(
        format=model.weights.format,
        vram_gb=model.weights.vram_gb or 0.0,
        non_expert_bytes_per_weight=model.weights.non_expert_bytes_per_weight,
    )
    spec = row.speculative
    placement = Placement(
        engine=row.engine,
        gpu=gpu,
        gpu_count=row.gpu_count,
        weights_gb=weights.vram_gb,
        precision=weights.format,
        kv_dtype_bytes=row.kv_dtype_bytes,
        expert_parallel=row.expert_parallel,
        speculative=spec.method if spec else SpecDecode.NONE,
        speculative_steps=spec.steps if spec else 0,
        speculative_acceptance=spec.acceptance if spec else None,
        non_expert_bytes_per_weight=weights.non_expert_bytes_per_weight,
    )
    workload = Workload(
        concurrency=row.concurrency,
        context_tokens=row.context_tokens,
        prompt_tokens=row.prompt_tokens,
        output_tokens=row.output_tokens,
    )
    return placement, workload


def estimate(row: Row, models: dict[str, Model], registry: Registry, facts: SpeedFacts) -> float:
    placement, workload = inputs(row, models[row.model], registry)
    result = estimate_speed(models[row.model], placement, workload, facts)
    if not isinstance(result, SpeedEstimate):
        sys.exit(f"row {row.id}: no estimate: {result.reason}")
    value: float = getattr(result, row.metric)
    return value


def log_errors(
    rows: Sequence[Row], models: dict[str, Model], registry: Registry, facts: SpeedFacts
) -> list[float]:
    return [math.log(estimate(r, models, registry, facts) / r.published_tok_s) for r in rows]


def summary(errors: Sequence[float]) -> tuple[float, float, float]:
    """Median absolute error, median signed error (as fractions), worst factor either way."""
    ratios = [math.exp(e) for e in errors]
    return (
        statistics.median(abs(r - 1) for r in ratios),
        statistics.median(r - 1 for r in ratios),
        max(max(r, 1 / r) for r in ratios),
    )


def show(
    rows: Sequence[Row],
    models: dict[str, Model],
    registry: Registry,
    facts: SpeedFacts,
    results: Results,
) -> None:
    errors = log_errors(rows, models, registry, facts)
    table = []
    for row, err in zip(rows, errors, strict=True):
        published = row.published_tok_s
        table.append(
            [
                row.id,
                row.engine,
                f"{row.gpu_count}x {row.gpu}",
                FIGURE_LABELS[row.metric],
                f"{published * math.exp(err):.1f}",
                f"{published:.1f}",
                f"{math.exp(err):.2f}",
            ]
        )
    heading(f"speed model vs {len(rows)} published measurements (tok/s)")
    print_table(["row", "engine", "GPUs", "figure", "estimate", "published", "ratio"], table)
    median_abs, median_signed, worst = summary(errors)
    gpus = {r.gpu for r in rows}
    engines = {r.engine for r in rows}
    results.print(
        f"\n{len(rows)} rows, {len(gpus)} GPU types, {len(engines)} engines;"
        f" median |error| {median_abs:.1%} (target <= {MEDIAN_TARGET:.0%}: "
        f"{'MET' if median_abs <= MEDIAN_TARGET else 'MISSED'}), median signed error"
        f" {median_signed:+.1%}; worst row off by x{worst:.2f} (target <= x{WORST_TARGET:g}:"
        f" {'MET' if worst <= WORST_TARGET else 'MISSED'})"
    )


# ---- fitting ---------------------------------------------------------------------------------

ENGINE_BOUNDS = {
    "bandwidth_efficiency": (0.2, 1.0),
    "compute_efficiency": (0.05, 1.0),
    "step_overhead_us": (1.0, 20_000.0),
    "layer_overhead_us": (0.1, 1_000.0),
}
LINK_BOUNDS = {"collective_latency_us": (0.5, 500.0)}


def with_value(facts: SpeedFacts, path: tuple[str, str, str], value: float) -> SpeedFacts:
    section, key, field = path
    entries = dict(getattr(facts, section))
    entries[key] = replace(entries[key], **{field: value})
    changes: dict[str, Any] = {section: entries}
    return replace(facts, **changes)


def parameters(
    facts: SpeedFacts, rows: Sequence[Row], registry: Registry
) -> list[tuple[tuple[str, str, str], tuple[float, float]]]:
    """The figures the rows can pin down: each measured engine's, and each link rows cross."""
    out: list[tuple[tuple[str, str, str], tuple[float, float]]] = []
    for engine in sorted({r.engine for r in rows}):
        entry = facts.engines.get(engine)
        if entry is not None and entry.kernels_of is None:
            out += [(("engines", engine, f), b) for f, b in ENGINE_BOUNDS.items()]
    kinds = {
        gpu.speed.interconnect.kind
        for r in rows
        if r.gpu_count > 1 and (gpu := registry.gpu(r.gpu)) is not None and gpu.speed is not None
    }
    out += [(("links", k, f), b) for k in sorted(kinds) for f, b in LINK_BOUNDS.items()]
    return out


def fit(
    facts: SpeedFacts,
    objective: Callable[[SpeedFacts], float],
    params: list[tuple[tuple[str, str, str], tuple[float, float]]],
) -> SpeedFacts:
    """Pattern search on each figure's logarithm within its bounds: sweep every figure up and
    down by a step while that lowers the objective, then halve the step, down to 1%."""
    best = objective(facts)
    step = 0.5
    while step >= 0.01:
        improved = False
        for path, (low, high) in params:
            section, key, field = path
            for direction in (1, -1):
                current = getattr(getattr(facts, section)[key], field)
                trial_value = min(high, max(low, current * math.exp(direction * step)))
                if trial_value == current:
                    continue
                trial = with_value(facts, path, trial_value)
                score = objective(trial)
                if score < best - 1e-12:
                    best, facts, improved = score, trial, True
        if not improved:
            step /= 2
    return facts


def squared(
    rows: Sequence[Row], models: dict[str, Model], registry: Registry
) -> Callable[[SpeedFacts], float]:
    return lambda facts: sum(e * e for e in log_errors(rows, models, registry, facts))


def refit(
    rows: Sequence[Row], models: dict[str, Model], registry: Registry, results: Results
) -> None:
    facts = registry.speed
    assert facts is not None
    params = parameters(facts, rows, registry)
    fitted = fit(facts, squared(rows, models, registry), params)
    results.heading("fitted figures (all rows)")
    for path, _ in params:
        section, key, field = path
        value = getattr(getattr(fitted, section)[key], field)
        results.print(f"{section}.{key}.{field}: {value:.4g}")
    show(rows, models, registry, fitted, results)
    median_abs, median_signed, worst = summary(log_errors(rows, models, registry, fitted))
    results.print(
        f"in-sample: median |error| {median_abs:.1%}, signed {median_signed:+.1%},"
        f" worst x{worst:.2f}"
    )
    # Leave-one-out: each row estimated with the figures fitted on all the other rows.
    held_out: list[float] = []
    for i, row in enumerate(rows):
        train = [*rows[:i], *rows[i + 1 :]]
        loo = fit(facts, squared(train, models, registry), parameters(facts, train, registry))
        (err,) = log_errors([row], models, registry, loo)
        held_out.append(err)
        if abs(err) > math.log(1.5):
            results.print(f"  left out {row.id}: x{math.exp(err):.2f}")
    median_abs, median_signed, worst = summary(held_out)
    results.print(
        f"leave-one-out: median |error| {median_abs:.1%}, signed {median_signed:+.1%},"
        f" worst x{worst:.2f}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few rows, same code path")
    parser.add_argument("--fit", action="store_true", help="refit registry/speed.yaml's figures")
    args = parser.parse_args(argv)
    results = Results(__file__, quick=args.quick)
    registry = load_registry()
    if registry.speed is None:
        sys.exit("registry/speed.yaml is missing")
    models, rows = load_rows(registry)
    if args.quick:
        rows = tuple(r for r in rows if r.id in QUICK_ROWS)
    show(rows, models, registry, registry.speed, results)
    if args.fit:
        refit(rows, models, registry, results)
    results.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
