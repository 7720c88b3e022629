"""How close the co-location grouping comes to the best grouping there is, and how fast.

Random fleets of small Ollama models (the catalog's qwen3-8b and llama-3.2-1b cloned with
weights drawn from 0.5-9 GB; the real GPU inventory and prices) are grouped three ways: the
planner (exact subset search up to `EXACT_LIMIT` models per class), the greedy heuristic it
uses beyond that bound, and a brute force over every set partition (Bell(n) of them). The
ratio is the grouping's best-case $/h over the brute force's: 1.000 is optimal.

Run: .venv/bin/python bench/colocation.py [--quick]   (about a minute)
  --quick: two fleets of 3 and 5 models and one of 20, the same code path in seconds, for CI.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from collections.abc import Sequence
from dataclasses import replace
from functools import partial

from support.common import Results, timed

from frutebox_infra.catalog.files import load_registry
from frutebox_infra.catalog.schema import Registry
from frutebox_infra.planner import colocate
from frutebox_infra.planner.colocate import Member, all_partitions, group_placements, members_of
from frutebox_infra.planner.plan import plan_fleet
from frutebox_infra.stack.settings import StackSettings
from frutebox_infra.stack.stack_file import parse_settings

SIZES = (3, 5, 7, 8)
FLEETS_PER_SIZE = 8
LARGE_SIZES = (20, 40)
QUICK_SIZES, QUICK_FLEETS_PER_SIZE, QUICK_LARGE_SIZES = (3, 5), 2, (20,)


def fleet(catalog: Registry, rng: random.Random, n: int) -> tuple[Registry, StackSettings]:
    templates = [m for m in catalog.models if m.id in ("qwen3-8b", "llama-3.2-1b")]
    models = []
    for i in range(n):
        t = templates[i % len(templates)]
        vram = round(rng.uniform(0.5, 9.0), 1)
        weights = replace(t.weights, vram_gb=vram, disk_gb=vram)
        models.append(replace(t, id=f"{t.id}-c{i:02d}", weights=weights))
    reg = replace(catalog, models=tuple(models))
    config = {"models": [m.id for m in models], "dataCenter": "EU-RO-1",
              "budgetUsdPerHour": 1000, "colocate": True}  # fmt: skip
    return reg, parse_settings(config, where="bench/colocation.py")


def members(reg: Registry, settings: StackSettings) -> list[Member]:
    alone = plan_fleet(reg, replace(settings, colocate=False), stack="bench")
    return members_of(((m.model_id, m.candidates, True) for m in alone.models), settings)


def cents(reg: Registry, settings: StackSettings, group: Sequence[Member]) -> int | None:
    if len(group) == 1:
        return round(group[0].alone[0].usd_per_hour * 100)
    found = group_placements(reg, settings, group)
    return round(found[0].usd_per_hour * 100) if found else None


def brute_force(reg: Registry, settings: StackSettings, ms: list[Member]) -> int:
    """Every partition priced; a group's price is looked up once (Bell(9) is 21,147)."""
    best: int | None = None
    priced: dict[frozenset[str], int | None] = {}
    for part in all_partitions(ms):
        total = 0
        for group in part:
            key = frozenset(m.model_id for m in group)
            if key not in priced:
                priced[key] = cents(reg, settings, group)
            c = priced[key]
            if c is None:
                break
            total += c
        else:
            best = total if best is None or total < best else best
    assert best is not None
    return best


def grouped(reg: Registry, settings: StackSettings, ms: list[Member], *, greedy: bool) -> int:
    saved = colocate.EXACT_LIMIT
    colocate.EXACT_LIMIT = 0 if greedy else saved
    try:
        groups = colocate.choose_groups(reg, settings, ms)
    finally:
        colocate.EXACT_LIMIT = saved
    by_id = {m.model_id: m for m in ms}
    total = 0
    for ids in groups:
        c = cents(reg, settings, [by_id[i] for i in ids])
        assert c is not None
        total += c
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small fleets, few: for CI")
    quick = parser.parse_args().quick
    results = Results(__file__, quick=quick)
    sizes, per_size, large_sizes = (
        (QUICK_SIZES, QUICK_FLEETS_PER_SIZE, QUICK_LARGE_SIZES)
        if quick
        else (SIZES, FLEETS_PER_SIZE, LARGE_SIZES)
    )
    catalog = load_registry()
    rng = random.Random(17)
    rows = []
    worst = {"exact": 1.0, "greedy": 1.0}
    for n in sizes:
        ratios: dict[str, list[float]] = {"exact": [], "greedy": []}
        apart: list[float] = []
        seconds = {"exact": 0.0, "greedy": 0.0, "brute": 0.0}
        for _ in range(per_size):
            reg, settings = fleet(catalog, rng, n)
            ms = members(reg, settings)
            t_brute, best = timed(partial(brute_force, reg, settings, ms))
            seconds["brute"] += t_brute
            for kind in ("exact", "greedy"):
                t, got = timed(partial(grouped, reg, settings, ms, greedy=kind == "greedy"))
                seconds[kind] += t
                ratios[kind].append(got / best)
                worst[kind] = max(worst[kind], got / best)
            apart.append(best / sum(round(m.alone[0].usd_per_hour * 100) for m in ms))
        rows.append(
            [
                str(n),
                str(per_size),
                f"{max(ratios['exact']):.3f}",
                f"{statistics.mean(ratios['greedy']):.3f} / {max(ratios['greedy']):.3f}",
                f"{statistics.mean(apart):.2f}",
                f"{seconds['exact'] / per_size * 1000:.1f} ms",
                f"{seconds['greedy'] / per_size * 1000:.1f} ms",
                f"{seconds['brute'] / per_size * 1000:.1f} ms",
            ]
        )
    results.heading("grouping $/h over brute force (1.000 = optimal), random small Ollama fleets")
    results.table(
        ["MODELS", "FLEETS", "PLANNER MAX", "GREEDY MEAN/MAX", "BEST/APART",
         "PLANNER", "GREEDY", "BRUTE FORCE"],
        rows,
    )  # fmt: skip
    results.print(
        f"worst ratio: planner {worst['exact']:.3f}, greedy heuristic {worst['greedy']:.3f}"
    )
    results.heading("beyond the exact bound (greedy): saving against a pod each, and time")
    large_rows = []
    for n in large_sizes:
        reg, settings = fleet(catalog, rng, n)
        ms = members(reg, settings)
        t, got = timed(partial(grouped, reg, settings, ms, greedy=False))
        alone = sum(round(m.alone[0].usd_per_hour * 100) for m in ms)
        large_rows.append([str(n), f"${alone / 100:.2f}", f"${got / 100:.2f}",
                           f"{got / alone:.2f}", f"{t * 1000:.0f} ms"])  # fmt: skip
    results.table(["MODELS", "APART $/H", "GROUPED $/H", "RATIO", "GROUPING TIME"], large_rows)
    results.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
