"""A throwaway git repository for the tests that read stack configs at refs."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from frutebox_infra.catalog.files import load_registry
from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.stack.stack_file import load_settings, read_stack_config
from tests.factories import stack_yaml

Config = dict[str, Any]


class Repo:
    """A throwaway git repository with the project's registry and one stack file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.env = {
            **os.environ,
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@example.invalid",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.invalid",
        }

    def git(self, *args: str) -> str:
        done = subprocess.run(["git", "-C", str(self.path), *args], env=self.env,
                              capture_output=True, text=True, check=True)  # fmt: skip
        return done.stdout.strip()

    def stack_file(self, stack: str = "dev") -> Path:
        return self.path / "stacks" / f"Pulumi.{stack}.yaml"

    def config(self, stack: str = "dev") -> Config:
        return read_stack_config(self.stack_file(stack))

    def write(self, config: Config, stack: str = "dev") -> None:
        self.stack_file(stack).write_text(stack_yaml(config))

    def edit(self, change: Callable[[Config], None], stack: str = "dev") -> None:
        config = self.config(stack)
        change(config)
        self.write(config, stack)

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")

    def plan(self, stack: str = "dev") -> FleetPlan:
        """The work tree's plan, straight from the planner: the expected numbers."""
        registry = load_registry(self.path / "registry")
        return plan_fleet(registry, load_settings(self.stack_file(stack)), stack=stack)
