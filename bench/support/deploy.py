"""The deploy step run in-process against an emulator on a scaled clock, for the benches.

Why a module of its own: the API-budget, idle-spend and bring-up-cost benches drive the same
command (`python -m frutebox_infra.runpod`, one thread per resource as Pulumi runs them) with
the same environment: RunPod's default waits shrunk by the clock's scale, so every figure they
read off the emulator is in emulated time, what the same run would take against RunPod. `up`
is a stack's whole `pulumi up` in the order program/fleet.py declares it, so a bench deploys
what a real `up` deploys: seeds before the pods planned to find their weights seeded.
"""

from __future__ import annotations

import functools
import io
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from frutebox_infra.deploy.requests import (
    pod_request,
    seed_request,
    seeded_ids,
    sweep_request,
    volume_request,
)
from frutebox_infra.emulator import layout
from frutebox_infra.emulator.server import RunningEmulator
from frutebox_infra.planner.plan import FleetPlan
from frutebox_infra.runpod.__main__ import main
from frutebox_infra.runpod.command_io import scaled_waits
from frutebox_infra.runpod.timeouts import Timeouts

BENCH_SERVING_KEY = "bench-serving-key-" + "0" * 24
"""A serving key for the benches' gateway pods (the emulator's; obviously not a real one)."""


def step_env(emulator: RunningEmulator, scale: float, **bounds_s: float) -> dict[str, str]:
    """The step's environment with its default waits on the emulator's clock; `bounds_s`
    (running_s, healthy_s, crash_window_s, seed_s) in emulated seconds, scaled too."""
    bounds = {"running_s": Timeouts.running_s, "healthy_s": 4 * 3600.0,
              "crash_window_s": Timeouts.crash_window_s, **bounds_s}  # fmt: skip
    names = {
        "running_s": "FRUTEBOX_RUNNING_TIMEOUT_S",
        "healthy_s": "FRUTEBOX_HEALTH_TIMEOUT_S",
        "crash_window_s": "FRUTEBOX_CRASH_WINDOW_S",
        "seed_s": "FRUTEBOX_SEED_TIMEOUT_S",
    }
    return {
        "RUNPOD_API_URL": emulator.url,
        "RUNPOD_API_KEY": "bench-key",
        "RUNPOD_PROXY_URL_TEMPLATE": emulator.app.proxy_url_template,
        # The stack's serving key, which gateway pods (SGLang, ComfyUI) ask every probe for.
        "FRUTEBOX_STACK_SERVING_KEY": BENCH_SERVING_KEY,
        **scaled_waits(scale),
        **{names[k]: str(v / scale) for k, v in bounds.items()},
    }


@dataclass(frozen=True)
class Step:
    code: int
    out: str
    err: str

    @property
    def result(self) -> Any:
        return json.loads(self.out)


def run_step(args: str, request: Any, env: Mapping[str, str]) -> Step:
    """One run of the deploy step; its exit code, result and log."""
    out, err = io.StringIO(), io.StringIO()
    stdin = io.StringIO(request if isinstance(request, str) else json.dumps(request))
    code = main(args.split(), stdin=stdin, stdout=out, stderr=err, env=dict(env))
    return Step(code, out.getvalue(), err.getvalue())


def command(args: str, request: Any, env: Mapping[str, str]) -> dict[str, Any]:
    """The step's result; a failure ends the bench with the step's last words."""
    step = run_step(args, request, env)
    if step.code != 0:
        raise SystemExit(f"{args} failed: {step.err[-2000:]}")
    result: dict[str, Any] = step.result
    return result


def in_parallel(
    args: str, requests: Sequence[str], envs: Sequence[Mapping[str, str]]
) -> list[Step]:
    """Each request run by its own thread, as Pulumi runs independent resources."""
    steps: list[Step | None] = [None] * len(requests)
    failures: list[BaseException] = []

    def one(index: int) -> None:
        try:
            steps[index] = run_step(args, requests[index], envs[index])
        except BaseException as exc:  # reported after every thread ended
            failures.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise SystemExit(f"{args} crashed: {failures[0]!r}")
    return [s for s in steps if s is not None]


@dataclass(frozen=True, kw_only=True)
class Up:
    """What one `up` ran: the volume's result, every seed's and pod's step, and the sweep's
    (None when a pod failed: a failed `up` ends before its sweep)."""

    volume: dict[str, Any]
    seeds: list[Step]
    pods: list[Step]
    sweep: Step | None

    @property
    def failed(self) -> list[Step]:
        return [s for s in [*self.seeds, *self.pods] if s.code != 0]


def place_start_hooks(emulator: RunningEmulator, volume_id: str, plan: FleetPlan) -> None:
    """Every planned pod's gateway start hook written on the volume, as its seeding CPU pod
    writes it with the weights. For a bench that deploys with seeding off, so that each pod
    fetches its own weights as in the figures it compares with: a vLLM or llama.cpp pod starts
    its gateway only from that hook (the plan says `gateway-needs-seeding`, which such a bench
    sets aside), and everything else of the pod is as unseeded as the bench means it."""
    account = emulator.app.account
    for m in plan.models:
        hook = m.placement.pod.start_hook if m.placement is not None else None
        if hook is None:
            continue
        path = layout.below_mount(hook.path)
        assert path is not None, hook.path
        account.write_text(volume_id, path, hook.text)


def up(
    plan: FleetPlan,
    env: Mapping[str, str],
    *,
    on_volume: Callable[[str], None] | None = None,
) -> Up:
    """The stack's first `pulumi up` as program/fleet.py declares it: the volume; then per pod,
    side by side, its seeded models' seeds side by side and, once they are done, the pod
    (a failed seed stops its pod only); then, when every pod serves, the sweep. `on_volume`
    gets the volume's id before any seed or pod is created."""
    volume = command("volume create", volume_request(plan).to_json(), env)
    if on_volume is not None:
        on_volume(str(volume["volumeId"]))
    ids = {"volume_id": volume["volumeId"], "owner": volume["owner"]}
    seeded = seeded_ids(plan)
    seeds: list[Step] = []
    pods: list[Step] = []
    lock = threading.Lock()

    def chain(anchor_id: str) -> None:
        group = plan.pod_of(anchor_id)
        assert group is not None
        anchor, members = plan.members(group)
        jobs = [seed_request(plan, m, **ids).to_json() for m in group.model_ids if m in seeded]
        done = in_parallel("seed create", jobs, [env] * len(jobs))
        with lock:
            seeds.extend(done)
        if any(s.code != 0 for s in done):
            return
        request = pod_request(
            anchor, plan.settings, stack=plan.stack, members=members, seeded=seeded, **ids
        )
        step = run_step("pod create", request.to_json(), env)
        with lock:
            pods.append(step)

    together([functools.partial(chain, p.anchor) for p in plan.pods])
    if any(s.code != 0 for s in [*seeds, *pods]):
        return Up(volume=volume, seeds=seeds, pods=pods, sweep=None)
    recorded = [str(s.result["podId"]) for s in pods]
    sweep = sweep_request(plan, volume_id=ids["volume_id"], owner=ids["owner"], pod_ids=recorded)
    swept = run_step("stack sweep", sweep.to_json(), env)
    return Up(volume=volume, seeds=seeds, pods=pods, sweep=swept)


def together(jobs: Sequence[Callable[[], object]]) -> None:
    """Run `jobs` side by side, as Pulumi runs independent resources; a crash ends the bench
    once every job ended."""
    failures: list[BaseException] = []

    def one(job: Callable[[], object]) -> None:
        try:
            job()
        except BaseException as exc:  # reported once every thread ended
            failures.append(exc)

    threads = [threading.Thread(target=one, args=(j,)) for j in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise SystemExit(f"a deploy step crashed: {failures[0]!r}")
