"""API calls per minute and per hour of a deploy, against RunPod's documented quotas.

The deploy step (`python -m frutebox_infra.runpod`, run in-process, one thread per resource as
Pulumi runs them in parallel) deploys against the realistic emulator with its clock sped up
`SCALE` times; the step's own waits are shortened by the same factor, so every figure below is
in emulated time: what the same `up` would send to RunPod. Three deploys:

- the prod stack's `up` as a real one runs (`support.deploy.up`): its volume; per pod, the CPU pod
  seeding each of its models (the stack seeds, the default) and then the GPU pod, which finds
  its weights on the volume, with the default waits (poll 5 s, API check every 60 s while the
  proxy probe waits for health); then the sweep that ends every `up`;
- the same stack's LLMs with their launch crash-looping, planned with seeding off (stated: the
  emulator's `crash-loop` fault applies to the next pod created, which must be the GPU pod,
  and a pod that crashes at start reads no weights): once a restart is seen the pod is read
  every 15 s and its system log counted, until the loop fails the step;
- a 20-pod fleet: the CPU pod seeding its model once, then 20 Ollama pods created at once on
  that volume, then the sweep.

RunPod's quotas (docs "Rate limits"; the OpenAPI RateLimit-Policy example): 60 requests a
minute and 3000 an hour per user; the emulator enforces them, so a 429 would show below.

Run: .venv/bin/python bench/api_budget.py [--quick]
  --quick: the same three deploys at a smaller size, for CI (exits non-zero if a deploy
  breaks; nothing is judged): prod with one model per engine (SGLang, llama.cpp, ComfyUI),
  one crash-looping LLM, a 2-pod fleet, on a clock ten times faster still.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from support.common import Results
from support.deploy import Step, command, in_parallel, run_step, step_env, up

from frutebox_infra.catalog.files import load_registry
from frutebox_infra.deploy.contract import SweepRequest
from frutebox_infra.deploy.requests import (
    pod_request,
    seed_pod_name,
    seed_request,
    volume_request,
)
from frutebox_infra.emulator.faults import FaultAction, parse_faults
from frutebox_infra.emulator.server import RunningEmulator, realistic_for, start
from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.stack.stack_file import load_settings, stack_file

SCALE = 100.0
QUICK_SCALE = 1000.0
QUOTA_PER_MINUTE, QUOTA_PER_HOUR = 60, 3000
FLEET_PODS = 20
QUICK_FLEET_PODS = 2
CRASHING = ("qwen-3.6-27b", "qwen3-235b-a22b", "kimi-k2.6")
"""The prod models whose launch crash-loops in the second deploy: the pods read once a
restart is seen (`restart_check_s`) must stay inside the quota too."""
QUICK_PROD = ("qwen-3.6-27b", "kimi-k2.6", "sdxl-1.0")
"""The smallest prod model of each engine it runs: every bring-up path prod's `up` takes."""


def must(step: Step, what: str) -> Step:
    if step.code != 0:
        raise SystemExit(f"{what} failed: {step.err[-2000:]}")
    return step


def prod_plan(models: Sequence[str] | None = None, *, seeding: bool = True) -> FleetPlan:
    """The prod stack as its file says (or armed with `models` only, or seeding off)."""
    settings = load_settings(stack_file("prod"))
    keys: dict[str, Any] = {"seeding": seeding}
    if models is not None:
        keys["models"] = tuple(models)
    return plan_fleet(load_registry(), replace(settings, **keys), stack="prod")


def budget(emulator: RunningEmulator, scale: float) -> dict[str, Any]:
    """Peak calls in any emulated minute and hour, from the emulator's request log."""
    calls = [r for r in emulator.app.account.requests if r["op"] != "proxy"]
    times = sorted(r["at"] * scale for r in calls)  # emulated seconds

    def peak(window_s: float) -> int:
        best, first = 0, 0
        for last, at in enumerate(times):
            while at - times[first] >= window_s:
                first += 1
            best = max(best, last - first + 1)
        return best

    span = (times[-1] - times[0]) / 60 if times else 0.0
    return {
        "calls": len(calls),
        "span_min": span,
        "per_min": peak(60),
        "per_hour": peak(3600),
        "throttled": sum(1 for r in calls if r["status"] == 429),
    }


def prod_up(models: Sequence[str] | None, scale: float) -> dict[str, Any]:
    """The prod stack's first `up` as a real one runs: seeds, pods, the sweep."""
    plan = prod_plan(models)
    emulator = start(realism=realistic_for(load_registry(), time_scale=scale))
    try:
        done = up(plan, step_env(emulator, scale))
        if done.failed or done.sweep is None:
            raise SystemExit(f"prod up failed: {done.failed[0].err[-2000:]}")
        must(done.sweep, "the sweep")
        what = f"prod stack up ({len(done.seeds)} seeds, {len(done.pods)} pods)"
        return {"what": what, **budget(emulator, scale)}
    finally:
        emulator.stop()


def crash_up(crashing: Sequence[str], scale: float) -> dict[str, Any]:
    """Prod's LLMs whose launch crash-loops, planned with seeding off (see the docstring)."""
    plan = prod_plan(seeding=False)
    emulator = start(realism=realistic_for(load_registry(), time_scale=scale))
    try:
        env = step_env(emulator, scale)
        volume = command("volume create", volume_request(plan).to_json(), env)
        ids = {"volume_id": volume["volumeId"], "owner": volume["owner"]}
        models = [m for m in plan.models if m.placement is not None and m.model_id in crashing]
        crash = [{"op": "pods.create", "action": FaultAction.CRASH_LOOP.value}] * len(models)
        emulator.app.faults.add(parse_faults(crash))
        requests = [pod_request(m, plan.settings, stack="prod", **ids).to_json() for m in models]
        steps = in_parallel("pod create", requests, [env] * len(requests))
        missed = [s for s in steps if s.code == 0 or "crash-loops" not in s.err]
        if missed:
            raise SystemExit(f"a crash-looping pod did not fail as one: {missed[0].err[-2000:]}")
        return {"what": f"prod up, {len(requests)} LLMs crash-looping", **budget(emulator, scale)}
    finally:
        emulator.stop()


def fleet_up(pods: int, scale: float) -> dict[str, Any]:
    """`pods` Ollama pods of one model on one volume, its weights seeded once first."""
    registry = load_registry()
    settings = load_settings(stack_file("dev"))
    plan = plan_fleet(registry, settings, stack="dev")
    model = next(m for m in plan.models if m.model_id == "qwen3-8b")
    emulator = start(realism=realistic_for(registry, time_scale=scale))
    try:
        env = step_env(emulator, scale)
        volume = command(
            "volume create", {"name": "frutebox-bench-weights", "size": 500,
                              "dataCenter": settings.data_center}, env)  # fmt: skip
        ids = {"volume_id": volume["volumeId"], "owner": volume["owner"]}
        seed = seed_request(plan, model.model_id, **ids)
        must(run_step("seed create", replace(seed, name=seed_pod_name("bench", "qwen3-8b"))
                      .to_json(), env), "seed create")  # fmt: skip
        names = [f"frutebox-bench-m{index}" for index in range(pods)]
        bodies = []
        for name in names:
            request = pod_request(model, settings, stack="bench", seeded={model.model_id}, **ids)
            data = json.loads(replace(request, name=name).to_json())
            for body in data["candidates"]:
                body["name"] = name
            bodies.append(json.dumps(data))
        steps = in_parallel("pod create", bodies, [env] * len(bodies))
        recorded = [str(must(s, "pod create").result["podId"]) for s in steps]
        sweep = SweepRequest(volumeName="frutebox-bench-weights", owner=ids["owner"],
                             volumeId=ids["volume_id"], podIds=recorded,
                             names=[*names, seed_pod_name("bench", "qwen3-8b")])  # fmt: skip
        must(run_step("stack sweep", sweep.to_json(), env), "the sweep")
        return {"what": f"{pods}-pod fleet up", **budget(emulator, scale)}
    finally:
        emulator.stop()


def main_() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the same deploys, smaller: for CI")
    quick = parser.parse_args().quick
    results = Results(__file__, quick=quick)
    scale = QUICK_SCALE if quick else SCALE
    results.heading(
        f"RunPod API calls of a deploy, emulated time (clock x{scale:g}); quotas"
        f" {QUOTA_PER_MINUTE}/min, {QUOTA_PER_HOUR}/h"
    )
    rows = []
    deploys: tuple[Callable[[], dict[str, Any]], ...] = (
        lambda: prod_up(QUICK_PROD if quick else None, scale),
        lambda: crash_up(CRASHING[:1] if quick else CRASHING, scale),
        lambda: fleet_up(QUICK_FLEET_PODS if quick else FLEET_PODS, scale),
    )
    for deploy in deploys:
        figures = deploy()
        rows.append(
            [
                figures["what"],
                str(figures["calls"]),
                f"{figures['span_min']:.1f}",
                f"{figures['per_min']} ({figures['per_min'] / QUOTA_PER_MINUTE:.0%})",
                f"{figures['per_hour']} ({figures['per_hour'] / QUOTA_PER_HOUR:.0%})",
                str(figures["throttled"]),
            ]
        )
    results.table(
        ["deploy", "API calls", "minutes", "peak/min (of 60)", "peak/h (of 3000)", "429s"], rows
    )
    results.write()
    return 0


if __name__ == "__main__":
    sys.exit(main_())
