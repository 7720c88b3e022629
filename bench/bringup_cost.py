"""What a first deploy bills before each model serves, with and without seeding, measured.

The prod stack is deployed twice on a fresh realistic emulator (its clock sped up `SCALE`
times; the deploy step's waits shrink alike): once with seeding off, so each GPU pod downloads
its own weights, and once with seeding on, each model's weights first put on the volume by a
CPU pod. The deploy step (`python -m frutebox_infra.runpod`) runs in-process as a real `up`
runs it (`support.deploy.up`): the volume, then per pod its models' seeds side by side, then
the pod, then the sweep that ends every `up`. Every figure
comes from the emulator's billing records (what `GET /v2/billing/pods` sums), in emulated time:
a GPU pod from its create until its server answers, a seeding pod from its create until it
was terminated. Next to them, the plan's own figures (`frutebox plan`'s bring-up section),
from the same assumptions the emulator times its pods by (seeding/bringup.py).

Run: .venv/bin/python bench/bringup_cost.py [--quick]
--quick takes every path of the full run at a smaller size, on a faster clock: the smallest
prod model of each engine on the standard tier and one on the high-performance tier, seeding
off and on; it exits non-zero when a deploy fails.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from support.common import Results
from support.deploy import place_start_hooks, step_env, up

from frutebox_infra.catalog.files import load_registry
from frutebox_infra.deploy.requests import pod_name
from frutebox_infra.emulator.server import RunningEmulator, realistic_for, start
from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.report.bringup_report import assumptions
from frutebox_infra.stack.stack_file import load_settings, stack_file
from frutebox_infra.views.plan import PlanView

SCALE = 300.0
QUICK_SCALE = 1000.0
QUICK_MODELS = ("qwen-3.6-27b", "kimi-k2.6", "sdxl-1.0")
"""The smallest prod model of each engine prod runs (SGLang, llama.cpp, ComfyUI)."""
TARGET = 0.80
"""The issue's target: GPU $ billed before serving down by at least 80%."""


def usd(value: float) -> str:
    """Dollars to a tenth of a cent: a small model's bring-up costs cents."""
    return f"${value:,.3f}"


def deploy(plan: FleetPlan, emulator: RunningEmulator, scale: float) -> None:
    """The stack's first `up`, as a real one runs (`support.deploy.up`): volume; per pod, its
    models' seeds, then the pod; then the sweep. Generous bounds: a bring-up is measured, not
    cut."""
    hours = 6 * 3600.0
    hooks = None
    if not plan.settings.seeding:
        hooks = functools.partial(place_start_hooks, emulator, plan=plan)
    done = up(plan, step_env(emulator, scale, healthy_s=hours, seed_s=hours), on_volume=hooks)
    if done.failed or done.sweep is None or done.sweep.code != 0:
        failed = done.failed or [s for s in [done.sweep] if s is not None]
        raise SystemExit(f"the deploy failed: {failed[0].err[-2000:] if failed else '?'}")


def billed_usd(pod: dict[str, Any], until: float | None, scale: float) -> float:
    """What the pod's billing records add up to until `until` (its clock's seconds), emulated."""
    total = 0.0
    for began, ended, rate in pod["emulator"]["billed"]:
        start = datetime.fromisoformat(began).timestamp()
        stop = datetime.fromisoformat(ended).timestamp() if ended else None
        end = min(x for x in (stop, until) if x is not None)
        total += max(0.0, end - start) * scale / 3600 * float(rate)
    return total


def measure(plan: FleetPlan, scale: float) -> dict[str, Any]:
    """Deploy `plan` on a fresh realistic emulator; GPU $ before serving per model, seeding $."""
    registry = load_registry()
    emulator = start(realism=realistic_for(registry, time_scale=scale))
    try:
        deploy(plan, emulator, scale)
        pods = [p for p in emulator.app.state()["pods"] if not p["emulator"]["foreign"]]
    finally:
        emulator.stop()
    gpu: dict[str, float] = {}
    seed: dict[str, float] = {}
    for pod in pods:
        record = pod["emulator"]
        if "gpu" in pod:
            serves = record["started_wall"] + record["load_s"]
            gpu[pod["name"]] = billed_usd(pod, serves, scale)
        else:
            seed[pod["name"].removesuffix("-seed")] = billed_usd(pod, None, scale)
    return {"gpu": gpu, "seed": seed}


def stack_plan(models: Sequence[str] | None, seeding: bool, tier: str) -> FleetPlan:
    settings = load_settings(stack_file("prod"))
    keys: dict[str, Any] = {"seeding": seeding, "volume_type": tier}
    if models is not None:
        keys["models"] = tuple(models)
    return plan_fleet(load_registry(), replace(settings, **keys), stack="prod")


def report(
    results: Results, models: Sequence[str] | None, scale: float, tier: str = "STANDARD"
) -> float:
    """Print one comparison; returns the measured fraction of GPU $ that seeding removed."""
    off, on = stack_plan(models, False, tier), stack_plan(models, True, tier)
    assert off.seeding is not None and on.seeding is not None
    results.heading(
        f"first deploy of the prod stack{'' if models is None else ' (' + ', '.join(models) + ')'}"
        f" on the realistic emulator, clock x{scale:g} ({assumptions(PlanView(plan=on))})"
    )
    before, after = measure(off, scale), measure(on, scale)
    rows, sums = [], [0.0] * 6
    for m in on.models:
        name = pod_name("prod", m.model_id)
        plan_off = off.seeding.of(m.model_id)
        plan_on = on.seeding.of(m.model_id)
        assert plan_off is not None and plan_on is not None
        figures = [
            plan_off.bringup.gpu_before_serving_usd,
            before["gpu"].get(name, 0.0),
            plan_on.bringup.gpu_before_serving_usd,
            after["gpu"].get(name, 0.0),
            plan_on.bringup.seed_usd,
            after["seed"].get(pod_name("prod", m.model_id), 0.0),
        ]
        sums = [a + b for a, b in zip(sums, figures, strict=True)]
        gpu = m.placement.label if m.placement else "-"
        rows.append([m.model_id, gpu, *(usd(f) for f in figures)])
    rows.append(["total", "", *(usd(f) for f in sums)])
    headers = ["model", "GPU", "off: plan", "off: billed", "on: plan", "on: billed"]
    results.table([*headers, "seed: plan", "seed: billed"], rows)
    planned = 1 - sums[2] / sums[0] if sums[0] else 0.0
    measured = 1 - sums[3] / sums[1] if sums[1] else 0.0
    verdict = "met" if measured >= TARGET else "NOT met"
    results.print(
        f"\nGPU $ billed before serving: {usd(sums[1])} -> {usd(sums[3])} billed"
        f" ({measured:.0%} less), {usd(sums[0])} -> {usd(sums[2])} planned ({planned:.0%} less);"
        f" target {TARGET:.0%} less: {verdict}"
    )
    results.print(
        f"first deploy, GPU before serving + seeding: {usd(sums[1])} without seeding,"
        f" {usd(sums[3] + sums[5])} with it ({usd(sums[5])} of seeding) billed;"
        f" {usd(sums[2] + sums[4])} planned"
    )
    return measured


def cli(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every path, smaller: for CI")
    args = parser.parse_args(argv)
    results = Results(__file__, quick=args.quick)
    if args.quick:
        # Every path of the full run, smaller: each engine's bring-up, seeded and not, on the
        # standard tier; the high-performance tier's volume and reads with one model.
        report(results, QUICK_MODELS, QUICK_SCALE)
        report(results, QUICK_MODELS[-1:], QUICK_SCALE, "HIGH_PERFORMANCE")
        return 0
    for tier in ("STANDARD", "HIGH_PERFORMANCE"):
        report(results, None, SCALE, tier)
    results.write()
    return 0


if __name__ == "__main__":
    sys.exit(cli())
