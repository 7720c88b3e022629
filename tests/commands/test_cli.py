"""The command line: payload on stdout, notes on stderr, exit codes that mean something."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from frutebox_infra.commands import cli
from frutebox_infra.plumbing.errors import EXIT_USAGE
from frutebox_infra.stack.stack_file import stack_file
from tests.factories import ROOT, real_registry, stack_yaml


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan reads the process environment: a developer's HF_TOKEN must not change results."""
    for key in list(os.environ):
        if key.startswith(("FRUTEBOX_", "HF_")):
            monkeypatch.delenv(key)


def write_stack(directory: Path, name: str, config: dict[str, object]) -> None:
    stack_file(name, directory).write_text(stack_yaml(config))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


GOOD = {"models": ["qwen3-8b", "sdxl-1.0"], "dataCenter": "EU-RO-1", "budgetUsdPerHour": 2}


@pytest.mark.parametrize("fmt", ["table", "json", "markdown"])
def test_a_good_plan_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    write_stack(tmp_path, "ok", GOOD)
    code, out, err = run(
        capsys, "plan", "--stack", "ok", "--stacks-dir", str(tmp_path), "--format", fmt
    )
    assert code == 0, err
    assert "qwen3-8b" in out
    if fmt == "json":
        assert json.loads(out)["stack"] == "ok"


def test_a_plan_with_problems_exits_1_and_still_prints_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_stack(tmp_path, "over", {**GOOD, "budgetUsdPerHour": 0.01})
    code, out, err = run(
        capsys, "plan", "--stack", "over", "--stacks-dir", str(tmp_path), "--format", "json"
    )
    assert code == 1
    data = json.loads(out)  # the payload alone is on stdout
    assert [p["rule"] for p in data["problems"]] == ["over-budget"]
    assert "problem" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param("config: {frutebox-infra:models: [a\n", "not valid YAML", id="malformed"),
        pytest.param(
            stack_yaml({"budgetUsdPerHour": -1, "dataCenter": "EU-RO-1"}),
            "frutebox-infra:budgetUsdPerHour",
            id="negative-budget",
        ),
    ],
)
def test_config_errors_exit_1_with_a_message_and_no_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, expected: str
) -> None:
    if content is not None:
        (tmp_path / "Pulumi.nope.yaml").write_text(content)
    code, out, err = run(capsys, "plan", "--stack", "nope", "--stacks-dir", str(tmp_path))
    assert code == 1
    assert out == ""
    assert err.startswith("frutebox: ")
    assert expected in err
    assert "Traceback" not in err


def test_a_missing_stack_is_a_usage_error_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_stack(tmp_path, "dev", GOOD)
    code, out, err = run(capsys, "plan", "--stack", "nope", "--stacks-dir", str(tmp_path))
    assert code == EXIT_USAGE
    assert out == ""
    assert err.startswith("frutebox: ") and "Pulumi.nope.yaml" in err
    assert "dev" in err  # names the stacks that do exist
    assert "Traceback" not in err


def test_debug_shows_the_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--debug", "plan", "--stack", "nope", "--stacks-dir", str(tmp_path))
    assert code == EXIT_USAGE and "Traceback" in err


def test_a_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["plan", "--stack", "dev", "--format", "yaml"])
    assert exc.value.code == EXIT_USAGE


def test_models_lists_every_registry_model(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "models", "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert data["version"] == 1
    assert [e["id"] for e in data["models"]] == [m.id for m in real_registry().models]
    code, out, _ = run(capsys, "models")
    assert code == 0
    for m in real_registry().models:
        assert m.id in out


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_checked_in_stacks_plan_clean(stack: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "plan", "--stack", stack, "--format", "json")
    assert code == 0, out + err
    assert json.loads(out)["problems"] == []


def python_m(*argv: str) -> subprocess.CompletedProcess[str]:
    """`python -m frutebox_infra ARGV` in the checkout, without a developer's FRUTEBOX_ or HF_
    variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FRUTEBOX_", "HF_"))}
    return subprocess.run(
        [sys.executable, "-m", "frutebox_infra", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
        check=False,
    )


def test_python_m_reports_a_missing_stack_without_traceback(tmp_path: Path) -> None:
    done = python_m("plan", "--stack", "missing", "--stacks-dir", str(tmp_path))
    assert done.returncode == EXIT_USAGE
    assert done.stdout == ""
    assert "Pulumi.missing.yaml" in done.stderr
    assert "Traceback" not in done.stderr


def test_python_m_models_json_is_the_catalog() -> None:
    done = python_m("models", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["models"]) == len(real_registry().models)


COMMAND_ARGS = {
    "models": [],
    "plan": ["--stack", "dev"],
    "diff": ["--base", "main", "--stack", "dev"],
    "status": ["--stack", "dev"],
    "prices": [],
}
OFFERED = {
    "models": {"table", "json"},
    "plan": {"table", "json", "markdown"},
    "diff": {"table", "json", "markdown"},
    "status": {"table", "json", "markdown"},
    "prices": {"table", "json"},
}


@pytest.mark.parametrize("fmt", ["table", "json", "markdown"])
@pytest.mark.parametrize("command", sorted(COMMAND_ARGS))
def test_each_command_offers_exactly_its_views_formats(
    command: str, fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [command, *COMMAND_ARGS[command], "--format", fmt]
    if fmt in OFFERED[command]:
        assert cli.build_parser().parse_args(argv).format == fmt
    else:
        with pytest.raises(SystemExit) as exc:
            cli.build_parser().parse_args(argv)
        assert exc.value.code == EXIT_USAGE
        assert "invalid choice: 'markdown'" in capsys.readouterr().err
