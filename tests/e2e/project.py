"""A throwaway copy of the Pulumi project on a throwaway local backend, driven by the real CLI."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from frutebox_infra.commands.toolchain import copy_project, sandbox_env


@dataclass
class PulumiProject:
    """Pulumi.yaml, __main__.py and stacks/ copied to `root`; state lives in `backend`."""

    root: Path
    backend: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    stacks: set[str] = field(default_factory=set)
    """Stacks made on `backend` through `init`: the backend is this project's alone, so a
    stack in here exists and needs no CLI call before the next command names it."""

    @classmethod
    def create(
        cls, tmp: Path, stacks: Mapping[str, Mapping[str, Any]] | None = None
    ) -> PulumiProject:
        made = cls(copy_project(tmp / "project"), tmp / "backend")
        for stack, config in (stacks or {}).items():
            made.write_stack(stack, config)
        return made

    @property
    def env(self) -> dict[str, str]:
        env = sandbox_env(self.backend)
        env.update(self.extra_env)
        return env

    def stack_path(self, stack: str) -> Path:
        return self.root / "stacks" / f"Pulumi.{stack}.yaml"

    def write_stack(self, stack: str, config: Mapping[str, Any]) -> None:
        """Write a stack file from `frutebox-infra:` keys without their prefix."""
        doc = {"config": {f"frutebox-infra:{k}": v for k, v in config.items()}}
        self.stack_path(stack).write_text(yaml.safe_dump(doc, sort_keys=False))

    def write_stack_text(self, stack: str, text: str) -> None:
        self.stack_path(stack).write_text(text)

    def pulumi(
        self, *args: str, check: bool = True, timeout: int = 600
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            ["pulumi", *args, "--non-interactive"],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"pulumi {' '.join(args)} exited {proc.returncode}\n"
                f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
            )
        return proc

    def init(self, stack: str) -> None:
        """Create `stack` unless it exists (`stack select --create`: one CLI run, not two).
        Every command here names its stack with --stack, so which one is selected is moot."""
        if stack not in self.stacks:
            self.pulumi("stack", "select", "--create", stack)
            self.stacks.add(stack)

    def preview(self, stack: str, *extra: str) -> Preview:
        """`pulumi preview` with the engine's JSON event stream, parsed."""
        self.init(stack)
        env = {**self.env, "PULUMI_ENABLE_STREAMING_JSON_PREVIEW": "1"}
        proc = subprocess.run(
            ["pulumi", "preview", "--stack", stack, "--json", "--non-interactive", *extra],
            cwd=self.root,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        return Preview.from_events(proc.returncode, proc.stdout, proc.stderr)

    def up(self, stack: str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
        self.init(stack)
        return self.pulumi("up", "--stack", stack, "--yes", "--skip-preview", check=check)

    def start_up(self, stack: str) -> subprocess.Popen[str]:
        """`pulumi up` running in the background, its output merged, for a test to interrupt."""
        return subprocess.Popen(
            ["pulumi", "up", "--stack", stack, "--yes", "--skip-preview", "--non-interactive"],
            cwd=self.root,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def outputs(self, stack: str) -> dict[str, Any]:
        proc = self.pulumi("stack", "output", "--stack", stack, "--json", "--show-secrets")
        result: dict[str, Any] = json.loads(proc.stdout)
        return result

    def state_text(self) -> str:
        """Every file of the backend, for grepping secrets out of state."""
        return "\n".join(
            p.read_text(errors="replace") for p in self.backend.rglob("*") if p.is_file()
        )


@dataclass
class Preview:
    """What a preview planned: steps, the diagnostics a user reads, and the stack outputs."""

    code: int
    steps: list[dict[str, Any]]
    diagnostics: str
    outputs: dict[str, Any]
    stderr: str

    @classmethod
    def from_events(cls, code: int, stdout: str, stderr: str) -> Preview:
        steps: list[dict[str, Any]] = []
        messages: list[str] = []
        outputs: dict[str, Any] = {}
        for line in stdout.splitlines():
            if not line.strip().startswith("{"):
                continue
            event = json.loads(line)
            if "resourcePreEvent" in event:
                steps.append(event["resourcePreEvent"]["metadata"])
            elif "diagnosticEvent" in event:
                diag = event["diagnosticEvent"]
                if diag.get("severity") != "debug":
                    messages.append(str(diag.get("message", "")))
            elif "resOutputsEvent" in event:
                meta = event["resOutputsEvent"]["metadata"]
                if meta.get("type") == "pulumi:pulumi:Stack":
                    outputs = (meta.get("new") or {}).get("outputs") or outputs
        return cls(code, steps, "\n".join(messages), outputs, stderr)

    def urns(self, op: str) -> list[str]:
        """URNs of our resources (not the stack, not providers) with step `op`."""
        return [
            str(s["urn"])
            for s in self.steps
            if s.get("op") == op
            and s.get("type") != "pulumi:pulumi:Stack"
            and not str(s.get("type", "")).startswith("pulumi:providers:")
        ]

    def step(self, name: str) -> dict[str, Any]:
        return next(s for s in self.steps if str(s["urn"]).endswith(f"::{name}"))
