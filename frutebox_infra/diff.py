"""Cost and fit difference of one stack's config between two git refs, for pull-request checks."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields
from enum import StrEnum
from pathlib import Path

from frutebox_infra.errors import (
    EXIT_OK,
    EXIT_PROBLEMS,
    ConfigError,
    FruteboxError,
    UsageError,
    exit_code,
)
from frutebox_infra.paths import STACKS_DIR
from frutebox_infra.plan import HOURS_PER_MONTH, Environment, FleetPlan, ModelPlan, plan_fleet
from frutebox_infra.registry_files import FILES, RegistryFiles, parse_registry
from frutebox_infra.report import Format
from frutebox_infra.resolver import PlanProblem
from frutebox_infra.settings import (
    parse_settings,
    stack_config_from_text,
    stack_file_name,
)

FORMATS = tuple(Format)
STACK_NAME = re.compile(r"[A-Za-z0-9_.-]+")


class Change(StrEnum):
    ADDED = "added"
    REMOVED = "removed"
    CHANGED = "changed"
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class ModelSnapshot:
    """What a reviewer compares for one armed model on one side of the change."""

    engine: str | None
    image: str | None
    gpu: str | None
    """GPU type name of the placement taken (None when the model cannot be placed)."""
    gpu_count: int | None
    usd_per_hour_best: float
    """USD per hour of the pod on the placement taken."""
    usd_per_hour_worst: float
    """USD per hour of the dearest allowed fallback placement."""
    fallbacks: int
    context_tokens: int | None
    full_context_sequences: float | None
    """Full-context sequences the placement holds; None for a coarse (headroom-rule) estimate."""
    configured_sequences: int | None
    problems: tuple[str, ...]

    @property
    def placement(self) -> str | None:
        return f"{self.gpu_count}x {self.gpu}" if self.gpu else None


@dataclass(frozen=True)
class ModelChange:
    """One model across the change: armed before, after, or both."""

    model_id: str
    before: ModelSnapshot | None
    after: ModelSnapshot | None

    @property
    def change(self) -> Change:
        if self.before is None:
            return Change.ADDED
        if self.after is None:
            return Change.REMOVED
        return Change.CHANGED if self.changed_fields else Change.UNCHANGED

    @property
    def changed_fields(self) -> tuple[str, ...]:
        """Snapshot fields that differ; every field for a model added or removed."""
        names = tuple(f.name for f in fields(ModelSnapshot))
        if self.before is None or self.after is None:
            return names
        return tuple(n for n in names if getattr(self.before, n) != getattr(self.after, n))

    @property
    def usd_per_hour_best(self) -> Amount:
        return Amount(_usd(self.before, best=True), _usd(self.after, best=True))

    @property
    def usd_per_hour_worst(self) -> Amount:
        return Amount(_usd(self.before, best=False), _usd(self.after, best=False))


@dataclass(frozen=True)
class Amount:
    """A number before and after the change (0 on a side where the stack does not exist)."""

    before: float
    after: float

    @property
    def delta(self) -> float:
        # `+ 0.0` turns -0.0 into 0.0 so an unchanged amount never prints as "-$0.00".
        return round(self.after - self.before, 2) + 0.0


@dataclass(frozen=True)
class FleetDiff:
    """A stack's plan before and after a config change, and the verdict on the after side."""

    stack: str
    base_exists: bool
    head_exists: bool
    models: tuple[ModelChange, ...]
    """Every model armed on either side, by id."""
    usd_per_hour_best: Amount
    usd_per_hour_worst: Amount
    usd_per_month_best: Amount
    usd_per_month_worst: Amount
    """Pods for 730 h plus the volume as it will really be (it never shrinks)."""
    volume_size_gb: Amount
    """Before: the base plan's size; after: the larger of that and the head plan's size."""
    volume_planned_gb: int
    """What the head plan asks for; a request below the current size is ignored by `up`."""
    volume_usd_per_month: Amount
    budget_usd_per_hour: Amount
    within_budget: bool | None
    """The after side's verdict; None when the stack is removed."""
    budget_headroom_usd_per_hour: float | None
    problems: tuple[PlanProblem, ...]
    """Problems of the after side: each one fails `pulumi preview`."""
    warnings: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def changes(self) -> tuple[ModelChange, ...]:
        return tuple(m for m in self.models if m.change is not Change.UNCHANGED)

    @property
    def unchanged(self) -> tuple[str, ...]:
        return tuple(m.model_id for m in self.models if m.change is Change.UNCHANGED)

    @property
    def volume_shrink_ignored(self) -> bool:
        """True when the head plan asks for a smaller volume than exists: it keeps its size."""
        return self.volume_planned_gb < self.volume_size_gb.before


def snapshot(m: ModelPlan) -> ModelSnapshot:
    p = m.placement
    serving = m.resolution.serving
    image = m.resolution.image
    seqs = p.fit.full_context_sequences if p else None
    return ModelSnapshot(
        engine=m.resolution.engine,
        image=image.reference if image else None,
        gpu=p.gpu.name if p else None,
        gpu_count=p.count if p else None,
        usd_per_hour_best=round(m.usd_per_hour_best, 2),
        usd_per_hour_worst=round(m.usd_per_hour_worst, 2),
        fallbacks=len(m.fallbacks),
        context_tokens=serving.context_tokens if serving and serving.token_context else None,
        full_context_sequences=None if seqs is None else round(seqs, 2),
        configured_sequences=p.fit.configured_sequences if p else None,
        problems=tuple(str(x) for x in m.problems),
    )


def diff_plans(before: FleetPlan | None, after: FleetPlan | None) -> FleetDiff:
    """Compare two plans of one stack; None is a side where the stack file does not exist."""
    old = {m.model_id: snapshot(m) for m in before.models} if before else {}
    new = {m.model_id: snapshot(m) for m in after.models} if after else {}
    models = tuple(ModelChange(i, old.get(i), new.get(i)) for i in sorted(old.keys() | new.keys()))

    def side(get: Callable[[FleetPlan], float]) -> Amount:
        return Amount(get(before) if before else 0.0, get(after) if after else 0.0)

    # The volume is protected and grow-only: after a shrinking change, and even after the stack
    # file is removed, it keeps its size and bills for it.
    planned = after.volume.size_gb if after else 0
    old_size = before.volume.size_gb if before else 0
    real = after.with_volume_at_least(old_size) if after else before
    kept = real.volume.size_gb if real else 0
    kept_usd = real.volume.usd_per_month if real else 0.0
    best = side(lambda p: p.usd_per_hour_best)
    worst = side(lambda p: p.usd_per_hour_worst)
    return FleetDiff(
        stack=after.stack if after else before.stack if before else "",
        base_exists=before is not None,
        head_exists=after is not None,
        models=models,
        usd_per_hour_best=best,
        usd_per_hour_worst=worst,
        usd_per_month_best=Amount(
            before.usd_per_month_best if before else 0.0,
            round(best.after * HOURS_PER_MONTH + kept_usd, 2),
        ),
        usd_per_month_worst=Amount(
            before.usd_per_month_worst if before else 0.0,
            round(worst.after * HOURS_PER_MONTH + kept_usd, 2),
        ),
        volume_size_gb=Amount(old_size, kept),
        volume_planned_gb=planned,
        volume_usd_per_month=Amount(before.volume.usd_per_month if before else 0.0, kept_usd),
        budget_usd_per_hour=side(lambda p: p.settings.budget_usd_per_hour),
        within_budget=after.within_budget if after else None,
        budget_headroom_usd_per_hour=after.budget_headroom_usd_per_hour if after else None,
        problems=after.problems if after else (),
        warnings=after.warnings if after else (),
    )


def _usd(side: ModelSnapshot | None, *, best: bool) -> float:
    if side is None:
        return 0.0
    return side.usd_per_hour_best if best else side.usd_per_hour_worst


# --- the thin I/O shell: git reading, planning both sides, rendering, exit code ---


@dataclass(frozen=True)
class ConfigAtRef:
    """The stack file and registry texts as they are at one ref (or in the work tree)."""

    label: str
    stack_text: str
    registry: RegistryFiles


def stack_path(stack: str) -> str:
    return f"{STACKS_DIR.name}/{stack_file_name(stack)}"


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False)
    except FileNotFoundError:
        raise UsageError(
            "git is not installed (or not on PATH); `diff` reads refs with git"
        ) from None


def git_toplevel(start: Path) -> Path:
    done = _git(start, "rev-parse", "--show-toplevel")
    if done.returncode != 0:
        raise UsageError(f"{start} is not inside a git repository; run `diff` from the checkout")
    return Path(done.stdout.decode().strip())


def read_config_at(repo: Path, ref: str | None, stack: str) -> ConfigAtRef | None:
    """The stack's config at `ref` (None: the work tree); None when the stack file is absent."""
    if ref is None:
        return _read_work_tree(repo, stack)
    commit = _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    if commit.returncode != 0:
        raise UsageError(
            f"git ref '{ref}' does not name a commit in {repo}. Fix: fetch it (in CI:"
            " actions/checkout with fetch-depth: 0) or pass an existing branch, tag or SHA."
        )
    sha = commit.stdout.decode().strip()
    listed = _git(repo, "ls-tree", "-r", "--name-only", sha, "--", stack_path(stack), "registry")
    present = set(listed.stdout.decode().splitlines())
    if stack_path(stack) not in present:
        return None
    texts = {
        name: _show(repo, sha, f"registry/{name}", ref)
        for name in FILES
        if f"registry/{name}" in present
    }
    return ConfigAtRef(ref, _show(repo, sha, stack_path(stack), ref), RegistryFiles(texts))


def _show(repo: Path, sha: str, path: str, ref: str) -> str:
    done = _git(repo, "show", f"{sha}:{path}")
    if done.returncode != 0:
        raise UsageError(f"git cannot show {path} at '{ref}': {done.stderr.decode().strip()}")
    return _decode(done.stdout, f"{ref}:{path}")


def _read_work_tree(repo: Path, stack: str) -> ConfigAtRef | None:
    path = repo / stack_path(stack)
    if not path.is_file():
        return None
    paths = [repo / "registry" / n for n in FILES]
    texts = {p.name: _read(p) for p in paths if p.is_file()}
    return ConfigAtRef("work tree", _read(path), RegistryFiles(texts))


def _read(path: Path) -> str:
    try:
        return _decode(path.read_bytes(), str(path))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror})") from None


def _decode(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: not UTF-8 text. Fix: save it as UTF-8.") from None


def plan_config(config: ConfigAtRef, stack: str, environment: Environment) -> FleetPlan:
    """Plan one side with the same parsers and planner preview uses."""
    registry = parse_registry(config.registry, label=f"{config.label}:registry")
    where = f"{config.label}:{stack_path(stack)}"
    settings = parse_settings(stack_config_from_text(config.stack_text, where=where), where=where)
    return plan_fleet(registry, settings, stack=stack, environment=environment)


def render(diff: FleetDiff, fmt: str, *, base: str, head: str) -> str:
    # Imported here, not at the top: the renderers import this module's types.
    from frutebox_infra.report.diff_data import diff_data
    from frutebox_infra.report.diff_markdown import diff_markdown
    from frutebox_infra.report.diff_table import diff_table

    if fmt == "json":
        return json.dumps(diff_data(diff, base=base, head=head), indent=2)
    if fmt == "markdown":
        return diff_markdown(diff, base=base, head=head)
    return diff_table(diff, base=base, head=head)


def run_diff(*, base: str, head: str | None, stack: str, fmt: str, repo: Path | None = None) -> int:
    """Print the diff of `stack` from `base` to `head`; 0 head ok, 1 head has problems, 2 usage."""
    try:
        if fmt not in FORMATS:
            raise UsageError(f"unknown format '{fmt}'; use one of {', '.join(FORMATS)}")
        if not STACK_NAME.fullmatch(stack):
            raise UsageError(f"'{stack}' is not a stack name (letters, digits, '.', '_', '-')")
        root = git_toplevel(repo or Path.cwd())
        before_config = read_config_at(root, base, stack)
        after_config = read_config_at(root, head, stack)
        head_label = head or "work tree"
        if before_config is None and after_config is None:
            raise UsageError(
                f"stack '{stack}' has no {stack_path(stack)} at '{base}' nor at '{head_label}'."
                " Fix: pass a stack that exists (stacks/Pulumi.<stack>.yaml)."
            )
        environment = Environment.from_env(os.environ)
        before = plan_config(before_config, stack, environment) if before_config else None
        after = plan_config(after_config, stack, environment) if after_config else None
    except FruteboxError as exc:
        # A side that does not parse cannot be deployed either: the check fails (exit 1).
        print(f"frutebox diff: {exc}", file=sys.stderr)
        return exit_code(exc)
    diff = diff_plans(before, after)
    print(render(diff, fmt, base=base, head=head_label))
    if not diff.ok:
        print(f"\n{len(diff.problems)} problem(s) at {head_label}: `pulumi preview` would fail.",
              file=sys.stderr)  # fmt: skip
        return EXIT_PROBLEMS
    return EXIT_OK
