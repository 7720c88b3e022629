"""Shared helpers for the bench scripts: timing, tables, fit requests and throwaway projects.

Why a module of its own: every script times the same way (median of repeated runs, so one
slow run on a busy machine does not decide a figure), prints the same kind of table, and the
two that compare against the planner must build a `FitRequest` exactly as the resolver does
without reaching into its private helpers.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
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
    """`n` clones of `templates` (in turn) with fresh ids over the real GPU inventory, CPU
    flavors and seeder image (so the plan decides seeding as a real stack's does); a clone
    keeps no `former_ids`, which must stay unique across the registry."""
    clones = tuple(
        replace(
            templates[i % len(templates)],
            id=f"{templates[i % len(templates)].id}-s{i:05d}",
            former_ids=(),
        )
        for i in range(n)
    )
    return Registry(
        models=clones,
        gpus=catalog.gpus,
        images=catalog.images,
        data_centers=catalog.data_centers,
        network_volume=catalog.network_volume,
        max_gpus_per_pod=catalog.max_gpus_per_pod,
        speed=catalog.speed,
        cpu_flavors=catalog.cpu_flavors,
        seeder_image=catalog.seeder_image,
        engine_options=catalog.engine_options,
    )
