"""A stack's config as it is at a git ref (or in the work tree), read with git and planned."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from frutebox_infra.catalog.files import (
    ENGINE_OPTIONS_DIR,
    FILES,
    RegistryFiles,
    is_engine_options,
    parse_registry,
)
from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.plumbing.errors import ConfigError, UsageError
from frutebox_infra.plumbing.paths import STACKS_DIR
from frutebox_infra.plumbing.yaml_text import decode_utf8
from frutebox_infra.stack.environment import Environment
from frutebox_infra.stack.stack_file import parse_settings, stack_config_from_text, stack_file_name

WORK_TREE = "work tree"
"""The label of the side read from the checkout's files rather than from a commit."""
STACK_NAME = re.compile(r"[A-Za-z0-9_.-]+")
"""A stack name that cannot reach outside stacks/ once it is part of a git path."""


@dataclass(frozen=True)
class ConfigAtRef:
    """The stack file and registry texts as they are at one ref (or in the work tree)."""

    label: str
    stack_text: str
    registry: RegistryFiles


def stack_path(stack: str) -> str:
    """The stack file's path inside the repository, checked to be a plain stack name."""
    if not STACK_NAME.fullmatch(stack):
        raise UsageError(f"'{stack}' is not a stack name (letters, digits, '.', '_', '-')")
    return f"{STACKS_DIR.name}/{stack_file_name(stack)}"


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False)
    except FileNotFoundError:
        raise UsageError(
            "git is not installed (or not on PATH); `diff` reads refs with git"
        ) from None


def git_toplevel(start: Path) -> Path:
    """The top of the git work tree holding `start`: refs are read relative to it."""
    done = _git(start, "rev-parse", "--show-toplevel")
    if done.returncode != 0:
        raise UsageError(f"{start} is not inside a git repository; run `diff` from the checkout")
    return Path(done.stdout.decode().strip())


def read_config_at(repo: Path, ref: str | None, stack: str) -> ConfigAtRef | None:
    """The stack's config at `ref` (None: the work tree); None when the stack file is absent."""
    path = stack_path(stack)
    if ref is None:
        return _read_work_tree(repo, path)
    commit = _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    if commit.returncode != 0:
        raise UsageError(
            f"git ref '{ref}' does not name a commit in {repo}. Fix: fetch it (in CI:"
            " actions/checkout with fetch-depth: 0) or pass an existing branch, tag or SHA."
        )
    sha = commit.stdout.decode().strip()
    listed = _git(repo, "ls-tree", "-r", "--name-only", sha, "--", path, "registry")
    present = set(listed.stdout.decode().splitlines())
    if path not in present:
        return None
    names = [*FILES, *sorted(p.removeprefix("registry/") for p in present if _facts(p))]
    texts = {
        name: _show(repo, sha, f"registry/{name}", ref)
        for name in names
        if f"registry/{name}" in present
    }
    return ConfigAtRef(ref, _show(repo, sha, path, ref), RegistryFiles(texts=texts))


def _show(repo: Path, sha: str, path: str, ref: str) -> str:
    done = _git(repo, "show", f"{sha}:{path}")
    if done.returncode != 0:
        raise UsageError(f"git cannot show {path} at '{ref}': {done.stderr.decode().strip()}")
    return _decode(done.stdout, f"{ref}:{path}")


def _read_work_tree(repo: Path, stack_file: str) -> ConfigAtRef | None:
    path = repo / stack_file
    if not path.is_file():
        return None
    names = [
        *FILES,
        *(
            f"{ENGINE_OPTIONS_DIR}/{p.name}"
            for p in sorted((repo / "registry" / ENGINE_OPTIONS_DIR).glob("*.json"))
        ),
    ]
    texts = {n: _read(repo / "registry" / n) for n in names if (repo / "registry" / n).is_file()}
    return ConfigAtRef(WORK_TREE, _read(path), RegistryFiles(texts=texts))


def _facts(path: str) -> bool:
    return is_engine_options(path.removeprefix("registry/"))


def _read(path: Path) -> str:
    try:
        return _decode(path.read_bytes(), str(path))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror})") from None


def _decode(data: bytes, where: str) -> str:
    return decode_utf8(data, where)


def plan_config(config: ConfigAtRef, stack: str, environment: Environment) -> FleetPlan:
    """Plan one side with the same parsers and planner preview uses."""
    registry = parse_registry(config.registry, label=f"{config.label}:registry")
    where = f"{config.label}:{stack_path(stack)}"
    settings = parse_settings(stack_config_from_text(config.stack_text, where=where), where=where)
    return plan_fleet(registry, settings, stack=stack, environment=environment)


def plan_both_sides(
    repo: Path, base: str, head: str | None, stack: str, environment: Environment
) -> tuple[FleetPlan | None, FleetPlan | None]:
    """The stack planned at `base` and at `head` (None: the work tree); None where it is absent."""
    before_config = read_config_at(repo, base, stack)
    after_config = read_config_at(repo, head, stack)
    if before_config is None and after_config is None:
        raise UsageError(
            f"stack '{stack}' has no {stack_path(stack)} at '{base}' nor at '{head or WORK_TREE}'."
            " Fix: pass a stack that exists (stacks/Pulumi.<stack>.yaml)."
        )
    before = plan_config(before_config, stack, environment) if before_config else None
    after = plan_config(after_config, stack, environment) if after_config else None
    return before, after
