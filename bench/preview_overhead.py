"""What our program adds to `pulumi preview`, against an empty Python program on the same setup.

Part 1 times `pulumi preview` of the dev and prod stacks of a throwaway copy of this project,
and of two reference programs with the same runtime options (this checkout's .venv) on the
same kind of backend (a throwaway local file backend each):
  - empty:         `import pulumi` and nothing else (the floor of any Python Pulumi program);
  - one command:   `import pulumi` + one `pulumi_command.local.Command` (the floor of any
                   program that uses the command provider, as ours does: it adds the
                   provider plugin's start-up to every preview).
One warm-up each, then RUNS rounds, programs interleaved so machine noise hits all alike;
medians and ratios (machine speed cancels out of a ratio). Target: prod <= 1.15x empty.

Part 2 times the program's own start-up outside Pulumi in fresh interpreters: importing what
__main__.py imports, loading the registry, planning prod and rendering, each phase apart
(target: <= 80 ms after `import pulumi`); then `-X importtime` says which imports cost what
beyond `import pulumi`.

The registry and the stack settings are validated once and then read back from their cache
(registry_cache.py) until a file or our code changes. "Cold" figures remove the entries before
each run (the first run after such a change), "warm" ones leave them (every run after).

Run: .venv/bin/python bench/preview_overhead.py [--quick | --runs N]
  --quick: one preview of each program without a warm-up, one start-up and one importtime
  run: the same code path in about half a minute, for CI (exits non-zero if a preview or
  the probe fails; the targets are judged on the full run only).
  --runs N: N interleaved rounds of previews instead of RUNS, for a steadier median on a
  busy machine (the same previews, warm-up and medians; only more of them).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml
from _common import (
    PYTHON,
    ROOT,
    Project,
    bare_project,
    heading,
    median_seconds,
    print_table,
    real_project,
    require_toolchain,
)

from frutebox_infra.catalog.files import (
    load_registry,
    parse_registry,
    read_registry_files,
    validate_registry,
)
from frutebox_infra.plumbing.input_cache import CACHE_DIR, SETTINGS_CACHE_DIR, cache_key

RUNS = 5
STARTUP_RUNS = 7
IMPORTTIME_RUNS = 5
"""One -X importtime run is noisy module by module; the median of each module's time is not."""
TARGET = 1.15
"""prod's preview over the empty program's."""
TARGET_STARTUP_MS = 80.0
"""The program's own start-up after `import pulumi`: imports, registry, plan, render."""


@dataclass(frozen=True)
class Mode:
    """How many runs each part takes: the full figures, or one of each for CI."""

    quick: bool
    runs: int
    startup_runs: int
    importtime_runs: int

    @classmethod
    def of(cls, quick: bool, runs: int) -> Mode:
        return cls(True, 1, 1, 1) if quick else cls(False, runs, STARTUP_RUNS, IMPORTTIME_RUNS)

    def verdict(self, met: bool) -> str:
        return "(judged on the full run only)" if self.quick else "MET" if met else "MISSED"


EMPTY_PROGRAM = "import pulumi  # noqa: F401\n"
COMMAND_PROGRAM = """\
import pulumi  # noqa: F401
from pulumi_command import local

local.Command("noop", create="true")
"""

LAZY = (
    "pydantic",
    "pydantic_core",
    "httpx",
    "jsonschema",
    "frutebox_infra.runpod",
    "frutebox_infra.commands.cli",
    "frutebox_infra.views.diff",
    "frutebox_infra.commands.git_refs",
    "frutebox_infra.emulator",
    "frutebox_infra.views.drift",
    "frutebox_infra.commands.status",
    "difflib",
)
"""Heavy or preview-irrelevant modules that must stay out of the program's start-up (pydantic,
which validates only on a cache miss and in the deploy step, the deploy step's HTTP client, the
schema validator, the CLI, the diff, git reading, the emulator, and difflib, which only a
launch check's refusal uses to name the closest flag)."""

STARTUP_PROBE = f"""\
import json, time
LAZY = {LAZY!r}
t0 = time.perf_counter()
import pulumi
t1 = time.perf_counter()
import pulumi_command.local
t2 = time.perf_counter()
from frutebox_infra.stack.endpoints import STACK_API_KEY, resolve_endpoint
from frutebox_infra.stack.environment import Environment
from frutebox_infra.plumbing.errors import FruteboxError
from frutebox_infra.program.fleet import credentials_from_config, declare_fleet, read_config
from frutebox_infra.program.interrupted import exit_quietly_on_interrupt
from frutebox_infra.commands.live_look import live_lines
from frutebox_infra.planner.plan import plan_fleet
from frutebox_infra.catalog.files import load_registry
from frutebox_infra.report.plan_report import plan_table
from frutebox_infra.stack.stack_file import check_pulumi_agrees, load_settings, stack_file
t3 = time.perf_counter()
registry = load_registry()
t4 = time.perf_counter()
plan = plan_fleet(registry, load_settings(stack_file("prod")), stack="prod")
t5 = time.perf_counter()
plan_table(plan)
live_lines(plan, registry, endpoint=resolve_endpoint(dict(), stack_key=None, stack_url=""))
from frutebox_infra.deploy.requests import volume_request
from frutebox_infra.report.plan_report import plan_data
volume_request(plan).to_json()
plan_data(plan)
t6 = time.perf_counter()
import sys
absent = [m for m in LAZY if m not in sys.modules]
print(json.dumps([[t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5], absent]))
"""
PHASES = (
    "import pulumi",
    "import pulumi_command",
    "import frutebox_infra (as __main__.py)",
    "load_registry (read + validate YAML)",
    "plan_fleet prod (settings + plan)",
    "render: table, keyless live line, volume request, outputs",
)

_IMPORTTIME = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)")


def forget_registry() -> None:
    """Remove the checkout registry's cache entry and every validated stack's: the next load
    validates them from scratch, as the first run after a change to our code does."""
    (CACHE_DIR / f"{cache_key(read_registry_files().texts)}.pickle").unlink(missing_ok=True)
    for entry in SETTINGS_CACHE_DIR.glob("*.pickle"):
        entry.unlink(missing_ok=True)


def preview_seconds(project: Project, stack: str, *, cold: bool = False) -> float:
    if cold:
        forget_registry()
    start = time.perf_counter()
    project.pulumi("preview", "--stack", stack, "--diff=false")
    return time.perf_counter() - start


def part_previews(mode: Mode) -> None:
    with tempfile.TemporaryDirectory(prefix="frutebox-bench-") as tmp_name:
        tmp = Path(tmp_name)
        real = real_project(tmp)
        empty = bare_project(tmp, "empty", EMPTY_PROGRAM)
        command = bare_project(tmp, "one-command", COMMAND_PROGRAM)
        targets = {
            "empty (import pulumi)": (empty, "bench", False),
            "one command resource": (command, "bench", False),
            "frutebox dev": (real, "dev", False),
            "frutebox prod": (real, "prod", False),
            "frutebox prod, cold registry cache": (real, "prod", True),
        }
        for project, stack in {(p, s) for p, s, _ in targets.values()}:
            project.init(stack)
        if not mode.quick:
            for project, stack, cold in targets.values():
                # warm-up: plugin discovery, OS page cache
                preview_seconds(project, stack, cold=cold)
        times: dict[str, list[float]] = defaultdict(list)
        for _ in range(mode.runs):
            for label, (project, stack, cold) in targets.items():
                times[label].append(preview_seconds(project, stack, cold=cold))
    medians = {label: statistics.median(runs) for label, runs in times.items()}
    base = medians["empty (import pulumi)"]
    warm = "without a warm-up" if mode.quick else "after a warm-up"
    heading(f"`pulumi preview` wall seconds, {mode.runs} run(s) each {warm} (file backend)")
    print_table(
        ["PROGRAM", "MEDIAN S", "MIN S", "MAX S", "VS EMPTY", "OVER EMPTY S"],
        [
            [
                label,
                f"{medians[label]:.3f}",
                f"{min(runs):.3f}",
                f"{max(runs):.3f}",
                f"{medians[label] / base:.2f}x",
                f"{medians[label] - base:+.3f}",
            ]
            for label, runs in times.items()
        ],
    )
    prod, dev = medians["frutebox prod"], medians["frutebox dev"]
    prod_cold = medians["frutebox prod, cold registry cache"]
    floor = medians["one command resource"]
    print(
        f"prod/empty: {prod / base:.2f}x  dev/empty: {dev / base:.2f}x  (target prod <= {TARGET}x)"
        f"  prod/empty with a cold registry cache: {prod_cold / base:.2f}x"
    )
    print(f"target: {mode.verdict(prod / base <= TARGET)}")
    print(
        f"of prod's {prod - base:+.3f} s over empty, {floor - base:+.3f} s is the command"
        f" provider's floor (any program with one Command pays it) and {prod - floor:+.3f} s"
        " is ours (imports, registry, plan, registering its resources)"
    )


def run_python(code: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PYTHON), *flags, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )


def wall(code: str) -> float:
    start = time.perf_counter()
    run_python(code)
    return time.perf_counter() - start


def part_startup(mode: Mode) -> None:
    phases: dict[bool, list[list[float]]] = {True: [], False: []}
    whole: dict[bool, list[float]] = {True: [], False: []}
    bare: list[float] = []
    absent: list[str] = []
    for _ in range(mode.startup_runs):
        for cold in (True, False):
            if cold:
                forget_registry()
            start = time.perf_counter()
            timings, absent = json.loads(run_python(STARTUP_PROBE).stdout)
            phases[cold].append(timings)
            whole[cold].append(time.perf_counter() - start)
        bare.append(wall("import pulumi"))
    heading(
        f"program start-up outside Pulumi, fresh interpreter, median of {mode.startup_runs},"
        " with the registry cache cold (first run after a change) and warm"
    )
    medians = {
        cold: [statistics.median(p[i] for p in phases[cold]) for i in range(len(PHASES))]
        for cold in (True, False)
    }
    rows = [
        [name, f"{1000 * cold:.1f}", f"{1000 * warm:.1f}"]
        for name, cold, warm in zip(PHASES, medians[True], medians[False], strict=True)
    ]
    rows.append(
        [
            "process wall: python + everything above",
            *(f"{1000 * statistics.median(whole[cold]):.1f}" for cold in (True, False)),
        ]
    )
    rows.append(
        ["process wall: python -c 'import pulumi'", *[f"{1000 * statistics.median(bare):.1f}"] * 2]
    )
    print_table(["PHASE", "COLD MS", "WARM MS"], rows)
    ours = {cold: 1000 * sum(medians[cold][2:]) for cold in (True, False)}
    print(
        f"ours (after pulumi and pulumi_command are imported): {ours[False]:.1f} ms warm,"
        f" {ours[True]:.1f} ms cold (target <= {TARGET_STARTUP_MS:g} ms, warm):"
        f" {mode.verdict(ours[False] <= TARGET_STARTUP_MS)};"
        f" pulumi_command import: {1000 * medians[False][1]:.1f} ms"
    )
    loaded = sorted(set(LAZY) - set(absent))
    print(
        f"not imported at start-up, as it should be: {', '.join(sorted(absent)) or 'none'}"
        + (f"; imported although preview does not need it: {', '.join(loaded)}" if loaded else "")
    )
    print_registry_split(mode)
    print_import_costs(mode)


def print_registry_split(mode: Mode) -> None:
    """load_registry by step, and the same YAML through libyaml: where its time could go."""
    files = read_registry_files()
    steps: list[tuple[str, Callable[[], object]]] = [
        ("read the registry files", read_registry_files),
        (
            "for comparison: yaml.safe_load (pure-Python SafeLoader)",
            lambda: [yaml.safe_load(t) for t in files.texts.values()],
        ),
        ("validate_registry (libyaml where built, + pydantic)", lambda: validate_registry(files)),
        ("parse_registry, cache hit (key + unpickle)", lambda: parse_registry(files)),
        ("load_registry total, cache hit", load_registry),
    ]
    heading(f"load_registry by step, in-process, median of {mode.startup_runs}")
    print_table(
        ["STEP", "MS"],
        [[label, f"{1000 * median_seconds(fn, mode.startup_runs):.1f}"] for label, fn in steps],
    )


def print_import_costs(mode: Mode) -> None:
    """Self time of every module imported after `pulumi`, summed by top-level package."""
    samples: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for _ in range(mode.importtime_runs):
        for name, own_us, cumulative_us in _imports_after_pulumi():
            samples[name].append((own_us, cumulative_us))
    modules: dict[str, tuple[float, float]] = {
        name: (
            statistics.median(s for s, _ in runs),
            statistics.median(c for _, c in runs),
        )
        for name, runs in samples.items()
    }
    by_package: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for name, (self_us, _) in modules.items():
        package = name.split(".")[0]
        by_package[package] += self_us
        count[package] += 1
    total = sum(by_package.values())
    heading(
        "imports beyond `import pulumi` (python -X importtime), self time by package,"
        f" median of {mode.importtime_runs}"
    )
    print_table(
        ["PACKAGE", "MODULES", "MS", "SHARE"],
        [
            [package, str(count[package]), f"{us / 1000:.1f}", f"{us / total:.0%}"]
            for package, us in sorted(by_package.items(), key=lambda kv: -kv[1])[:12]
        ]
        + [["total", str(len(modules)), f"{total / 1000:.1f}", "100%"]],
    )
    heading("costliest single modules beyond `import pulumi` (self time)")
    top = sorted(modules.items(), key=lambda kv: -kv[1][0])[:12]
    print_table(
        ["MODULE", "SELF MS", "CUMULATIVE MS"],
        [[name, f"{s / 1000:.1f}", f"{c / 1000:.1f}"] for name, (s, c) in top],
    )


def _imports_after_pulumi() -> list[tuple[str, int, int]]:
    """(module, self us, cumulative us) of each module first imported after `import pulumi`."""
    code = STARTUP_PROBE.replace("print(json.dumps(", "((")
    lines = run_python(code, "-X", "importtime").stderr.splitlines()
    entries = [m.groups() for m in map(_IMPORTTIME.match, lines) if m]
    # importtime lists a module after its imports; `pulumi`'s own line closes its block.
    end = next(
        i for i, (_, _, indent, name) in enumerate(entries) if name == "pulumi" and not indent
    )
    return [(name, int(s), int(c)) for s, c, _, name in entries[end + 1 :]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run of each part: for CI")
    parser.add_argument(
        "--runs", type=int, default=RUNS, help=f"rounds of previews (default {RUNS})"
    )
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    mode = Mode.of(args.quick, args.runs)
    require_toolchain()
    part_previews(mode)
    part_startup(mode)
    return 0


if __name__ == "__main__":
    sys.exit(main())
