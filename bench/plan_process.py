"""How long `frutebox plan --stack prod` takes as a whole process, as a user runs it.

Runs `.venv/bin/frutebox plan --stack prod` (the README's command: a fresh interpreter, its
imports, the registry and the stack file read, the plan, the table printed) and, for scale,
`.venv/bin/python -c pass` (the interpreter's own start-up), one after the other, RUNS rounds
after one warm-up of each; prints the median, min and max wall seconds. Budget: the plan's
median <= 0.5 s.

Run: .venv/bin/python bench/plan_process.py [--quick | --runs N]
  --quick: one run of each without a warm-up, for CI (exits non-zero if the command fails;
  the budget is judged on the full run only).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from support.common import PYTHON, ROOT, Results

RUNS = 9
BUDGET_S = 0.5
FRUTEBOX = ROOT / ".venv" / "bin" / "frutebox"
PLAN = "frutebox plan --stack prod"
COMMANDS = {
    PLAN: [str(FRUTEBOX), "plan", "--stack", "prod"],
    "python -c pass (for scale)": [str(PYTHON), "-c", "pass"],
}


def wall_seconds(argv: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run, no warm-up: for CI")
    parser.add_argument("--runs", type=int, default=RUNS, help=f"rounds (default {RUNS})")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    results = Results(__file__, quick=args.quick)
    runs = 1 if args.quick else args.runs
    if not args.quick:
        for argv in COMMANDS.values():
            wall_seconds(argv)  # warm-up: the OS page cache, the registry's validated cache
    times: dict[str, list[float]] = {label: [] for label in COMMANDS}
    for _ in range(runs):
        for label, argv in COMMANDS.items():
            times[label].append(wall_seconds(argv))
    results.heading(f"whole-process wall seconds, {runs} run(s) each")
    results.table(
        ["COMMAND", "MEDIAN S", "MIN S", "MAX S"],
        [
            [label, f"{statistics.median(t):.3f}", f"{min(t):.3f}", f"{max(t):.3f}"]
            for label, t in times.items()
        ],
    )
    plan_s = statistics.median(times[PLAN])
    met = "MET" if plan_s <= BUDGET_S else "MISSED"
    verdict = "(judged on the full run only)" if args.quick else met
    results.print(f"{PLAN}: {plan_s:.3f} s (budget <= {BUDGET_S:g} s): {verdict}")
    results.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
