"""The GitHub workflows: actionlint-clean, and running the commands this test suite exercises.

actionlint is built when missing (tools/setup-actionlint, seconds from the Go module proxy)
rather than skipped: an unlinted workflow fails only on GitHub, after the merge.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from frutebox_infra.commands.cli import build_parser
from frutebox_infra.commands.toolchain import PULUMI_VERSION
from tests.factories import ROOT, workflow_diff_command

WORKFLOWS = ROOT / ".github" / "workflows"
SETUP = ROOT / "tools" / "setup-actionlint"
PATHS = ["stacks/**", "registry/**", "__main__.py", "Pulumi.yaml", "frutebox_infra/**",
         "pyproject.toml"]  # fmt: skip
"""Everything that changes what `pulumi preview`/`up` does; both workflows trigger on it."""


@pytest.fixture(scope="session")
def actionlint() -> Path:
    done = subprocess.run(["bash", str(SETUP)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    exe = Path(done.stdout.strip().splitlines()[-1])
    assert exe.is_file() and os.access(exe, os.X_OK)
    return exe


def workflow(name: str) -> dict[str, Any]:
    doc: dict[Any, Any] = yaml.safe_load((WORKFLOWS / name).read_text())
    # YAML 1.1 reads the bare key `on` as the boolean True.
    doc["on"] = doc.pop(True, doc.get("on"))
    return doc


def stacks() -> set[str]:
    return {p.name[len("Pulumi.") : -len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml")}


def step_using(job: dict[str, Any], action: str, **with_: str) -> dict[str, Any]:
    for step in job["steps"]:
        inputs = step.get("with", {})
        if step.get("uses", "").startswith(action + "@") and all(
            str(inputs.get(k)) == v for k, v in with_.items()
        ):
            return dict(step)
    raise AssertionError(f"no step uses {action} with {with_}")


def test_every_workflow_passes_actionlint(actionlint: Path) -> None:
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert {f.name for f in files} >= {"preview.yml", "deploy.yml", "ci.yml", "drift.yml"}
    done = subprocess.run([str(actionlint), "-color=false", *map(str, files)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_really_lints(actionlint: Path, tmp_path: Path) -> None:
    """A linter that passes everything would make the test above worthless."""
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: push\njobs:\n  x:\n    runs-on: ubuntu-latest\n"
        "    steps:\n      - run: echo ${{ github.no_such_context_key }}\n"
    )
    done = subprocess.run([str(actionlint), "-color=false", str(bad)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 1 and "no_such_context_key" in done.stdout


def test_setup_actionlint_is_idempotent_without_go(actionlint: Path) -> None:
    # Only bash and coreutils on PATH: a second run must not need go at all.
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")}
    done = subprocess.run(["bash", str(SETUP)], env=env, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(actionlint) and done.stderr == ""


def test_preview_runs_the_diff_command_the_tests_run() -> None:
    doc = workflow("preview.yml")
    assert doc["on"]["pull_request"]["paths"] == PATHS
    assert doc["permissions"] == {"contents": "read", "pull-requests": "write"}
    job = doc["jobs"]["preview"]
    assert set(job["strategy"]["matrix"]["stack"]) == stacks()
    assert step_using(job, "actions/checkout")["with"]["fetch-depth"] == 0
    assert str(step_using(job, "actions/setup-python")["with"]["python-version"]) == "3.11"
    diff = next(s for s in job["steps"] if "frutebox_infra diff" in s.get("run", ""))
    assert diff["env"]["BASE_REF"] == "${{ github.base_ref }}"
    assert diff["env"]["STACK"] == "${{ matrix.stack }}"
    argv = shlex.split(workflow_diff_command())
    assert argv == ["python", "-m", "frutebox_infra", "diff", "--base", "origin/$BASE_REF",
                    "--stack", "$STACK", "--format", "markdown"]  # fmt: skip
    # The arguments are ones the CLI accepts; tests/views/test_diff.py runs this very line.
    argv = [a.replace("$BASE_REF", "main").replace("$STACK", "dev") for a in argv]
    args = build_parser().parse_args(argv[3:])
    assert (args.base, args.stack, str(args.format)) == ("origin/main", "dev", "markdown")
    # Exit 1 (problems) must fail the job, after the comment is posted.
    assert 'exit "$status"' in diff["run"]
    comment = step_using(job, "marocchino/sticky-pull-request-comment", path="diff.md")
    assert "steps.diff.outputs.status == '1'" in comment["if"]


def test_preview_runs_pulumi_preview_with_the_pinned_cli() -> None:
    job = workflow("preview.yml")["jobs"]["preview"]
    step = step_using(job, "pulumi/actions", command="preview")
    assert step["uses"] == "pulumi/actions@v6"
    assert step["with"]["stack-name"] == "${{ matrix.stack }}"
    assert step["with"]["comment-on-pr"] is True
    assert step["with"]["cloud-url"] == "${{ secrets.PULUMI_BACKEND_URL }}"
    assert f"v{step['with']['pulumi-version']}" == PULUMI_VERSION
    assert set(step["env"]) >= {"PULUMI_CONFIG_PASSPHRASE", "HF_TOKEN"}
    # Preview runs the pull request's own code: never the deploy key, only a read-only one.
    assert step["env"]["RUNPOD_API_KEY"] == "${{ secrets.RUNPOD_READONLY_API_KEY }}"


def test_drift_runs_status_per_stack_on_a_schedule_and_fails_on_drift() -> None:
    doc = workflow("drift.yml")
    assert set(doc["on"]) == {"schedule", "workflow_dispatch"}
    assert doc["permissions"] == {"contents": "read"}
    job = doc["jobs"]["status"]
    assert set(job["strategy"]["matrix"]["stack"]) == stacks()
    cli = step_using(job, "pulumi/actions")
    assert "command" not in cli["with"] and f"v{cli['with']['pulumi-version']}" == PULUMI_VERSION
    step = next(s for s in job["steps"] if "frutebox_infra status" in s.get("run", ""))
    line = next(x for x in step["run"].splitlines() if "frutebox_infra status" in x)
    argv = shlex.split(line.split(">")[0])
    assert argv[:3] == ["python", "-m", "frutebox_infra"]
    args = build_parser().parse_args([a.replace("$STACK", "dev") for a in argv[3:]])
    assert (args.stack, str(args.format)) == ("dev", "markdown")
    assert 'cat status.md >> "$GITHUB_STEP_SUMMARY"' in step["run"]
    assert 'exit "$status"' in step["run"]  # exit 3 (drift) fails the job
    assert set(step["env"]) >= {"PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "RUNPOD_API_KEY"}


def test_deploy_runs_up_per_stack_one_at_a_time_with_prod_protected() -> None:
    doc = workflow("deploy.yml")
    assert doc["on"]["push"] == {"branches": ["main"], "paths": PATHS}
    assert doc["permissions"] == {"contents": "read"}
    job = doc["jobs"]["deploy"]
    assert job["concurrency"] == {"group": "deploy-${{ matrix.stack }}",
                                  "cancel-in-progress": False}  # fmt: skip
    assert "'prod' && 'production'" in job["environment"]
    step = step_using(job, "pulumi/actions", command="up")
    assert step["with"]["stack-name"] == "${{ matrix.stack }}"
    assert f"v{step['with']['pulumi-version']}" == PULUMI_VERSION
    assert set(step["env"]) >= {"PULUMI_CONFIG_PASSPHRASE", "RUNPOD_API_KEY", "HF_TOKEN"}
    pick = doc["jobs"]["changes"]["steps"][-1]["run"]
    assert 'git diff --name-only "$BEFORE" "$AFTER"' in pick


def test_ci_runs_the_test_suite() -> None:
    doc = workflow("ci.yml")
    assert set(doc["on"]) == {"push", "pull_request"}
    steps = doc["jobs"]["test"]["steps"]
    assert any(s.get("run") == "bash .ci/run" for s in steps)


def test_ci_tests_every_python_pyproject_names() -> None:
    """The versions pyproject.toml promises are the versions CI runs: the oldest with the
    engine and the benches, every newer one with the fast suite."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    promised = sorted(
        c.rsplit(" :: ", 1)[1]
        for c in project["classifiers"]
        if c.startswith("Programming Language :: Python :: 3.")
    )
    low, high = re.fullmatch(r">=3\.(\d+),<3\.(\d+)", project["requires-python"]).groups()  # type: ignore[union-attr]
    assert promised == [f"3.{minor}" for minor in range(int(low), int(high))]
    jobs = workflow("ci.yml")["jobs"]
    oldest = step_using(jobs["test"], "actions/setup-python")["with"]["python-version"]
    newer = jobs["python-versions"]["strategy"]["matrix"]["python-version"]
    assert [str(oldest), *newer] == promised


def test_usage_samples_every_stack_hourly_and_keeps_its_ledger() -> None:
    doc = workflow("usage.yml")
    assert doc["on"]["schedule"] == [{"cron": "1 * * * *"}]
    assert doc["permissions"] == {"contents": "read"}
    job = doc["jobs"]["sample"]
    assert set(job["strategy"]["matrix"]["stack"]) == stacks()
    step = next(s for s in job["steps"] if "frutebox_infra usage" in s.get("run", ""))
    line = step["run"].splitlines()[0]
    argv = shlex.split(line)
    args = build_parser().parse_args([a.replace("$STACK", "dev") for a in argv[3:]])
    assert (args.stack, args.record) == ("dev", True)
    restore = step_using(job, "actions/cache/restore")
    save = step_using(job, "actions/cache/save")
    assert restore["with"]["path"] == save["with"]["path"] == ".frutebox"


def test_window_edges_run_up_in_the_deploy_concurrency_group() -> None:
    deploy = workflow("deploy.yml")["jobs"]["deploy"]
    doc = workflow("windows.yml")
    assert doc["on"]["schedule"] == [{"cron": "*/15 * * * *"}]
    job = doc["jobs"]["edge"]
    # The same group as a deploy of the stack, never cancelled midway.
    assert job["concurrency"] == deploy["concurrency"]
    assert job["concurrency"]["cancel-in-progress"] is False
    up = step_using(job, "pulumi/actions")
    assert up["with"]["command"] == "up" and f"v{up['with']['pulumi-version']}" == PULUMI_VERSION
    assert any("FRUTEBOX_NOW=" in s.get("run", "") for s in job["steps"])
