"""What a week of business-hours traffic really costs the prod stack, and what armed windows
set as `frutebox usage` advises would have saved.

The prod stack (its file, with `measureUsage: true` so every engine counts, and seeding off so
the pods fetch their own weights) on the realistic emulator (x100 clock, prod's pod names
already taken by someone else's pods, which bill too and are not ours), its clock stepped an
hour at a time through a simulated week.

Load, stated: Monday to Friday 08:00-18:00 UTC, every LLM gets REQUESTS_PER_HOUR requests of
OUTPUT_TOKENS output tokens each hour, every ComfyUI model PROMPTS_PER_HOUR prompts; nothing at
night or at the weekend. The traffic driver sends it through each pod's proxied port, the
engines count it, and `usage --record`'s sampler reads the counters hourly.

Week 1: every model armed around the clock (today's prod). `frutebox usage --since 7d` then
gives per model the measured $ per 1M output tokens against the plan's full-load estimate, the
idle dollars, and its advice. Week 2: each advised model armed only in its advised window: its
pod created the plan's re-arm time before the window opens (the GPU's start and the read of
its weights, already on the volume) and terminated when it closes; a model advised to be
disarmed has no pod. The idle dollars of week 2 include the bring-ups' billed minutes.

Target: the windows cut the week's idle dollars by at least 60%, at a bring-up cost under 10%
of the saving. `--quick`: one LLM, two weekdays (seconds), the same checks.

Run: .venv/bin/python bench/usage_week.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import httpx
from support.common import Results
from support.deploy import BENCH_SERVING_KEY, place_start_hooks

from frutebox_infra.catalog.files import load_registry
from frutebox_infra.commands.usage import collect_usage, keyed_for_gateways
from frutebox_infra.deploy.requests import pod_body
from frutebox_infra.emulator.catalog import full_stock
from frutebox_infra.emulator.clock import SteppedClock
from frutebox_infra.emulator.server import RunningEmulator, realistic_for, start
from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.plumbing.paths import STACKS_DIR
from frutebox_infra.recipes.gateway import KEY_ENV
from frutebox_infra.runpod.tls import tls_context
from frutebox_infra.stack.endpoints import Endpoint, resolve_endpoint
from frutebox_infra.stack.stack_file import load_settings, stack_file
from frutebox_infra.views.status_view import Recorded, RecordedPod
from frutebox_infra.views.usage import Advice, UsageView, rearm_usd

REQUESTS_PER_HOUR = 60
OUTPUT_TOKENS = 400
PROMPTS_PER_HOUR = 20
BUSY_HOURS = range(8, 18)
"""UTC hours of traffic, Monday to Friday."""
TIME_SCALE = 100.0
OWNER = "bench-usage-week"


def plan_of(models: list[str] | None) -> FleetPlan:
    settings = load_settings(stack_file("prod", STACKS_DIR))
    settings = replace(settings, measure_usage=True, seeding=False)
    if models is not None:
        settings = replace(settings, models=tuple(models))
    return plan_fleet(load_registry(), settings, stack="prod")


class Week:
    """The emulator, its clock, the stack's pods and the ledger of counter samples."""

    def __init__(self, plan: FleetPlan, ledger: Path) -> None:
        registry = load_registry()
        from frutebox_infra.emulator.catalog import Catalog

        catalog = Catalog.builtin()
        self.clock = SteppedClock()
        self.emulator: RunningEmulator = start(
            catalog=catalog,
            stock=full_stock(catalog),
            realism=realistic_for(registry, time_scale=TIME_SCALE),
            clock=self.clock,
        )
        self.plan, self.ledger = plan, ledger
        self.api = httpx.Client(
            base_url=self.emulator.url,
            verify=tls_context(),
            headers={"Authorization": "Bearer bench"},
            timeout=60,
        )
        volume = self.api.post(
            "/v2/network-volumes",
            json={
                "name": "frutebox-prod-bench",
                "size": 4000,
                "dataCenter": plan.settings.data_center,
            },
        ).json()
        self.volume_id = str(volume["id"])
        # Seeding off: a vLLM or llama.cpp pod still finds the start hook its seed would write.
        place_start_hooks(self.emulator, self.volume_id, plan)
        self.pods: dict[str, str] = {}
        self.endpoint: Endpoint = resolve_endpoint(
            {
                "RUNPOD_API_KEY": "bench",
                "RUNPOD_API_URL": self.emulator.url,
                "RUNPOD_PROXY_URL_TEMPLATE": self.emulator.app.proxy_url_template,
            }
        )

    def create(self, model_id: str) -> None:
        model = next(m for m in self.plan.models if m.model_id == model_id)
        assert model.placement is not None
        body = pod_body(
            model,
            model.placement,
            self.plan.settings,
            stack="prod",
            volume_id=self.volume_id,
            owner=OWNER,
        )
        if model.placement.pod.serving_key_env:  # filled in as the deploy step fills it
            body["env"] = {**body["env"], KEY_ENV: BENCH_SERVING_KEY}
        answer = self.api.post("/v2/pods", json=body)
        if answer.status_code == 429:
            self.clock.advance(60)
            answer = self.api.post("/v2/pods", json=body)
        pod = answer.json()
        assert "id" in pod, pod
        self.pods[model_id] = str(pod["id"])
        self.settle()

    def terminate(self, model_id: str) -> None:
        pod_id = self.pods.pop(model_id, None)
        if pod_id:
            self.api.post(f"/_emulator/pods/{pod_id}/terminate")

    def settle(self) -> None:
        """Reads move a starting pod along (PROVISIONING, STARTING, RUNNING), as polling does."""
        for _ in range(3):
            for pod_id in self.pods.values():
                self.api.get(f"/v2/pods/{pod_id}")

    def engine(self, model_id: str) -> str:
        model = next(m for m in self.plan.models if m.model_id == model_id)
        assert model.placement is not None
        return str(model.placement.recipe.runtime)

    def traffic(self, model_id: str) -> None:
        pod_id = self.pods.get(model_id)
        if pod_id is None:
            return
        comfy = self.engine(model_id) == "comfyui"
        body = {
            "requests": PROMPTS_PER_HOUR if comfy else REQUESTS_PER_HOUR,
            "outputTokens": OUTPUT_TOKENS,
            "key": BENCH_SERVING_KEY,  # a client of a gateway pod holds the stack's key
        }
        answer = self.api.post(f"/_emulator/pods/{pod_id}/traffic", json=body).json()
        assert answer.get("served") == body["requests"], (model_id, answer)

    def recorded(self) -> Recorded:
        return Recorded(
            pods={
                m: RecordedPod(
                    model_id=m, name="", pod_id=p, gpu_id="", gpu_count=0, usd_per_hour=0.0
                )
                for m, p in self.pods.items()
            },
            owner=OWNER,
        )

    def sample(self) -> None:
        collect_usage(
            self.plan,
            self.recorded(),
            self.endpoint,
            hours=1,
            ledger=self.ledger,
            now=self.clock.utc(),
            record_only=True,
            auth_headers=keyed_for_gateways(self.plan, BENCH_SERVING_KEY),
        )

    def usage(self, hours: int) -> UsageView:
        view = collect_usage(
            self.plan,
            self.recorded(),
            self.endpoint,
            hours=hours,
            ledger=self.ledger,
            now=self.clock.utc(),
            take_sample=False,
        )
        assert isinstance(view, UsageView)
        return view

    def to_next(self, weekday: int, hour: int, second: int = 0) -> None:
        """Step the clock to the next `weekday` (Monday 0) at `hour`:00:`second` UTC."""
        now = self.clock.utc()
        target = now.replace(hour=hour, minute=0, second=second, microsecond=0)
        target += timedelta(days=(weekday - now.weekday()) % 7)
        if target <= now:
            target += timedelta(days=7)
        self.clock.advance((target - now).total_seconds())

    def stop(self) -> None:
        self.api.close()
        self.emulator.stop()


def business_hour(at: datetime) -> bool:
    return at.weekday() < 5 and at.hour in BUSY_HOURS


def run_week(week: Week, days: int, windows: dict[str, Advice | None] | None) -> None:
    """`days` days from the clock's Monday 00:00:30 UTC, an hour at a time: pods per the
    windows (None: every model always armed; a model without advice too), each created its
    re-arm time before its window opens and terminated as it closes; traffic in business
    hours; an hourly sample."""
    lead: dict[str, float] = {}
    for model in week.plan.models:
        if model.placement is not None:
            usd = rearm_usd(model, week.plan.settings.volume_type)
            lead[model.model_id] = min(3000.0, usd / model.placement.usd_per_hour * 3600)
    for _ in range(days * 24):
        hour_start = week.clock.utc()
        for model in week.plan.models:
            if model.model_id in week.pods and not _armed(windows, model.model_id, hour_start):
                week.terminate(model.model_id)
        week.clock.advance(600)
        week.settle()
        if business_hour(hour_start):
            for model in week.plan.models:
                week.traffic(model.model_id)
        next_hour = hour_start + timedelta(hours=1)
        for model in sorted(week.plan.models, key=lambda m: -lead.get(m.model_id, 0.0)):
            mid = model.model_id
            if mid not in week.pods and _armed(windows, mid, next_hour):
                # The bring-up bills from here: GPU start and weights read, before the hour.
                wait = (next_hour - week.clock.utc()).total_seconds() - lead[mid]
                week.clock.advance(max(0.0, wait))
                week.create(mid)
        week.clock.advance(max(0.0, (next_hour - week.clock.utc()).total_seconds()))
        week.sample()


def _armed(windows: dict[str, Advice | None] | None, model_id: str, at: datetime) -> bool:
    """Whether the model has a pod in the hour starting at `at` (whole-hour UTC windows)."""
    advice = None if windows is None else windows.get(model_id)
    if advice is None:
        return True
    if advice.window is None:
        return False
    days, hours, _ = advice.window.split(" ")
    first, last = (int(h[:2]) for h in hours.split("-"))
    return (days == "daily" or at.weekday() < 5) and first <= at.hour < last


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    results = Results(__file__, args.quick)
    models = ["qwen-3.6-27b"] if args.quick else None
    days = 2 if args.quick else 7
    plan = plan_of(models)
    results.heading(
        f"prod, {days} days of business-hours traffic: Mon-Fri 08:00-18:00 UTC,"
        f" {REQUESTS_PER_HOUR} requests x {OUTPUT_TOKENS} output tokens per LLM per hour,"
        f" {PROMPTS_PER_HOUR} prompts per ComfyUI model per hour; nothing else"
    )
    with tempfile.TemporaryDirectory() as tmp:
        week = Week(plan, Path(tmp) / "week1.jsonl")
        try:
            for model in plan.models:
                week.create(model.model_id)
            week.to_next(0, 0, 30)  # every load has finished; the week starts on a Monday
            run_week(week, days, None)
            always = week.usage(days * 24)
            advised: dict[str, Advice | None] = {a.model_id: a for a in always.advice}
            # The second week on the same account: the weights stay on the volume.
            for model in plan.models:
                if model.model_id in advised:
                    week.terminate(model.model_id)
            week.ledger = Path(tmp) / "week2.jsonl"
            week.to_next(0, 0, 30)
            run_week(week, days, advised)
            windowed = week.usage(days * 24)
        finally:
            week.stop()
    return report(results, always, windowed, advised)


def report(
    results: Results, always: UsageView, windowed: UsageView, advised: dict[str, Advice | None]
) -> int:
    rows = []
    for m in always.models:
        w = next((x for x in windowed.models if x.model_id == m.model_id), None)
        a = advised.get(m.model_id)
        out = (
            f"{m.prompts:.0f} prompts" if m.prompts is not None else f"{m.output_tokens or 0:,.0f}"
        )
        rows.append(
            [
                m.model_id,
                m.engine,
                f"${m.usd_billed:,.2f}",
                out,
                "-"
                if m.usd_per_million_measured is None
                else f"${m.usd_per_million_measured:,.2f}",
                "-"
                if m.usd_per_million_estimate is None
                else f"${m.usd_per_million_estimate:,.2f}",
                f"${m.idle_usd or 0:,.2f}",
                (a.window or "disarm") if a else "-",
                f"${(w.idle_usd or 0) if w else 0:,.2f}",
            ]
        )
    results.table(
        [
            "MODEL",
            "ENGINE",
            "BILLED",
            "OUTPUT",
            "$/1M MEASURED",
            "$/1M PLAN (FULL LOAD)",
            "IDLE $",
            "ADVISED",
            "IDLE $ WITH WINDOW",
        ],
        rows,
    )
    idle_before, idle_after = always.idle_usd, windowed.idle_usd
    saving = idle_before - idle_after
    bringups = sum(a.openings * a.rearm_usd for a in advised.values() if a and a.window)
    cut = saving / idle_before if idle_before else 0.0
    share = bringups / saving if saving > 0 else float("inf")
    results.print()
    results.print(
        f"billed: ${always.usd_billed:,.2f} always armed, ${windowed.usd_billed:,.2f}"
        " with the advised windows"
    )
    results.print(
        f"idle:   ${idle_before:,.2f} always armed -> ${idle_after:,.2f} with windows"
        f" (cut {cut:.0%}); bring-ups ${bringups:,.2f} = {share:.1%} of the saving"
    )
    results.print(f"foreign pods billed ${always.foreign_usd:,.2f} (not counted)")
    ok = cut >= 0.6 and share < 0.10
    results.print(
        f"target: idle cut >= 60% and bring-ups < 10% of the saving: {'met' if ok else 'MISSED'}"
    )
    results.write()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
