"""frutebox-infra: a stack's armed models become a weights volume and one GPU pod each."""

import gc
import os
from pathlib import Path

import pulumi

from frutebox_infra.catalog.files import load_registry
from frutebox_infra.commands.live_look import live_lines
from frutebox_infra.planner.plan import plan_fleet
from frutebox_infra.plumbing.errors import FruteboxError
from frutebox_infra.program.fleet import (
    credentials_from_config,
    declare_fleet,
    drop_sdk_debug_lines,
    read_config,
)
from frutebox_infra.program.interrupted import exit_quietly_on_interrupt
from frutebox_infra.report.plan_report import plan_table
from frutebox_infra.stack.endpoints import STACK_API_KEY, resolve_endpoint
from frutebox_infra.stack.environment import Environment, system_clock
from frutebox_infra.stack.stack_file import check_pulumi_agrees, load_settings, stack_file
from frutebox_infra.views.plan import PlanView

exit_quietly_on_interrupt()
# The SDK's per-resource debug lines are blocking RPCs that only `--debug` shows (fleet.py).
drop_sdk_debug_lines(os.environ)
stack = pulumi.get_stack()
config = read_config()
try:
    # The stack file is read as `frutebox plan` reads it, so the two cannot disagree; the
    # config Pulumi passes must then say the same.
    path = stack_file(stack, Path(pulumi.get_root_directory() or ".") / "stacks")
    settings = load_settings(path)
    check_pulumi_agrees(settings, config, where=str(path))
    registry = load_registry()
    environment = Environment.from_env(os.environ, clock=system_clock)  # the clock, read once
    plan = plan_fleet(registry, settings, stack=stack, environment=environment)
except FruteboxError as error:
    raise pulumi.RunError(str(error)) from None

pulumi.log.info(plan_table(PlanView(plan=plan)))
# Read-only and bounded: live prices, stock and volume tiers, or one dated registry line.
endpoint = resolve_endpoint(
    os.environ, stack_key=config.get(STACK_API_KEY), stack_url=settings.runpod_api_url
)
live_line, live_warnings = live_lines(plan, registry, endpoint=endpoint)
pulumi.log.info(live_line)
for warning in live_warnings:
    pulumi.log.warn(warning)
if not plan.ok:
    # Fail before registering anything: a plan with a problem must create nothing.
    raise pulumi.RunError(
        f"{len(plan.problems)} problem(s) in stack {stack}:\n"
        + "\n".join(f"  - {p}" for p in plan.problems)
    )
declare_fleet(plan, credentials_from_config(settings, os.environ))
# What the SDK and this program made so far lives until the interpreter exits, whose final
# collection would walk all of it once more to free nothing that matters: the slowest part
# of a preview's exit (bench/preview_overhead.py times the phases). Frozen, every collection
# skips it; what the SDK makes while it registers and waits is collected as usual.
gc.freeze()
