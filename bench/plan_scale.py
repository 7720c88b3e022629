"""How planning time grows with the number of armed models: it must stay linear, and fast.

Synthesizes 10 .. 10,000 armed models by cloning the catalog models that resolve to a
placement (so every synthetic model does the full work: engine, the count search on every
GPU type, the placements and pod the plan keeps) under new ids, into a Registry built in
memory, with stack settings from `parse_settings`. Nothing is written to disk.

Prints per size the median seconds of `plan_fleet`, microseconds per model, and the ratio of
per-model time at the largest size to the smallest (machine speed cancels out of the ratio).
Also prints the set-up costs outside `plan_fleet` (Registry validation, settings parsing) and
the report rendering (each of a plan made just before it), because a preview pays those too,
and a cProfile of the 1,000 plan.

Run: .venv/bin/python bench/plan_scale.py [--quick]
  --quick: 10 and 200 models, one run each and the profile of the 200: the same code path
  in a few seconds, for CI (exits non-zero if planning breaks; the targets are judged on the
  full run only).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
from dataclasses import dataclass
from functools import partial
from typing import Any

from _common import heading, median_seconds, print_table, synthetic_registry, timed

from frutebox_infra.catalog.files import load_registry
from frutebox_infra.catalog.schema import Model, Registry
from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.planner.resolver import resolve
from frutebox_infra.recipes.base import ServeOptions
from frutebox_infra.report.plan_report import plan_data, plan_table
from frutebox_infra.stack.settings import StackSettings
from frutebox_infra.stack.stack_file import parse_settings

SIZES = (10, 100, 1_000, 10_000)
RUNS = {10: 25, 100: 11, 1_000: 5, 10_000: 3}
"""More runs where one run is short, so the median is not a timer-resolution artefact."""
QUICK_SIZES = (10, 200)
PROFILED = 1_000
TARGET_LINEAR = 1.5
"""Per-model time at the largest size over that at the smallest."""
TARGET_SECONDS = {1_000: 0.2, 10_000: 1.0}


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
    plan_table(result)
    plan_data(result)


PARTS: tuple[tuple[str, tuple[str, str]], ...] = (
    ("  resolve (per model)", ("resolver.py", "resolve")),
    ("    rank: the count search (per model)", ("ranking.py", "rank")),
    ("      smallest_counts_of (per fit request)", ("count_search.py", "smallest_counts_of")),
    ("    recipe.serving", ("recipes/", "serving")),
    ("    recipe.count_problem (per model and count)", ("recipes/", "count_problem")),
    ("  speed_floor.choose (the floor's walk, per model)", ("speed_floor.py", "choose")),
    ("    ModelTerms.decode_rate (per placement walked)", ("/speed.py", "decode_rate")),
    ("    fit.estimate (per placement built)", ("fit.py", "estimate")),
    ("  group_pods (pods, co-location)", ("colocate.py", "group_pods")),
    ("  plan_seeding (the seeding decisions)", ("seeding_plan.py", "plan_seeding")),
    ("  launch_problems (every launch checked)", ("launches.py", "launch_problems")),
    ("  recipe.pod (rendered once per launch variant)", ("recipes/base.py", "pod")),
)
"""Where to look: cumulative time of these (file, function) pairs, summed over recipes."""


def _cumulative(stats: pstats.Stats, where: tuple[str, str]) -> float:
    """Cumulative seconds of every function named `where[1]` in a file matching `where[0]`.

    Counts only calls from outside files matching `where[0]`, so a recipe's pod() calling its
    own serving(), or SGLang's count_problem() calling the base one, is not counted twice.
    """
    path, name = where
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, dict[Any, Any]]] = stats.stats  # type: ignore[attr-defined]
    seconds = 0.0
    for (file, _line, func), (*_, callers) in raw.items():
        if func != name or path not in file:
            continue
        for (caller_file, _l, _f), (*_, caller_cumtime) in callers.items():
            if path not in caller_file:
                seconds += caller_cumtime
    return seconds


@dataclass(frozen=True)
class Size:
    """Median seconds at one number of armed models."""

    n: int
    runs: int
    plan_s: float
    registry_s: float
    settings_s: float
    render_s: float


def measure(catalog: Registry, templates: list[Model], n: int, runs: int) -> Size:
    registry = synthetic_registry(catalog, templates, n)
    settings = synthetic_settings(registry)
    result = plan(registry, settings)  # warm-up; also checks the plan is what we think
    assert len(result.models) == n and all(m.placement for m in result.models)
    assert not [m.problems for m in result.models if m.problems]
    registry_s = median_seconds(lambda: synthetic_registry(catalog, templates, n), runs)
    settings_s = median_seconds(lambda: synthetic_settings(registry), runs)
    render_s = _first_render_seconds(registry, settings, max(1, runs // 2))
    plan_s = median_seconds(lambda: plan(registry, settings), runs)
    return Size(n, runs, plan_s, registry_s, settings_s, render_s)


def _first_render_seconds(registry: Registry, settings: StackSettings, runs: int) -> float:
    """Median seconds of rendering a plan made just before, as a preview renders one: a plan
    works out some figures (a kept placement's whole estimate) when a report first asks and
    keeps them, so rendering one plan again would time a cheaper render at sizes run more
    often than at those run once."""
    return statistics.median(
        timed(partial(render, plan(registry, settings)))[0] for _ in range(runs)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one run: for CI")
    quick = parser.parse_args().quick
    catalog = load_registry()
    templates = servable_templates(catalog)
    print(
        f"templates: {len(templates)} servable catalog models cloned round-robin"
        f" ({', '.join(m.id for m in templates)})"
    )
    print(f"GPU inventory: {len(catalog.gpus)} types x counts 1..{catalog.max_gpus_per_pod}")

    plan_sizes = QUICK_SIZES if quick else SIZES
    sizes = [measure(catalog, templates, n, 1 if quick else RUNS[n]) for n in plan_sizes]
    rows = [
        [
            f"{m.n:,}",
            str(m.runs),
            f"{m.plan_s:.4f}",
            f"{m.plan_s / m.n * 1e6:.0f}",
            f"{m.registry_s:.5f}",
            f"{m.settings_s:.5f}",
            f"{m.render_s:.4f}",
            f"{m.render_s / m.n * 1e6:.0f}",
        ]
        for m in sizes
    ]
    heading("plan_fleet time by number of armed models (median wall seconds)")
    print_table(
        [
            "MODELS",
            "RUNS",
            "PLAN S",
            "PLAN US/MODEL",
            "REGISTRY BUILD S",
            "SETTINGS PARSE S",
            "REPORT S",
            "REPORT US/MODEL",
        ],
        rows,
    )

    small, large = sizes[0], sizes[-1]
    growth = (large.plan_s / large.n) / (small.plan_s / small.n)
    heading("targets" + (" (judged on the full run only)" if quick else ""))
    print(
        f"per-model time {large.n:,} vs {small.n}: {growth:.2f}x (target <= {TARGET_LINEAR}x)"
        + ("" if quick else f": {'MET' if growth <= TARGET_LINEAR else 'MISSED'}")
    )
    for m in sizes:
        if m.n in TARGET_SECONDS and not quick:
            target = TARGET_SECONDS[m.n]
            print(
                f"{m.n:,} models: {m.plan_s:.3f} s (target < {target:g} s):"
                f" {'MET' if m.plan_s < target else 'MISSED'}"
            )
    for label, first, last in (
        ("Registry validation", small.registry_s, large.registry_s),
        ("parse_settings", small.settings_s, large.settings_s),
        ("report (table + data)", small.render_s, large.render_s),
    ):
        print(
            f"{label} (outside plan_fleet) per-model {large.n:,} vs {small.n}:"
            f" {(last / large.n) / (first / small.n):.1f}x ({last:.3f} s at {large.n:,})"
        )

    profiled = QUICK_SIZES[-1] if quick else PROFILED
    heading(f"where plan_fleet spends its time: cProfile, {profiled:,} models")
    registry = synthetic_registry(catalog, templates, profiled)
    settings = synthetic_settings(registry)
    profiler = cProfile.Profile()
    result = profiler.runcall(plan, registry, settings)
    stats = pstats.Stats(profiler)
    total = _cumulative(stats, ("plan.py", "plan_fleet"))
    print_table(
        ["PART", "CUM S", "SHARE"],
        [
            [label, f"{seconds:.3f}", f"{seconds / total:.0%}"]
            for label, seconds in (
                ("plan_fleet (under the profiler)", total),
                *((label, _cumulative(stats, where)) for label, where in PARTS),
            )
        ],
    )
    rankings = [m.resolution.ranking for m in result.models if m.resolution.ranking]
    ranked = sum(len(r.ranked) for r in rankings)
    built = [p for r in rankings for p in r.built.values()]
    used = sum(len(m.candidates) for m in result.models)
    # Placement.pod is rendered on first use; a rendered one sits in the instance's __dict__.
    rendered = sum("pod" in vars(p) for p in built)
    # Calls, unlike seconds, do not vary with the machine's load: a figure to compare runs by.
    print(f"Python calls per model under the profiler: {stats.total_calls / profiled:.0f}")  # type: ignore[attr-defined]
    print(
        f"placements ranked: {ranked:,} (one per fitting GPU type); built while planning:"
        f" {len(built):,}, kept by the plan (placement + fallbacks within the premium):"
        f" {used:,}; pods rendered while planning: {rendered:,}"
    )
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).strip_dirs().sort_stats("tottime").print_stats(8)
    print("\n".join(line for line in out.getvalue().splitlines()[4:] if line.strip()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
