"""How long `tools/dev test` takes, phase by phase, against its budgets (fast part, total).

Runs the phases `tools/dev test` runs, with the same commands, on the current checkout, one
after the other, and prints each phase's wall time: ruff, mypy, go test, pytest's fast part
(`-m "not engine"`) and its engine part (`-m engine`), pytest on one worker per core as
`tools/dev test` runs it. Budgets: the fast part <= 90 s, the whole <= 8 min.

By default every cache a fresh clone lacks is bypassed, because the budgets mean the first
run on a fresh clone: ruff `--no-cache`, mypy an empty cache directory, go test `-count=1`
(no cached test results; the Go build cache is per machine, warm on a clone too), pytest
without its cacheprovider and without the bytecode of tests/ and bench/ and pytest's rewrite of
its plugins' modules in .venv (which pytest writes as it imports them: `tools/dev test`, as
here, unsets PYTHONDONTWRITEBYTECODE; the package's own is compiled by `tools/dev setup` on a
clone too).
`--warm` keeps the checkout's caches (a rerun while editing). Nothing is asserted: a phase
that fails is reported FAILED and the script exits 1.

Run: .venv/bin/python bench/suite_time.py [--quick] [--warm]   (about 6 min on 2 cores)
  --quick: every phase on a small part (ruff; mypy on one module; one go test; one fast
  test module; one engine test), the same code path in seconds, for CI (the budgets are
  judged on the full run only).
  On a fresh clone: `git clone <repo> /tmp/fresh && cd /tmp/fresh && tools/dev setup &&
  .venv/bin/python bench/suite_time.py` (bench/README.md).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass

from support.common import Results

from frutebox_infra.commands.toolchain import hermetic_env
from frutebox_infra.plumbing.paths import REPO_ROOT

BUDGET_FAST_S = 90.0
BUDGET_TOTAL_S = 8 * 60.0
VENV_BIN = REPO_ROOT / ".venv" / "bin"
PYTEST = [str(VENV_BIN / "pytest"), "-q", "-p", "no:cacheprovider", "-n", "auto"]
QUICK_MODULE = "tests/plumbing/test_yaml_text.py"
QUICK_MYPY = "frutebox_infra/plumbing/paths.py"
QUICK_GO_PACKAGE, QUICK_GO_TEST = "./cmd/pulumi-resource-command", "TestAnEmptyUpdateRunsNothing"
QUICK_ENGINE_TEST = (
    "tests/e2e/test_preview.py::test_malformed_stack_yaml_fails_without_a_traceback"
)
"""`--quick`: each phase of the full run on a small part of what it covers, so a phase that
breaks (a moved command, a missing tool) fails CI as the full run would."""


@dataclass(frozen=True)
class Phase:
    name: str
    argv: list[str]
    cwd: str = str(REPO_ROOT)


@dataclass(frozen=True)
class Timing:
    phase: Phase
    seconds: float
    ok: bool
    tail: str


def phases(*, quick: bool, warm: bool, mypy_cache: str) -> list[Phase]:
    """Every phase `tools/dev test` runs; `quick`, each on a small part of what it covers."""
    ruff_cache = [] if warm else ["--no-cache"]
    ruff = Phase("ruff", [str(VENV_BIN / "ruff"), "check", ".", *ruff_cache])
    mypy = [str(VENV_BIN / "mypy"), *([] if warm else ["--cache-dir", mypy_cache])]
    go = ["go", "test", *([] if warm else ["-count=1"])]
    go_dir = str(REPO_ROOT / "tools" / "pulumi")
    if quick:
        return [
            ruff,
            Phase("mypy (one module)", [*mypy, QUICK_MYPY]),
            Phase("go test (one test)", [*go, "-run", QUICK_GO_TEST, QUICK_GO_PACKAGE], go_dir),
            Phase("pytest fast part (one module)", [*PYTEST, "-m", "not engine", QUICK_MODULE]),
            Phase("pytest engine part (one test)", [*PYTEST, "-m", "engine", QUICK_ENGINE_TEST]),
        ]
    return [
        ruff,
        Phase("mypy", mypy),
        Phase("go test", [*go, "./cmd/..."], cwd=go_dir),
        Phase("pytest fast part", [*PYTEST, "-m", "not engine"]),
        Phase("pytest engine part", [*PYTEST, "-m", "engine"]),
    ]


def drop_test_bytecode() -> None:
    """The bytecode a fresh clone lacks: the tests' (pytest's rewrites, the helpers'), the
    benches' and pytest's rewrites of its plugins' modules (the .venv `tools/dev setup` makes
    has none)."""
    for top in ("tests", "bench"):
        for cache in sorted((REPO_ROOT / top).rglob("__pycache__")):
            shutil.rmtree(cache, ignore_errors=True)
    for rewritten in (REPO_ROOT / ".venv" / "lib").glob("*/site-packages/**/*-pytest-*.pyc"):
        rewritten.unlink(missing_ok=True)


def run(phase: Phase, env: dict[str, str]) -> Timing:
    started = time.monotonic()
    proc = subprocess.run(
        phase.argv, cwd=phase.cwd, env=env, capture_output=True, text=True, check=False
    )
    seconds = time.monotonic() - started
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    return Timing(phase, seconds, proc.returncode == 0, lines[-1] if lines else "")


def verdict(seconds: float, budget: float) -> str:
    return "MET" if seconds <= budget else "MISSED"


def report(timings: Sequence[Timing], results: Results) -> None:
    rows = [
        [t.phase.name, f"{t.seconds:.1f}", "ok" if t.ok else "FAILED", t.tail[:70]] for t in timings
    ]
    total = sum(t.seconds for t in timings)
    rows.append(["total", f"{total:.1f}", "", ""])
    results.table(["PHASE", "SECONDS", "RESULT", "LAST LINE"], rows)
    results.heading("budgets" + (" (judged on the full run only)" if results.quick else ""))
    if results.quick:
        minutes = BUDGET_TOTAL_S / 60
        print(
            f'pytest -m "not engine" <= {BUDGET_FAST_S:.0f} s, tools/dev test <= {minutes:.0f} min'
        )
        return
    fast = next(t.seconds for t in timings if t.phase.name == "pytest fast part")
    results.print(
        f'pytest -m "not engine": {fast:.1f} s (budget <= {BUDGET_FAST_S:.0f} s):'
        f" {verdict(fast, BUDGET_FAST_S)}"
    )
    results.print(
        f"tools/dev test: {total:.1f} s = {total / 60:.1f} min"
        f" (budget <= {BUDGET_TOTAL_S / 60:.0f} min): {verdict(total, BUDGET_TOTAL_S)}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every phase, small: for CI")
    parser.add_argument("--warm", action="store_true", help="keep the checkout's caches")
    args = parser.parse_args()
    results = Results(__file__, quick=args.quick)
    env = hermetic_env()
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as `tools/dev test` runs pytest
    caches = "the checkout's caches" if args.warm else "no mypy, go test or tests' bytecode cache"
    results.heading(f"tools/dev test, phase by phase ({caches}), pytest on every core")
    if not args.warm:
        drop_test_bytecode()
    with tempfile.TemporaryDirectory(prefix="suite-time-mypy-") as mypy_cache:
        timings = []
        for phase in phases(quick=args.quick, warm=args.warm, mypy_cache=mypy_cache):
            timings.append(run(phase, env))
            print(f"  {phase.name}: {timings[-1].seconds:.1f} s", flush=True)
    report(timings, results)
    results.write()
    return 0 if all(t.ok for t in timings) else 1


if __name__ == "__main__":
    sys.exit(main())
