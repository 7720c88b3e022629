"""Is the planner's placement the cheapest one our own fit rules allow? Checked exhaustively.

For every catalog model that has an engine (a Hugging Face token counted as configured, so
gated models are in), over a grid of contexts and concurrencies, the planner's $/h (through
`plan_fleet` with per-model overrides, as a stack would set them) is compared with a brute
force over EVERY GPU type and EVERY count 1..8, each (gpu, count) judged on its own by the
same rules: FP8 needs a native-FP8 GPU, the image must have kernels for the GPU's
architecture, the recipe's `count_problem` (tensor-parallel divisibility and FP8 block
sharding, which expert parallelism may rescue), then `fit.estimate` (per-GPU layer split for
llama.cpp/Ollama, each engine's own memory cap), then the stack's stream-rate floor on the
placement's own speed estimate (an estimate a fact is missing for is taken, as the planner
takes it; a model that decodes no tokens has no floor).
The resolver's search (per GPU type the smallest count that fits, cheapest first) must lose
nothing: the worst ratio must be 1.000, and both must agree on when there is no placement.

The grid's concurrency N sets both the engine's concurrency and the minimum number of
full-context sequences (llama.cpp/Ollama must hold every slot; SGLang/vLLM at least N).

Run: .venv/bin/python bench/placement_optimality.py [--quick]
  --quick: one grid point (4K context, concurrency 1), the same checks, for CI.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from support.common import Results, Verdict, heading, judge, price, print_table

from frutebox_infra.catalog.files import load_registry
from frutebox_infra.catalog.schema import Gpu, Registry
from frutebox_infra.estimates.speed import SpeedEstimate
from frutebox_infra.planner.placement_speed import placement_speed
from frutebox_infra.planner.plan import plan_fleet
from frutebox_infra.planner.resolver import resolve
from frutebox_infra.recipes.base import ServeOptions
from frutebox_infra.stack.settings import StackSettings
from frutebox_infra.stack.stack_file import parse_settings

CONTEXTS = (4096, 16384, 32768, 65536, 131072)
CONCURRENCIES = (1, 4, 16)
MAX_COUNT = 8
QUICK_CONTEXTS, QUICK_CONCURRENCIES = CONTEXTS[:1], CONCURRENCIES[:1]


@dataclass(frozen=True)
class Best:
    """The cheapest (gpu, count) found, or None; ties broken on less total VRAM, as the planner."""

    usd_per_hour: float
    gpu: Gpu
    count: int

    @property
    def label(self) -> str:
        return f"{self.count}x {self.gpu.name}"


def engine_models(registry: Registry) -> list[str]:
    """Models the resolver finds an engine for: servable now, or blocked only by fit."""
    options = ServeOptions(hf_token_configured=True)
    ids = []
    for model in registry.models:
        r = resolve(registry, model.id, options)
        if r.recipe is not None and (r.problem is None or r.problem.rule == "no-placement"):
            ids.append(model.id)
    return ids


def stack(registry: Registry, ids: list[str], context: int, n: int) -> StackSettings:
    """One stack arming every model with the grid point as its overrides."""
    override = {"context": context, "concurrency": n, "minConcurrentSequences": n}
    return parse_settings(
        {
            "models": ids,
            "dataCenter": registry.data_centers[0].id,
            "budgetUsdPerHour": 10_000,  # the most a stack may say; over it is still planned
            "hfToken": {"secure": "configured"},  # noticed, never read
            "overrides": {mid: override for mid in ids},
        },
        where="bench/placement_optimality.py",
    )


def brute_force(
    registry: Registry, model_id: str, options: ServeOptions, floor: float
) -> Best | None:
    """Every GPU type x every count 1..8, each judged alone; the cheapest that fits and
    decodes at least `floor` tok/s per stream."""
    model = registry.model(model_id)
    resolution = resolve(registry, model_id, options)
    assert model is not None and resolution.recipe is not None
    recipe, image = resolution.recipe, resolution.image
    assert image is not None
    serving = recipe.serving(model, options)
    best: Best | None = None
    for gpu in registry.gpus:
        per_gpu = price(gpu)
        if per_gpu is None:
            continue
        for count in range(1, MAX_COUNT + 1):
            verdict: Verdict = judge(model, recipe, serving, options, image, gpu, count)
            if not verdict.fits:
                continue
            usd = round(per_gpu * count, 2)
            speed = placement_speed(recipe, model, serving, gpu, count, usd, registry.speed)
            if isinstance(speed, SpeedEstimate) and speed.decode_tok_s_per_stream < floor:
                continue
            found = Best(usd, gpu, count)
            if best is None or (found.usd_per_hour, gpu.vram_gb * count) < (
                best.usd_per_hour,
                best.gpu.vram_gb * best.count,
            ):
                best = found
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one grid point: for CI")
    quick = parser.parse_args().quick
    results = Results(__file__, quick=quick)
    contexts = QUICK_CONTEXTS if quick else CONTEXTS
    concurrencies = QUICK_CONCURRENCIES if quick else CONCURRENCIES
    registry = load_registry()
    ids = engine_models(registry)
    print(f"models with an engine: {len(ids)} ({', '.join(ids)})")
    print(
        f"grid: contexts {', '.join(map(str, contexts))} x concurrency {concurrencies};"
        f" brute force over {len(registry.gpus)} GPU types x counts 1..{MAX_COUNT}"
    )
    cells: dict[tuple[str, int], dict[int, str]] = {}
    engines: dict[str, str] = {}
    worst = 1.0
    cases = both_none = refused = 0
    disagreements: list[str] = []
    for context in contexts:
        for n in concurrencies:
            plan = plan_fleet(registry, stack(registry, ids, context, n), stack="bench")
            for model_plan in plan.models:
                cases += 1
                mid = model_plan.model_id
                engines[mid] = model_plan.resolution.engine or "-"
                if any(p.rule == "override-refused" for p in model_plan.problems):
                    # A context above the model's own, or token overrides on ComfyUI: the
                    # planner refuses the stack, so there is no placement to compare.
                    refused += 1
                    cells.setdefault((mid, context), {})[n] = "refused"
                    continue
                options = ServeOptions(
                    context_tokens=context,
                    concurrency=n,
                    min_sequences=n,
                    hf_token_configured=True,
                )
                best = brute_force(registry, mid, options, model_plan.min_decode_tok_s)
                chosen = model_plan.placement
                if chosen is None and best is None:
                    both_none += 1
                    cell = "none (both)"
                elif chosen is None or best is None:
                    cell = "DISAGREE"
                    disagreements.append(
                        f"{mid} ctx {context} n {n}: planner"
                        f" {chosen.label if chosen else 'none'}, brute force"
                        f" {best.label if best else 'none'}"
                    )
                else:
                    worst = max(worst, chosen.usd_per_hour / best.usd_per_hour)
                    coarse = "" if chosen.fit.exact else "~"
                    cell = f"{chosen.label} ${chosen.usd_per_hour:.2f}{coarse}"
                    if best.label != chosen.label:
                        cell += f" vs {best.label} ${best.usd_per_hour:.2f}"
                cells.setdefault((mid, context), {})[n] = cell
    heading(
        "planner's placement per (model, context, N), SECURE $/h per pod; a brute-force"
        " result is shown only where it differs; ~ = coarse estimate"
    )
    print_table(
        ["MODEL", "ENGINE", "CONTEXT", *(f"N={n}" for n in concurrencies)],
        [
            [mid, engines[mid], str(context), *(by_n[n] for n in concurrencies)]
            for (mid, context), by_n in sorted(cells.items())
        ],
    )
    results.heading("summary")
    placed = cases - both_none - refused - len(disagreements)
    results.print(
        f"cases: {cases}; both placed: {placed}; neither places: {both_none}; overrides"
        f" refused (context above the model's, or on ComfyUI): {refused}"
    )
    results.print(f"one places and the other does not: {len(disagreements)}")
    for line in disagreements:
        results.print(f"  BUG: {line}")
    results.print(f"worst planner/brute-force $/h ratio: {worst:.3f} (target 1.000)")
    ok = worst <= 1.0 + 1e-9 and not disagreements
    results.print(f"target: {'MET' if ok else 'MISSED'}")
    results.write()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
