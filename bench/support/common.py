"""Shared helpers for the bench scripts: timing, tables, results, fit requests and projects.

Why a module of its own: every script times the same way (median of repeated runs, so one
slow run on a busy machine does not decide a figure), prints the same kind of table, and the
two that compare against the planner must build a `FitRequest` exactly as the resolver does
without reaching into its private helpers. A full run keeps its figures in bench/RESULTS.md
through `Results`, one section per bench.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import Any, TypeVar

import yaml

from frutebox_infra.catalog.schema import Cloud, Gpu, Image, Model, Registry
from frutebox_infra.commands.toolchain import (
    copy_project,
    hermetic_env,
    sandbox_env,
    use_checkout_venv,
)
from frutebox_infra.estimates.fit import Fit, estimate
from frutebox_infra.planner.ranking import fit_request, gpu_price, image_gpu_problem
from frutebox_infra.plumbing.paths import REPO_ROOT
from frutebox_infra.recipes.base import Recipe, ServeOptions, Serving
from frutebox_infra.report.text import table

T = TypeVar("T")

ROOT = REPO_ROOT
PYTHON = ROOT / ".venv" / "bin" / "python"
RESULTS_FILE = Path(__file__).parent.parent / "RESULTS.md"


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    """Wall seconds of one call and its result (perf_counter: monotonic, highest resolution)."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def median_seconds(fn: Callable[[], object], runs: int) -> float:
    """Median wall time of `runs` calls: robust to the odd run a busy 2-core machine spoils."""
    return statistics.median(timed(fn)[0] for _ in range(runs))


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    print(table(headers, rows, width=200))


def heading(text: str) -> None:
    print(f"\n== {text}")


@dataclass
class Results:
    """What a bench prints as its figures and targets, kept for bench/RESULTS.md.

    `print`, `heading` and `table` print as `print`, `heading()` and `print_table()` do and keep
    the text; `write()` then replaces this bench's section of RESULTS.md, unless the run is a
    `--quick` one (CI runs those on clean clones, and one run at a small size is no figure)."""

    script: str
    quick: bool
    lines: list[str] = field(default_factory=list)

    def print(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines += text.split("\n")

    def heading(self, text: str) -> None:
        self.print(f"\n== {text}")

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        self.print(table(headers, rows, width=200))

    def write(self) -> None:
        if self.quick:
            return
        bench = Path(self.script).stem
        command = " ".join(["bench/" + Path(self.script).name, *sys.argv[1:]])
        text = RESULTS_FILE.read_text() if RESULTS_FILE.exists() else ""
        header, *parts = re.split(r"^(?=## )", text, flags=re.MULTILINE)
        sections = {part.split("\n", 1)[0].removeprefix("## ").strip(): part for part in parts}
        body = "\n".join(self.lines).strip("\n")
        sections[bench] = (
            f"## {bench}\n\n{date.today().isoformat()}, {os.cpu_count()} cores,"
            f" commit {_commit()}: `{command}`\n\n```text\n{body}\n```"
        )
        kept = [header, *(sections[name] for name in sorted(sections))]
        RESULTS_FILE.write_text("\n\n".join(p.strip("\n") for p in kept if p.strip()) + "\n")


def _commit() -> str:
    """`git rev-parse --short HEAD` of the bench's checkout, marked when files differ from it."""
    root = RESULTS_FILE.parent.parent

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)

    head = git("rev-parse", "--short", "HEAD")
    if head.returncode != 0:
        return "unknown"
    dirty = git("diff", "--quiet", "HEAD", "--", ".", f":(exclude){RESULTS_FILE.relative_to(root)}")
    return head.stdout.strip() + (" with uncommitted changes" if dirty.returncode else "")


def price(gpu: Gpu, cloud: Cloud = Cloud.SECURE) -> float | None:
    return gpu_price(gpu, cloud)


@dataclass(frozen=True)
class Verdict:
    """Would `count` x `gpu` serve the model under our rules, and if not, which rule says no."""

    fits: bool
    reason: str | None
    fit: Fit | None


def judge(
    model: Model,
    recipe: Recipe,
    serving: Serving,
    options: ServeOptions,
    image: Image,
    gpu: Gpu,
    count: int,
) -> Verdict:
    """Every rule a placement must pass, applied to one (gpu, count) with no search at all:
    FP8 hardware, the image's GPU architectures, the recipe's count rules (tensor-parallel
    divisibility, FP8 block sharding), then the engine's memory fit."""
    if serving.require_fp8 and not gpu.fp8:
        return Verdict(False, "FP8 checkpoint on a GPU without native FP8", None)
    cannot_drive = image_gpu_problem(image, gpu)
    if cannot_drive is not None:
        return Verdict(False, cannot_drive, None)
    problem = recipe.count_problem(model, count)
    if problem is not None:
        return Verdict(False, problem, None)
    fit = estimate(fit_request(model, recipe, serving, options, gpu), gpu, count)
    return Verdict(fit.fits, fit.reason, fit)


@dataclass(frozen=True)
class Project:
    """A throwaway Pulumi project directory on its own throwaway file backend."""

    root: Path
    backend: Path

    @property
    def env(self) -> dict[str, str]:
        return sandbox_env(self.backend)

    def pulumi(self, *args: str) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            ["pulumi", *args, "--non-interactive"],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if proc.returncode != 0:
            sys.exit(
                f"pulumi {' '.join(args)} failed in {self.root} ({proc.returncode}):\n"
                f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
            )
        return proc

    def init(self, stack: str) -> None:
        self.pulumi("stack", "init", stack)


def real_project(tmp: Path) -> Project:
    """The checkout's own Pulumi.yaml, __main__.py and stacks/, on the checkout's .venv."""
    return Project(copy_project(tmp / "frutebox"), tmp / "frutebox-backend")


def bare_project(tmp: Path, name: str, program: str) -> Project:
    """A Python program with the same runtime options (interpreter, virtualenv) and no config."""
    root = tmp / name
    root.mkdir(parents=True)
    doc: dict[str, Any] = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    bare = {"name": name, "runtime": doc["runtime"]}
    (root / "Pulumi.yaml").write_text(yaml.safe_dump(bare, sort_keys=False))
    use_checkout_venv(root / "Pulumi.yaml")
    (root / "__main__.py").write_text(program)
    return Project(root, tmp / f"{name}-backend")


def require_toolchain() -> None:
    """Fail with the set-up command, not a stack trace, when the pulumi CLI is not built."""
    if shutil.which("pulumi", path=hermetic_env()["PATH"]) is None:
        sys.exit("no pulumi CLI: run `tools/dev setup` first")


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


def synthetic_registry(catalog: Registry, templates: list[Model], n: int) -> Registry:
    """`n` clones of `templates` (in turn) with fresh ids, in an otherwise real registry (so
    the plan decides seeding, gateways and launches as a real stack's does); a clone keeps no
    `former_ids`, which must stay unique across the registry."""
    clones = tuple(
        replace(
            templates[i % len(templates)],
            id=f"{templates[i % len(templates)].id}-s{i:05d}",
            former_ids=(),
        )
        for i in range(n)
    )
    return replace(catalog, models=clones)
