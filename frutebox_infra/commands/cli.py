"""`frutebox`: the offline views (catalog, plan, diff), the live ones (status, prices) and the
local RunPod emulator."""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

from frutebox_infra.catalog.files import load_registry
from frutebox_infra.commands.git_refs import WORK_TREE, git_toplevel, plan_both_sides
from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.planner.resolver import resolve
from frutebox_infra.plumbing.errors import (
    EXIT_DRIFT,
    EXIT_OK,
    EXIT_PROBLEMS,
    FruteboxError,
    exit_code,
)
from frutebox_infra.plumbing.paths import REGISTRY_DIR, REPO_ROOT, STACKS_DIR
from frutebox_infra.report import Format
from frutebox_infra.report.render import formats, render
from frutebox_infra.stack.environment import Environment, system_clock
from frutebox_infra.stack.settings import STACK_KEYS
from frutebox_infra.stack.stack_file import load_settings, stack_file
from frutebox_infra.views.catalog import CatalogView, catalog_view
from frutebox_infra.views.diff import DiffView, diff_plans
from frutebox_infra.views.drift import HEALTH_PROBES, HEALTH_WINDOW_S
from frutebox_infra.views.plan import PlanView
from frutebox_infra.views.price_compare import PriceComparison
from frutebox_infra.views.status_view import StatusView
from frutebox_infra.views.usage import WINDOWS, UsageView


def cmd_models(args: argparse.Namespace) -> int:
    registry = load_registry()
    environment = Environment.from_env(os.environ)
    floor = float(STACK_KEYS["minDecodeTokensPerSecond"].default)
    resolutions = tuple(
        resolve(registry, m.id, environment.serve_options(m.id)) for m in registry.models
    )
    view = catalog_view(resolutions, floor)
    print(render(view, Format(args.format)))
    return EXIT_OK


def load_plan(
    stack: str, stacks_dir: Path = STACKS_DIR, registry_dir: Path = REGISTRY_DIR
) -> FleetPlan:
    registry = load_registry(registry_dir)
    settings = load_settings(stack_file(stack, stacks_dir))
    environment = Environment.from_env(os.environ, clock=system_clock)
    return plan_fleet(registry, settings, stack=stack, environment=environment)


def cmd_plan(args: argparse.Namespace) -> int:
    plan = load_plan(args.stack, Path(args.stacks_dir), Path(args.registry_dir))
    print(render(PlanView(plan=plan), Format(args.format)))
    if not plan.ok:
        print(f"\n{len(plan.problems)} problem(s): `pulumi preview` would fail.", file=sys.stderr)
        return EXIT_PROBLEMS
    return EXIT_OK


def cmd_diff(args: argparse.Namespace) -> int:
    root = git_toplevel(Path.cwd())
    environment = Environment.from_env(os.environ)
    before, after = plan_both_sides(root, args.base, args.head, args.stack, environment)
    diff = diff_plans(before, after)
    head = args.head or WORK_TREE
    print(render(DiffView(diff=diff, base=args.base, head=head), Format(args.format)))
    if not diff.ok:
        print(f"\n{len(diff.problems)} problem(s) at {head}: `pulumi preview` would fail.",
              file=sys.stderr)  # fmt: skip
        return EXIT_PROBLEMS
    return EXIT_OK


MAX_HEALTH_WINDOW_S = 300.0


def _health_window(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= MAX_HEALTH_WINDOW_S:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of seconds from 0 to {MAX_HEALTH_WINDOW_S:g}"
        )
    return seconds


def cmd_status(args: argparse.Namespace) -> int:
    from frutebox_infra.commands.status import (
        collect,
        gateway_serving_key,
        read_recorded,
        stack_endpoint,
    )
    from frutebox_infra.commands.status import terminate_untracked as terminate

    project_dir = Path(args.project_dir)
    plan = load_plan(args.stack, project_dir / "stacks")
    if not plan.ok:
        print(f"note: the config's plan has {len(plan.problems)} problem(s):", file=sys.stderr)
        for problem in plan.problems:
            print(f"  - {problem}", file=sys.stderr)
    # No key anywhere is a usage error before the stack's outputs are read.
    endpoint = stack_endpoint(args.stack, project_dir, os.environ, plan.settings.runpod_api_url)
    recorded = read_recorded(args.stack, project_dir, os.environ)
    probe = not args.terminate_untracked
    key = gateway_serving_key(plan, project_dir, os.environ) if probe else ""
    view = collect(plan, recorded, endpoint, probe=probe, health_window_s=args.health_window,
                   serving_key=key)  # fmt: skip
    if args.terminate_untracked:
        volumes = {v.id for v in view.untracked_volumes}
        for removed in terminate(view, endpoint):
            what = "deleted untracked volume" if removed in volumes else "terminated untracked pod"
            print(f"{what} {removed}", file=sys.stderr)
        return EXIT_OK
    print(render(view, Format(args.format)))
    return EXIT_DRIFT if view.drifted else EXIT_OK


def cmd_usage(args: argparse.Namespace) -> int:
    from frutebox_infra.commands.status import (
        gateway_serving_key,
        read_recorded,
        stack_endpoint,
    )
    from frutebox_infra.commands.usage import (
        collect_usage,
        keyed_for_gateways,
        ledger_path,
        usage_now,
    )

    project_dir = Path(args.project_dir)
    plan = load_plan(args.stack, project_dir / "stacks")
    endpoint = stack_endpoint(args.stack, project_dir, os.environ, plan.settings.runpod_api_url)
    recorded = read_recorded(args.stack, project_dir, os.environ)
    ledger = Path(args.ledger) if args.ledger else ledger_path(args.stack, project_dir)
    key = gateway_serving_key(plan, project_dir, os.environ)
    result = collect_usage(
        plan,
        recorded,
        endpoint,
        hours=WINDOWS[args.since],
        ledger=ledger,
        now=usage_now(args.now),
        take_sample=not args.no_sample,
        record_only=args.record,
        auth_headers=keyed_for_gateways(plan, key),
    )
    if isinstance(result, int):
        print(f"recorded {result} counter sample(s) in {ledger}", file=sys.stderr)
        return EXIT_OK
    print(render(result, Format(args.format)))
    if args.learn:
        from frutebox_infra.commands.usage import learned_rows, write_learned

        rows = learned_rows(result, plan, usage_now(args.now).date().isoformat())
        if rows:
            path = write_learned(Path(args.registry_dir), rows)
            print(f"wrote {len(rows)} measured row(s) to {path}", file=sys.stderr)
        else:
            print("nothing to learn: no engine reported its decode time", file=sys.stderr)
    return EXIT_OK


def cmd_prices(args: argparse.Namespace) -> int:
    from frutebox_infra.commands.prices import run_prices

    project_dir = Path(args.project_dir)
    return run_prices(
        write=args.write,
        fmt=Format(args.format),
        registry_dir=Path(args.registry_dir),
        stack=args.stack,
        project_dir=project_dir,
    )


def add_format(command: argparse.ArgumentParser, view_type: type) -> None:
    """`--format`, offering exactly the formats the command's view renders in (plain strings,
    so a wrong one is named as typed)."""
    offered = [str(f) for f in formats(view_type)]
    command.add_argument("--format", choices=offered, default=str(Format.TABLE))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="frutebox", description=__doc__)
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)

    models = sub.add_parser("models", help="the catalog: servable or why not, cheapest placement")
    add_format(models, CatalogView)
    models.set_defaults(run=cmd_models)

    plan = sub.add_parser("plan", help="the plan `pulumi preview` shows, without Pulumi")
    plan.add_argument("--stack", required=True)
    add_format(plan, PlanView)
    plan.add_argument("--stacks-dir", default=str(STACKS_DIR), help=argparse.SUPPRESS)
    plan.add_argument("--registry-dir", default=str(REGISTRY_DIR), help=argparse.SUPPRESS)
    plan.set_defaults(run=cmd_plan)

    diff = sub.add_parser("diff", help="cost/fit difference of a config change between git refs")
    diff.add_argument("--base", required=True, help="git ref of the base (e.g. origin/main)")
    diff.add_argument("--head", default=None, help="git ref of the head (default: work tree)")
    diff.add_argument("--stack", required=True)
    add_format(diff, DiffView)
    diff.set_defaults(run=cmd_diff)

    status = sub.add_parser(
        "status", help="recorded vs live vs planned: drift, health, spend (exit 3 on drift)"
    )
    status.add_argument("--stack", required=True)
    add_format(status, StatusView)
    status.add_argument(
        "--terminate-untracked",
        action="store_true",
        help="terminate the pods and delete the volumes carrying this stack's mark that the"
        " state does not record (needs a key with write access)",
    )
    status.add_argument(
        "--health-window",
        type=_health_window,
        default=HEALTH_WINDOW_S,
        metavar="SECONDS",
        help=f"how long a RUNNING pod's health path may fail ({HEALTH_PROBES} probes) before it"
        f" is `unhealthy` (default {HEALTH_WINDOW_S:g}, 0 to {MAX_HEALTH_WINDOW_S:g})",
    )
    status.add_argument("--project-dir", default=str(REPO_ROOT), help=argparse.SUPPRESS)
    status.set_defaults(run=cmd_status)

    usage = sub.add_parser(
        "usage", help="billed hours and dollars, tokens served, measured $/1M, idle hours"
    )
    usage.add_argument("--stack", required=True)
    usage.add_argument("--since", choices=list(WINDOWS), default="24h")
    add_format(usage, UsageView)
    usage.add_argument(
        "--record", action="store_true", help="only sample the engines' counters into the ledger"
    )
    usage.add_argument(
        "--no-sample", action="store_true", help="report from the ledger without a new sample"
    )
    usage.add_argument("--ledger", help="the samples file (default .frutebox/usage-STACK.jsonl)")
    usage.add_argument("--now", help="the time to report at (RFC 3339; or FRUTEBOX_NOW)")
    usage.add_argument(
        "--learn",
        action="store_true",
        help="write measured decode rates into registry/speed.yaml (a pull request's change)",
    )
    usage.add_argument("--registry-dir", default=str(REGISTRY_DIR), help=argparse.SUPPRESS)
    usage.add_argument("--project-dir", default=str(REPO_ROOT), help=argparse.SUPPRESS)
    usage.set_defaults(run=cmd_usage)

    prices = sub.add_parser("prices", help="registry/gpus.yaml prices vs RunPod's live catalog")
    prices.add_argument(
        "--write", action="store_true", help="update registry/gpus.yaml prices and their dates"
    )
    prices.add_argument(
        "--stack", help="read RunPod with this stack's runpodApiUrl and key (default: none)"
    )
    add_format(prices, PriceComparison)
    prices.add_argument("--registry-dir", default=str(REGISTRY_DIR), help=argparse.SUPPRESS)
    prices.add_argument("--project-dir", default=str(REPO_ROOT), help=argparse.SUPPRESS)
    prices.set_defaults(run=cmd_prices)

    # The emulator owns its options: whatever follows `emulator` is handed to it untouched.
    emulator = sub.add_parser(
        "emulator",
        help="a local RunPod v2 emulator (loopback only); see its --help",
        add_help=False,
    )
    emulator.set_defaults(run=cmd_emulator)
    return parser


def cmd_emulator(args: argparse.Namespace) -> int:
    from frutebox_infra.emulator.server import main as emulator_main

    return emulator_main(list(args.emulator_args))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    if args.run is not cmd_emulator and extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.emulator_args = extra
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except FruteboxError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"frutebox: {exc}", file=sys.stderr)
        return exit_code(exc)
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
