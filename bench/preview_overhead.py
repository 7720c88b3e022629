"""What our program adds to `pulumi preview`, against an empty Python program on the same setup.

Times `pulumi preview` of the dev and prod stacks of a throwaway copy of this project, and of
two reference programs with the same runtime options (this checkout's .venv) on the same kind
of backend (a throwaway local file backend each):
  - empty:         `import pulumi` and nothing else (the floor of any Python Pulumi program);
  - one command:   `import pulumi` + one `pulumi_command.local.Command` (the floor of any
                   program that uses the command provider, as ours does: it adds the
                   provider plugin's start-up to every preview).
One warm-up each, then RUNS rounds, programs interleaved so machine noise hits all alike;
medians and ratios (machine speed cancels out of a ratio). Budget: prod <= 1.2x empty.

Run: .venv/bin/python bench/preview_overhead.py [--quick | --runs N]
  --quick: one preview of each program without a warm-up, for CI (exits non-zero if a
  preview fails; the budget is judged on the full run only).
  --runs N: N interleaved rounds instead of RUNS, for a steadier median on a busy machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from support.common import Project, Results, bare_project, real_project, require_toolchain

RUNS = 5
BUDGET = 1.2
"""prod's preview over the empty program's."""
EMPTY_PROGRAM = "import pulumi  # noqa: F401\n"
COMMAND_PROGRAM = """\
import pulumi  # noqa: F401
from pulumi_command import local

local.Command("noop", create="true")
"""


def preview_seconds(project: Project, stack: str) -> float:
    start = time.perf_counter()
    project.pulumi("preview", "--stack", stack, "--diff=false")
    return time.perf_counter() - start


def previews(quick: bool, runs: int) -> dict[str, list[float]]:
    """Wall seconds of each program's preview, per run."""
    with tempfile.TemporaryDirectory(prefix="frutebox-bench-") as tmp_name:
        tmp = Path(tmp_name)
        real = real_project(tmp)
        programs = {
            "empty (import pulumi)": (bare_project(tmp, "empty", EMPTY_PROGRAM), "bench"),
            "one command resource": (bare_project(tmp, "one-command", COMMAND_PROGRAM), "bench"),
            "frutebox dev": (real, "dev"),
            "frutebox prod": (real, "prod"),
        }
        for project, stack in programs.values():
            project.init(stack)
        if not quick:
            for project, stack in programs.values():
                preview_seconds(project, stack)  # warm-up: plugin discovery, OS page cache
        times: dict[str, list[float]] = {label: [] for label in programs}
        for _ in range(runs):
            for label, (project, stack) in programs.items():
                times[label].append(preview_seconds(project, stack))
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one preview of each: for CI")
    parser.add_argument("--runs", type=int, default=RUNS, help=f"rounds (default {RUNS})")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    require_toolchain()
    results = Results(__file__, quick=args.quick)
    runs = 1 if args.quick else args.runs
    times = previews(args.quick, runs)
    medians = {label: statistics.median(t) for label, t in times.items()}
    base = medians["empty (import pulumi)"]
    warm = "without a warm-up" if args.quick else "after a warm-up"
    results.heading(f"`pulumi preview` wall seconds, {runs} run(s) each {warm} (file backend)")
    results.table(
        ["PROGRAM", "MEDIAN S", "MIN S", "MAX S", "VS EMPTY", "OVER EMPTY S"],
        [
            [label, f"{medians[label]:.3f}", f"{min(t):.3f}", f"{max(t):.3f}",
             f"{medians[label] / base:.2f}x", f"{medians[label] - base:+.3f}"]
            for label, t in times.items()
        ],
    )  # fmt: skip
    prod, floor = medians["frutebox prod"], medians["one command resource"]
    results.print(
        f"of prod's {prod - base:+.3f} s over empty, {floor - base:+.3f} s is the command"
        f" provider's floor (any program with one Command pays it) and {prod - floor:+.3f} s"
        " is ours (imports, registry, plan, registering its resources)"
    )
    met = "MET" if prod / base <= BUDGET else "MISSED"
    verdict = "(judged on the full run only)" if args.quick else met
    results.print(f"prod preview / empty: {prod / base:.2f}x (budget <= {BUDGET}x): {verdict}")
    results.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
