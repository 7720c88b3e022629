"""How planning time grows with the number of armed models: fast at a real fleet's size, linear.

Synthesizes 50, 200 and 1,000 armed models by cloning the catalog models that resolve to a
placement (so every synthetic model does the full work: engine, the count search on every
GPU type, the placements and pod the plan keeps) under new ids, into a Registry built in
memory, with stack settings from `parse_settings`. Nothing is written to disk.

Prints per size the median seconds of `plan_fleet`, microseconds per model, and the report's
time (a table and the data of the plan just made, as a preview renders one), the sizes timed
in turn round after round. Budgets:
50 armed models plan in <= 0.1 s, and per-model time at 1,000 is <= 1.5x that at 50 (machine
speed cancels out of the ratio).

Run: .venv/bin/python bench/plan_scale.py [--quick]
  --quick: 10 and 50 models, one run each: the same code path in seconds, for CI (exits
  non-zero if planning breaks; the budgets are judged on the full run only).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from functools import partial

from support.common import Results, synthetic_registry, timed

from frutebox_infra.catalog.files import load_registry
from frutebox_infra.catalog.schema import Model, Registry
from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.planner.resolver import resolve
from frutebox_infra.recipes.base import ServeOptions
from frutebox_infra.report.plan_report import plan_data, plan_table
from frutebox_infra.stack.settings import StackSettings
from frutebox_infra.stack.stack_file import parse_settings
from frutebox_infra.views.plan import PlanView

SIZES = (50, 200, 1_000)
RUNS = 9
"""Rounds; each round times every size once, so a busy spell on the machine hits all alike."""
QUICK_SIZES = (10, 50)
BUDGET_MODELS, BUDGET_S = 50, 0.1
BUDGET_LINEAR = 1.5
"""Per-model time at the largest size over that at the smallest."""


def servable_templates(catalog: Registry) -> list[Model]:
    """Catalog models that resolve to a placement (token configured: gated ones count too)."""
    options = ServeOptions(hf_token_configured=True)
    return [m for m in catalog.models if resolve(catalog, m.id, options).servable]


def synthetic_settings(registry: Registry) -> StackSettings:
    config = {
        "models": [m.id for m in registry.models],
        "dataCenter": registry.data_centers[0].id,
        "budgetUsdPerHour": 10_000,  # the most a stack may say; over it is still planned
        "hfToken": {"secure": "configured"},  # noticed, never read
    }
    return parse_settings(config, where="bench/plan_scale.py")


def plan(registry: Registry, settings: StackSettings) -> FleetPlan:
    return plan_fleet(registry, settings, stack="bench")


def render(result: FleetPlan) -> None:
    view = PlanView(plan=result)
    plan_table(view)
    plan_data(view)


@dataclass(frozen=True)
class Size:
    """Median seconds at one number of armed models."""

    n: int
    plan_s: float
    render_s: float


def measure(
    catalog: Registry, templates: list[Model], sizes: tuple[int, ...], runs: int
) -> list[Size]:
    stacks = []
    for n in sizes:
        registry = synthetic_registry(catalog, templates, n)
        settings = synthetic_settings(registry)
        result = plan(registry, settings)  # warm-up; also checks the plan is what we think
        assert len(result.models) == n and all(m.placement for m in result.models)
        assert not [m.problems for m in result.models if m.problems]
        stacks.append((registry, settings))
    plans: list[list[float]] = [[] for _ in sizes]
    renders: list[list[float]] = [[] for _ in sizes]
    for _ in range(runs):
        for i, (registry, settings) in enumerate(stacks):
            seconds, result = timed(partial(plan, registry, settings))
            plans[i].append(seconds)
            # A fresh plan's render, as a preview's: a plan keeps what a report works out.
            renders[i].append(timed(partial(render, result))[0])
    return [
        Size(n, statistics.median(plans[i]), statistics.median(renders[i]))
        for i, n in enumerate(sizes)
    ]


def verdict(met: bool, quick: bool) -> str:
    return "(judged on the full run only)" if quick else "MET" if met else "MISSED"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one run: for CI")
    quick = parser.parse_args().quick
    results = Results(__file__, quick=quick)
    catalog = load_registry()
    templates = servable_templates(catalog)
    print(
        f"templates: {len(templates)} servable catalog models cloned round-robin"
        f" ({', '.join(m.id for m in templates)})"
    )
    print(f"GPU inventory: {len(catalog.gpus)} types x counts 1..{catalog.max_gpus_per_pod}")

    runs = 1 if quick else RUNS
    sizes = measure(catalog, templates, QUICK_SIZES if quick else SIZES, runs)
    results.heading(
        f"plan_fleet and its report by number of armed models (median wall seconds, {runs} runs)"
    )
    results.table(
        ["MODELS", "PLAN S", "PLAN US/MODEL", "REPORT S", "REPORT US/MODEL"],
        [
            [f"{m.n:,}", f"{m.plan_s:.4f}", f"{m.plan_s / m.n * 1e6:.0f}",
             f"{m.render_s:.4f}", f"{m.render_s / m.n * 1e6:.0f}"]
            for m in sizes
        ],
    )  # fmt: skip

    small, large = sizes[0], sizes[-1]
    per_model = {m.n: m.plan_s / m.n for m in sizes}
    growth = per_model[large.n] / per_model[small.n]
    budget = next(m for m in sizes if m.n == BUDGET_MODELS)
    results.heading("budgets")
    results.print(
        f"{BUDGET_MODELS} models: {budget.plan_s:.3f} s (budget <= {BUDGET_S:g} s):"
        f" {verdict(budget.plan_s <= BUDGET_S, quick)}"
    )
    results.print(
        f"per-model time {large.n:,} vs {small.n}: {growth:.2f}x (budget <= {BUDGET_LINEAR}x):"
        f" {verdict(growth <= BUDGET_LINEAR, quick)}"
    )
    report_growth = (large.render_s / large.n) / (small.render_s / small.n)
    results.print(f"report per-model time {large.n:,} vs {small.n}: {report_growth:.2f}x")
    results.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
