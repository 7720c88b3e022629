"""API calls per minute and per hour of a deploy, against RunPod's documented quotas.

The deploy step (`python -m frutebox_infra.runpod`, run in-process, one thread per resource as
Pulumi runs them in parallel) deploys against the realistic emulator with its clock sped up
`SCALE` times; the step's own waits are shortened by the same factor, so every figure below is
in emulated time: what the same `up` would send to RunPod. Three deploys:

- the prod stack's `up`: its volume, then every armed model's pod, with the default waits
  (poll 5 s, API check every 60 s while the proxy probe waits for health);
- the same with every LLM's launch crash-looping: once a restart is seen the pod is read every
  15 s and its system log counted, until the loop fails the step;
- a 20-pod fleet: 20 Ollama pods created at once on one volume.

RunPod's quotas (docs "Rate limits"; the OpenAPI RateLimit-Policy example): 60 requests a
minute and 3000 an hour per user; the emulator enforces them, so a 429 would show below.

Run: .venv/bin/python bench/api_budget.py [--quick]
  --quick: one crash-looping LLM and a 2-pod fleet, the same code path in seconds, for CI
  (exits non-zero if a deploy breaks; nothing is judged).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from _common import Results
from _deploy import command, step_env
from _deploy import in_parallel as run_in_parallel

from frutebox_infra.catalog.files import load_registry
from frutebox_infra.deploy.requests import pod_request, volume_request
from frutebox_infra.emulator.faults import FaultAction, parse_faults
from frutebox_infra.emulator.server import RunningEmulator, realistic_for, start
from frutebox_infra.planner.plan import plan_fleet
from frutebox_infra.stack.stack_file import load_settings, stack_file

SCALE = 100.0
QUOTA_PER_MINUTE, QUOTA_PER_HOUR = 60, 3000
FLEET_PODS = 20
QUICK_FLEET_PODS = 2
CRASHING = ("qwen-3.6-27b", "qwen3-235b-a22b", "kimi-k2.6")
"""The prod models whose launch crash-loops in the third deploy: the pods read once a restart
is seen (`restart_check_s`) must stay inside the quota too."""


def in_parallel(requests: Sequence[str], env: dict[str, str], *, fail_ok: bool = False) -> None:
    steps = run_in_parallel("pod create", requests, [env] * len(requests))
    failed = [s for s in steps if s.code != 0]
    if failed and not fail_ok:
        raise SystemExit(f"pod create failed: {failed[0].err[-2000:]}")


def budget(emulator: RunningEmulator) -> dict[str, Any]:
    """Peak calls in any emulated minute and hour, from the emulator's request log."""
    calls = [r for r in emulator.app.account.requests if r["op"] != "proxy"]
    times = sorted(r["at"] * SCALE for r in calls)  # emulated seconds

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


def prod_up(*, crash_looping: bool = False, crashing: Sequence[str] = CRASHING) -> dict[str, Any]:
    registry = load_registry()
    settings = load_settings(stack_file("prod"))
    plan = plan_fleet(registry, settings, stack="prod")
    emulator = start(realism=realistic_for(registry, time_scale=SCALE))
    try:
        env = step_env(emulator, SCALE)
        volume = command("volume create", volume_request(plan).to_json(), env)
        ids = {"volume_id": volume["volumeId"], "owner": volume["owner"]}
        models = [m for m in plan.models if m.placement is not None]
        if crash_looping:
            models = [m for m in models if m.model_id in crashing]
            crash = [{"op": "pods.create", "action": FaultAction.CRASH_LOOP.value}] * len(models)
            emulator.app.faults.add(parse_faults(crash))
        requests = [pod_request(m, settings, stack="prod", **ids).to_json() for m in models]
        in_parallel(requests, env, fail_ok=crash_looping)
        what = f"prod stack up ({len(requests)} pods)"
        if crash_looping:
            what = f"prod up, {len(requests)} LLMs crash-looping"
        return {"what": what, **budget(emulator)}
    finally:
        emulator.stop()


def fleet_up(pods: int) -> dict[str, Any]:
    registry = load_registry()
    settings = load_settings(stack_file("dev"))
    plan = plan_fleet(registry, settings, stack="dev")
    model = next(m for m in plan.models if m.model_id == "qwen3-8b")
    emulator = start(realism=realistic_for(registry, time_scale=SCALE))
    try:
        env = step_env(emulator, SCALE)
        volume = command(
            "volume create", {"name": "frutebox-bench-weights", "size": 500,
                              "dataCenter": settings.data_center}, env)  # fmt: skip
        requests = []
        for index in range(pods):
            request = pod_request(model, settings, stack="bench", volume_id=volume["volumeId"],
                                  owner=volume["owner"])  # fmt: skip
            requests.append(replace(request, name=f"frutebox-bench-m{index}"))
        bodies = []
        for request in requests:
            data = json.loads(request.to_json())
            for body in data["candidates"]:
                body["name"] = data["name"]
            bodies.append(json.dumps(data))
        in_parallel(bodies, env)
        return {"what": f"{pods}-pod fleet up", **budget(emulator)}
    finally:
        emulator.stop()


def main_() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one crash loop, 2 pods: for CI")
    quick = parser.parse_args().quick
    results = Results(__file__, quick=quick)
    results.heading(
        f"RunPod API calls of a deploy, emulated time (clock x{SCALE:g}); quotas"
        f" {QUOTA_PER_MINUTE}/min, {QUOTA_PER_HOUR}/h"
    )
    rows = []
    deploys: tuple[Callable[[], dict[str, Any]], ...] = (
        (
            lambda: prod_up(crash_looping=True, crashing=CRASHING[:1]),
            lambda: fleet_up(QUICK_FLEET_PODS),
        )
        if quick
        else (prod_up, lambda: prod_up(crash_looping=True), lambda: fleet_up(FLEET_PODS))
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
