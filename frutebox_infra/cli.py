"""`frutebox`: the offline views (catalog, plan, diff), live status and prices, the emulator."""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from frutebox_infra.errors import EXIT_OK, EXIT_PROBLEMS, FruteboxError, exit_code
from frutebox_infra.paths import REGISTRY_DIR, REPO_ROOT, STACKS_DIR
from frutebox_infra.plan import Environment, FleetPlan, plan_fleet
from frutebox_infra.registry_files import load_registry
from frutebox_infra.report import Format
from frutebox_infra.report.data import catalog_entry, plan_data
from frutebox_infra.report.markdown import plan_markdown
from frutebox_infra.report.table import catalog_table, plan_table
from frutebox_infra.resolver import resolve
from frutebox_infra.settings import load_settings, stack_file

if TYPE_CHECKING:
    from frutebox_infra.drift import StatusView


def cmd_models(args: argparse.Namespace) -> int:
    registry = load_registry()
    environment = Environment.from_env(os.environ)
    resolutions = [
        resolve(registry, m.id, environment.serve_options(m.id)) for m in registry.models
    ]
    if args.format is Format.JSON:
        print(json.dumps([catalog_entry(r) for r in resolutions], indent=2))
    else:
        print(catalog_table(resolutions))
    return EXIT_OK


def load_plan(stack: str, stacks_dir: Path = STACKS_DIR) -> FleetPlan:
    registry = load_registry()
    settings = load_settings(stack_file(stack, stacks_dir))
    return plan_fleet(registry, settings, stack=stack, environment=Environment.from_env(os.environ))


def render(view: FleetPlan | StatusView, fmt: Format) -> str:
    """The one entry to the views' formats: JSON with stable keys, Markdown, or a table."""
    markdown = fmt is Format.MARKDOWN
    data: Callable[[], Any]
    text: Callable[[], str]
    if isinstance(view, FleetPlan):
        data = partial(plan_data, view)
        text = partial(plan_markdown if markdown else plan_table, view)
    else:
        from frutebox_infra.report.status import status_data, status_markdown, status_table

        data = partial(status_data, view)
        text = partial(status_markdown if markdown else status_table, view)
    return json.dumps(data(), indent=2) if fmt is Format.JSON else text()


def cmd_plan(args: argparse.Namespace) -> int:
    plan = load_plan(args.stack, Path(args.stacks_dir))
    print(render(plan, args.format))
    if not plan.ok:
        print(f"\n{len(plan.problems)} problem(s): `pulumi preview` would fail.", file=sys.stderr)
        return EXIT_PROBLEMS
    return EXIT_OK


def cmd_diff(args: argparse.Namespace) -> int:
    from frutebox_infra.diff import run_diff

    return run_diff(base=args.base, head=args.head, stack=args.stack, fmt=str(args.format))


def cmd_status(args: argparse.Namespace) -> int:
    from frutebox_infra.status import (
        EXIT_DRIFT,
        Endpoints,
        collect,
        read_recorded,
        stack_api_key,
    )
    from frutebox_infra.status import terminate_untracked as terminate

    project_dir = Path(args.project_dir)
    plan = load_plan(args.stack, project_dir / "stacks")
    if not plan.ok:
        print(f"note: the config's plan has {len(plan.problems)} problem(s):", file=sys.stderr)
        for problem in plan.problems:
            print(f"  - {problem}", file=sys.stderr)
    recorded = read_recorded(args.stack, project_dir, os.environ)
    stack_key = (
        None
        if os.environ.get("RUNPOD_API_KEY", "").strip()
        else stack_api_key(args.stack, project_dir, os.environ)
    )
    endpoints = Endpoints.from_env(os.environ, stack_key)
    view = collect(plan, recorded, endpoints, probe=not args.terminate_untracked)
    if args.terminate_untracked:
        for pod_id in terminate(view, endpoints):
            print(f"terminated untracked pod {pod_id}", file=sys.stderr)
        return EXIT_OK
    print(render(view, args.format))
    return EXIT_DRIFT if view.drifted else EXIT_OK


def cmd_prices(args: argparse.Namespace) -> int:
    from frutebox_infra.prices import run_prices

    return run_prices(write=args.write, registry_dir=Path(args.registry_dir))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="frutebox", description=__doc__)
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)

    models = sub.add_parser("models", help="the catalog: servable or why not, cheapest placement")
    models.add_argument(
        "--format", type=Format, choices=[Format.TABLE, Format.JSON], default=Format.TABLE
    )
    models.set_defaults(run=cmd_models)

    plan = sub.add_parser("plan", help="the plan `pulumi preview` shows, without Pulumi")
    plan.add_argument("--stack", required=True)
    plan.add_argument("--format", type=Format, choices=list(Format), default=Format.TABLE)
    plan.add_argument("--stacks-dir", default=str(STACKS_DIR), help=argparse.SUPPRESS)
    plan.set_defaults(run=cmd_plan)

    diff = sub.add_parser("diff", help="cost/fit difference of a config change between git refs")
    diff.add_argument("--base", required=True, help="git ref of the base (e.g. origin/main)")
    diff.add_argument("--head", default=None, help="git ref of the head (default: work tree)")
    diff.add_argument("--stack", required=True)
    diff.add_argument("--format", type=Format, choices=list(Format), default=Format.TABLE)
    diff.set_defaults(run=cmd_diff)

    status = sub.add_parser(
        "status", help="recorded vs live vs planned: drift, health, spend (exit 3 on drift)"
    )
    status.add_argument("--stack", required=True)
    status.add_argument("--format", type=Format, choices=list(Format), default=Format.TABLE)
    status.add_argument(
        "--terminate-untracked",
        action="store_true",
        help="terminate the pods carrying this stack's mark that the state does not record",
    )
    status.add_argument("--project-dir", default=str(REPO_ROOT), help=argparse.SUPPRESS)
    status.set_defaults(run=cmd_status)

    prices = sub.add_parser("prices", help="registry/gpus.yaml prices vs RunPod's live catalog")
    prices.add_argument(
        "--write", action="store_true", help="update registry/gpus.yaml prices and their dates"
    )
    prices.add_argument("--registry-dir", default=str(REGISTRY_DIR), help=argparse.SUPPRESS)
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
