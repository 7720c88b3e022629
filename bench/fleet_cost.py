"""What the prod fleet costs as planned, against the placement an operator would pick by hand.

The naive rule is the seed's: each model on the smallest single GPU whose VRAM covers
1.15 x its weights (the cheaper one where two types have the same VRAM), else 8x H200.
For every model the script also asks our estimator whether that naive pick would even
serve: FP8 weights on Ampere, a tensor-parallel degree the heads do not allow, a count under
the model's minimum, or too little KV cache for the configured full-context sequences.

Last, what co-location saves (small models of one engine sharing a pod when cheaper): on
the stack itself and on a fleet of 20 small models (the catalog's Ollama and ComfyUI models
cloned under fresh ids), each planned with `colocate` off and on.

Run: .venv/bin/python bench/fleet_cost.py [--quick] [STACK]   (default prod)
  --quick: the same stack and a 4-model small fleet, the same code path, for CI.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from support.common import Results, Verdict, judge, price, synthetic_registry

from frutebox_infra.catalog.files import load_registry
from frutebox_infra.catalog.schema import Gpu, Registry
from frutebox_infra.estimates.fit import HEADROOM
from frutebox_infra.planner.plan import HOURS_PER_MONTH, ModelPlan, plan_fleet
from frutebox_infra.recipes.base import ServeOptions
from frutebox_infra.stack.environment import Environment
from frutebox_infra.stack.settings import StackSettings
from frutebox_infra.stack.stack_file import load_settings, parse_settings, stack_file

FALLBACK_GPU, FALLBACK_COUNT = "NVIDIA H200", 8
SMALL_FLEET = 20
QUICK_SMALL_FLEET = 4
"""`--quick` prices the same stack (prod: multi-GPU placements and naive picks that do not
serve, which dev has none of) and a smaller fleet of small models."""
SMALL_TEMPLATES = ("qwen3-8b", "llama-3.2-1b", "sdxl-1.0", "stable-audio-open-1.5")


def naive_pick(registry: Registry, weights_gb: float) -> tuple[Gpu, int]:
    """Smallest single GPU with VRAM >= 1.15 x weights (cheapest on a VRAM tie), else 8x H200."""
    need = weights_gb * HEADROOM
    singles = [g for g in registry.gpus if g.vram_gb >= need and price(g) is not None]
    if singles:
        return min(singles, key=lambda g: (g.vram_gb, price(g) or 0.0)), 1
    fallback = registry.gpu(FALLBACK_GPU)
    assert fallback is not None
    return fallback, FALLBACK_COUNT


def naive_verdict(plan: ModelPlan, settings: StackSettings, gpu: Gpu, count: int) -> Verdict:
    """Our estimator's word on the naive pick, serving the model exactly as the plan does."""
    r = plan.resolution
    assert r.model is not None and r.recipe is not None and r.serving is not None
    assert r.image is not None
    override = settings.overrides.get(plan.model_id)
    options = ServeOptions(
        min_sequences=(override.min_concurrent_sequences if override else None)
        or settings.min_concurrent_sequences
    )
    return judge(r.model, r.recipe, r.serving, options, r.image, gpu, count)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 small models: for CI")
    parser.add_argument("stack", nargs="?", help="the stack to price (default prod)")
    args = parser.parse_args()
    results = Results(__file__, quick=args.quick)
    stack = args.stack or "prod"
    small_fleet = QUICK_SMALL_FLEET if args.quick else SMALL_FLEET
    registry = load_registry()
    settings = load_settings(stack_file(stack))
    plan = plan_fleet(registry, settings, stack=stack)
    results.print(
        f"stack {stack}: {len(plan.models)} armed models, SECURE on-demand prices,"
        f" {HOURS_PER_MONTH} h/month"
    )
    rows: list[list[str]] = []
    planned_total = naive_total = 0.0
    naive_failures = 0
    for m in plan.models:
        if m.placement is None or m.resolution.serving is None:
            rows.append([m.model_id, "-", "no placement", *["-"] * 8])
            continue
        weights = m.resolution.serving.weights_vram_gb
        gpu, count = naive_pick(registry, weights)
        naive_usd = round((price(gpu) or 0.0) * count, 2)
        verdict = naive_verdict(m, settings, gpu, count)
        naive_failures += not verdict.fits
        planned_total += m.placement.usd_per_hour
        naive_total += naive_usd
        rows.append(
            [
                m.model_id,
                f"{weights:g} GB",
                m.placement.label,
                f"${m.placement.usd_per_hour:.2f}",
                f"${m.placement.usd_per_hour * HOURS_PER_MONTH:,.0f}",
                f"{count}x {gpu.name}",
                f"${naive_usd:.2f}",
                f"${naive_usd * HOURS_PER_MONTH:,.0f}",
                f"{naive_usd - m.placement.usd_per_hour:+.2f}",
                "yes" if verdict.fits else "NO",
                _why(verdict),
            ]
        )
    results.heading("per model: pod $/h and $/month, planned vs naive")
    results.table(
        [
            "MODEL",
            "WEIGHTS",
            "PLANNED",
            "$/H",
            "$/MONTH",
            "NAIVE (1.15x)",
            "$/H",
            "$/MONTH",
            "NAIVE-PLAN $/H",
            "NAIVE FITS",
            "WHY NOT",
        ],
        rows,
    )
    volume = plan.volume.usd_per_month
    results.heading("fleet")
    results.table(
        ["", "PODS $/H", "PODS $/MONTH", "+ VOLUME $/MONTH", "FLEET $/MONTH"],
        [
            [
                label,
                f"${usd:,.2f}",
                f"${usd * HOURS_PER_MONTH:,.2f}",
                f"${volume:,.2f}",
                f"${usd * HOURS_PER_MONTH + volume:,.2f}",
            ]
            for label, usd in (("planned", planned_total), ("naive", naive_total))
        ],
    )
    saving = naive_total - planned_total
    results.print(
        f"saving of the plan over the naive picks: ${saving:,.2f}/h ="
        f" ${saving * HOURS_PER_MONTH:,.2f}/month ({saving / naive_total:.0%} of the naive pods)"
    )
    results.print(
        f"naive picks that would not serve under our estimator: {naive_failures} of"
        f" {len(plan.models)}"
        + (" (the naive total counts them anyway: it is a lower bound)" if naive_failures else "")
    )
    colocation(results, registry, settings, stack, small_fleet)
    results.write()
    return 0


def colocation(
    results: Results, registry: Registry, settings: StackSettings, stack: str, small_fleet: int
) -> None:
    """Pods and $/h with one pod per model against co-location, on the stack and small ones."""
    templates = [m for m in registry.models if m.id in SMALL_TEMPLATES]
    small = synthetic_registry(registry, templates, small_fleet)
    small_settings = parse_settings(
        {
            "models": [m.id for m in small.models],
            "dataCenter": settings.data_center,
            "budgetUsdPerHour": 1000,
            "hfToken": {"secure": "configured"},  # noticed, never read
        },
        where="bench/fleet_cost.py",
    )
    rows = []
    env = Environment(hf_token=True)
    for label, reg, base in ((f"stack {stack}", registry, settings),
                             (f"{small_fleet} small models", small, small_settings)):  # fmt: skip
        apart = plan_fleet(reg, replace(base, colocate=False), stack=stack,
                           environment=env)  # fmt: skip
        shared = plan_fleet(reg, replace(base, colocate=True), stack=stack,
                            environment=env)  # fmt: skip
        saving = apart.usd_per_hour_best - shared.usd_per_hour_best
        rows.append(
            [
                label,
                str(len(apart.models)),
                f"{len(apart.pods)} -> {len(shared.pods)}",
                f"${apart.usd_per_hour_best:.2f} -> ${shared.usd_per_hour_best:.2f}",
                f"${apart.usd_per_hour_worst:.2f} -> ${shared.usd_per_hour_worst:.2f}",
                f"${saving:.2f} ({saving / apart.usd_per_hour_best:.0%})"
                if apart.usd_per_hour_best
                else "-",
                f"${saving * HOURS_PER_MONTH:,.2f}",
            ]
        )
    results.heading("co-location: one pod per model -> shared pods where cheaper")
    results.table(
        ["FLEET", "MODELS", "PODS", "$/H BEST", "$/H WORST", "SAVED $/H", "SAVED $/MONTH"], rows
    )
    results.print(
        f"(the small fleet: {', '.join(SMALL_TEMPLATES)} cloned in turn, HF token assumed)"
    )


def _why(verdict: Verdict) -> str:
    if verdict.fits:
        return ""
    return (verdict.reason or "").split(":")[0]


if __name__ == "__main__":
    sys.exit(main())
