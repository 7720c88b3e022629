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

Every program runs with a time mark before and after its body and one at the interpreter's
exit (atexit, once the SDK has finished registering and the engine has let the program go),
so the same runs also say where prod's time goes against the empty program's, phase by
phase; and, in a fresh interpreter, our imports and planning.

Run: .venv/bin/python bench/preview_overhead.py [--quick | --runs N]
  --quick: one preview of each program without a warm-up, for CI (exits non-zero if a
  preview fails; the budget is judged on the full run only).
  --runs N: N interleaved rounds instead of RUNS, for a steadier median on a busy machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from support.common import (
    PYTHON,
    ROOT,
    Project,
    Results,
    bare_project,
    real_project,
    require_toolchain,
)

RUNS = 5
BUDGET = 1.2
"""prod's preview over the empty program's."""
EMPTY_PROGRAM = "import pulumi  # noqa: F401\n"
COMMAND_PROGRAM = """\
import pulumi  # noqa: F401
from pulumi_command import local

local.Command("noop", create="true")
"""


MARK_START = """\
import atexit as _bench_atexit, json as _bench_json, time as _bench_time
_bench_marks = {{"start": _bench_time.time()}}
def _bench_write():
    _bench_marks["sdk_done"] = _bench_time.time()
    with open({path!r}, "a") as out:
        out.write(_bench_json.dumps(_bench_marks) + "\\n")
_bench_atexit.register(_bench_write)
"""
MARK_END = '_bench_marks["body_done"] = _bench_time.time()\n'
"""Put around a program: when its body starts and ends, and when the interpreter exits."""
MARKS = "bench-marks.jsonl"
"""Where a marked program writes its marks, in its project directory."""
PHASES = (
    "the CLI, language host and interpreter up to the program",
    "the program's body (imports, plan, declaring)",
    "after the body: the SDK registering, the engine and provider answering",
    "the interpreter's exit and the CLI's wrap-up",
)


INSIDE = """
import ast, dataclasses, json, statistics, sys, time
from pathlib import Path

import pulumi, pulumi_command  # the floor every program of ours and the references pay

root = Path(sys.argv[1])
program = ast.parse((root / "__main__.py").read_text())
ours = [n.module for n in ast.walk(program)
        if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("frutebox_infra")]
start = time.perf_counter()
for name in ours:
    __import__(name)
imported = time.perf_counter() - start
records = [c for m in list(sys.modules.values()) if m and m.__name__.startswith("frutebox_infra")
           for c in vars(m).values()
           if isinstance(c, type) and c.__module__ == m.__name__ and dataclasses.is_dataclass(c)]
width = round(statistics.median(len(dataclasses.fields(c)) for c in records))
costs = []
for n in range(60):
    spec = [(f"f{i}", int, dataclasses.field(default=0)) for i in range(width)]
    begin = time.perf_counter()
    dataclasses.make_dataclass(f"R{n}", spec, frozen=True, kw_only=True)
    costs.append(time.perf_counter() - begin)

from frutebox_infra.catalog.files import load_registry
from frutebox_infra.planner.plan import plan_fleet
from frutebox_infra.stack.environment import Environment, system_clock
from frutebox_infra.stack.stack_file import load_settings, stack_file

start = time.perf_counter()
settings = load_settings(stack_file("prod", root / "stacks"))
plan = plan_fleet(load_registry(), settings, stack="prod",
                  environment=Environment.from_env({}, clock=system_clock))
planned = time.perf_counter() - start
print(json.dumps({"import_s": imported, "records": len(records), "width": width,
                  "record_s": statistics.median(costs), "plan_s": planned}))
"""
"""Run in a fresh interpreter of the checkout: where our share of a preview goes, in-process.
Only public APIs: the program's own imports (read from __main__.py), the stdlib dataclasses
they define, the cost of defining one such record here, and reading + planning prod."""


def inside_split(runs: int) -> dict[str, float]:
    """Medians over `runs` fresh interpreters (one in quick mode)."""
    samples: list[dict[str, float]] = []
    for _ in range(runs):
        proc = subprocess.run(
            [str(PYTHON), "-c", INSIDE, str(ROOT)],
            cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            sys.exit(f"measuring the in-process split failed:\n{proc.stderr[-2000:]}")
        samples.append(json.loads(proc.stdout))
    return {key: statistics.median(s[key] for s in samples) for key in samples[0]}


def marked(project: Project) -> Project:
    """`project` with its program's body between time marks, written to its MARKS file."""
    program = project.root / "__main__.py"
    text = program.read_text()
    start = MARK_START.format(path=str(project.root / MARKS))
    program.write_text(start + text + ("" if text.endswith("\n") else "\n") + MARK_END)
    return project


def phases(project: Project, stack: str) -> list[float]:
    """Seconds of each of PHASES in one preview of a `marked` project."""
    start = time.time()
    project.pulumi("preview", "--stack", stack, "--diff=false")
    end = time.time()
    mark = json.loads((project.root / MARKS).read_text().splitlines()[-1])
    return [
        mark["start"] - start,
        mark["body_done"] - mark["start"],
        mark["sdk_done"] - mark["body_done"],
        end - mark["sdk_done"],
    ]


def previews(quick: bool, runs: int) -> dict[str, list[list[float]]]:
    """Each program's preview, per run: the seconds of each of PHASES, whose sum is its wall
    time (every program is `marked`, so one set of runs gives both)."""
    with tempfile.TemporaryDirectory(prefix="frutebox-bench-") as tmp_name:
        tmp = Path(tmp_name)
        real = marked(real_project(tmp))
        programs = {
            "empty (import pulumi)": (marked(bare_project(tmp, "empty", EMPTY_PROGRAM)), "bench"),
            "one command resource": (
                marked(bare_project(tmp, "one-command", COMMAND_PROGRAM)),
                "bench",
            ),
            "frutebox dev": (real, "dev"),
            "frutebox prod": (real, "prod"),
        }
        for project, stack in programs.values():
            project.init(stack)
        if not quick:
            for project, stack in programs.values():
                phases(project, stack)  # warm-up: plugin discovery, OS page cache
        runs_by_program: dict[str, list[list[float]]] = {label: [] for label in programs}
        for _ in range(runs):
            for label, (project, stack) in programs.items():
                runs_by_program[label].append(phases(project, stack))
    return runs_by_program


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
    split_runs = previews(args.quick, runs)
    times = {label: [sum(run) for run in rounds] for label, rounds in split_runs.items()}
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
    split = inside_split(runs)
    creating = split["records"] * split["record_s"]
    where = {
        label: [statistics.median(run[i] for run in split_runs[label]) for i in range(len(PHASES))]
        for label in ("empty (import pulumi)", "frutebox prod")
    }
    results.heading("inside those previews, median ms per phase")
    results.table(
        ["PHASE", "EMPTY MS", "PROD MS", "PROD OVER EMPTY MS"],
        [
            [name, f"{1000 * e:.0f}", f"{1000 * p:.0f}", f"{1000 * (p - e):+.0f}"]
            for name, e, p in zip(
                PHASES, where["empty (import pulumi)"], where["frutebox prod"], strict=True
            )
        ],
    )
    results.print(
        f"of ours, in a fresh interpreter: importing the program's modules"
        f" {1000 * split['import_s']:.0f} ms, of which defining its {split['records']:.0f} frozen"
        f" dataclasses (median {split['width']:.0f} fields; one costs"
        f" {1000 * split['record_s']:.2f} ms on this Python) is about {1000 * creating:.0f} ms;"
        f" reading the stack and registry and planning prod {1000 * split['plan_s']:.0f} ms"
    )
    results.print(
        f"prod / empty if our imports cost nothing: {(prod - split['import_s']) / base:.2f}x;"
        f" if only the dataclasses' creation cost nothing: {(prod - creating) / base:.2f}x"
    )
    met = "MET" if prod / base <= BUDGET else "MISSED"
    verdict = "(judged on the full run only)" if args.quick else met
    results.print(f"prod preview / empty: {prod / base:.2f}x (budget <= {BUDGET}x): {verdict}")
    results.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
