"""The Pulumi toolchain works offline: pinned CLI, Python host, command provider.

These tests build the toolchain when it is missing (tools/setup-toolchain, minutes
the first time) rather than skip: a broken toolchain must fail here, not later. Those
that run it carry the `engine` marker; the hermetic-environment tests are fast.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from frutebox_infra.commands.toolchain import (
    COMMAND_VERSION,
    LOCAL_PASSPHRASE,
    PULUMI_VERSION,
    hermetic_env,
    pulumi_version,
    tools_bin,
)
from tests.factories import ROOT


def _venv() -> Path:
    """The interpreter environment the throwaway programs run in (has pulumi installed)."""
    if sys.prefix != sys.base_prefix:
        return Path(sys.prefix)
    return ROOT / ".venv"


def _env(toolchain: Path, backend: Path) -> dict[str, str]:
    env = hermetic_env(backend_dir=backend)
    if not f":{env['PATH']}:".startswith(f":{toolchain}:"):
        env["PATH"] = f"{toolchain}:{env['PATH']}"
    return env


def _write_program(project: Path, body: str) -> None:
    project.mkdir(parents=True, exist_ok=True)
    (project / "Pulumi.yaml").write_text(
        textwrap.dedent(
            f"""\
            name: toolchain-check
            runtime:
              name: python
              options:
                toolchain: pip
                virtualenv: {_venv()}
            """
        )
    )
    (project / "__main__.py").write_text(textwrap.dedent(body))
    # Python calls a compiled module current by the source's size and whole-second mtime, so a
    # program rewritten to the same size within a second would run its old bytecode (the test
    # run writes bytecode): the next run compiles the program it was given.
    shutil.rmtree(project / "__pycache__", ignore_errors=True)


def _pulumi(
    toolchain: Path, env: Mapping[str, str], cwd: Path, *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(toolchain / "pulumi"), *args, "--non-interactive"],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if check and proc.returncode != 0:
        pytest.fail(f"pulumi {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.mark.engine
def test_pulumi_version_is_the_pinned_plain_semver(toolchain: Path) -> None:
    version = pulumi_version(toolchain / "pulumi")
    assert re.fullmatch(r"v\d+\.\d+\.\d+", version), version
    assert version == PULUMI_VERSION


@pytest.mark.engine
def test_automation_api_accepts_the_cli(toolchain: Path, tmp_path: Path) -> None:
    from pulumi import automation as auto
    from semver import VersionInfo

    # PulumiCommand looks for <root>/bin/pulumi.
    root = tmp_path / "cli"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "pulumi").symlink_to(toolchain / "pulumi")
    env = _env(toolchain, tmp_path / "state")
    assert "PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK" not in env
    cmd = auto.PulumiCommand(root=str(root), version=VersionInfo.parse("3.272.0"))
    assert cmd.version == VersionInfo.parse(PULUMI_VERSION.removeprefix("v"))

    project = tmp_path / "project"
    _write_program(project, "import pulumi\npulumi.export('answer', 42)\n")
    stack = auto.create_stack(
        "dev",
        work_dir=str(project),
        opts=auto.LocalWorkspaceOptions(pulumi_command=cmd, env_vars=env),
    )
    assert stack.workspace.pulumi_version == PULUMI_VERSION.removeprefix("v")
    result = stack.preview()
    assert result.change_summary == {auto.OpType.CREATE: 1}


@pytest.mark.engine
def test_preview_of_a_command_resource_runs_offline(toolchain: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    marker = tmp_path / "ran"
    _write_program(
        project,
        f"""\
        import pulumi
        from pulumi_command import local

        cmd = local.Command("hello", create="echo hi > {marker}")
        pulumi.export("out", cmd.stdout)
        """,
    )
    env = _env(toolchain, tmp_path / "state")
    _pulumi(toolchain, env, project, "stack", "init", "dev")
    proc = _pulumi(toolchain, env, project, "preview", "--json")
    preview: dict[str, Any] = json.loads(proc.stdout)

    commands = [s for s in preview["steps"] if "::command:local:Command::" in s["urn"]]
    assert [(s["op"], s["urn"].rsplit("::", 1)[-1]) for s in commands] == [("create", "hello")]
    problems = [d for d in preview.get("diagnostics", []) if d["severity"] in ("error", "warning")]
    assert problems == []
    assert not marker.exists(), "preview must not run the command"


@pytest.mark.engine
def test_command_provider_lifecycle(toolchain: Path, tmp_path: Path) -> None:
    """up runs create; an input change runs update; triggers replace; destroy runs delete."""
    project = tmp_path / "project"
    log = tmp_path / "log"
    program = """\
        import pulumi
        from pulumi_command import local

        cmd = local.Command(
            "hello",
            create="echo created-{n} | tee -a {log}",
            update="echo updated-{n}-prev=$PULUMI_COMMAND_STDOUT | tee -a {log}",
            delete="echo deleted-prev=$PULUMI_COMMAND_STDOUT >> {log}",
            triggers=[{trigger}],
        )
        # A secret input does not make stdout secret (upstream's rule, whichever provider
        # setup picked); a program asks for it with additional_secret_outputs.
        plain = local.Command("plain", create="echo p", stdin=pulumi.Output.secret("x"))
        marked = local.Command(
            "marked",
            create="echo s",
            opts=pulumi.ResourceOptions(additional_secret_outputs=["stdout"]),
        )
        pulumi.export("out", cmd.stdout)
        pulumi.export("plain_out", plain.stdout)
        pulumi.export("marked_out", marked.stdout)
        """
    env = _env(toolchain, tmp_path / "state")

    def up(n: int, trigger: int) -> dict[str, Any]:
        _write_program(project, program.format(n=n, trigger=trigger, log=log))
        _pulumi(toolchain, env, project, "up", "--yes", "--skip-preview")
        out = _pulumi(toolchain, env, project, "stack", "output", "--json").stdout
        outputs: dict[str, Any] = json.loads(out)
        return outputs

    _write_program(project, program.format(n=1, trigger=1, log=log))
    _pulumi(toolchain, env, project, "stack", "init", "dev")
    first = up(1, 1)
    assert first["out"] == "created-1"
    assert first["plain_out"] == "p"
    assert first["marked_out"] == "[secret]"
    assert up(2, 1)["out"] == "updated-2-prev=created-1"
    # A triggers change replaces: create-before-delete, and delete sees the old stdout.
    assert up(3, 2)["out"] == "created-3"
    _pulumi(toolchain, env, project, "destroy", "--yes", "--skip-preview")
    assert log.read_text().splitlines() == [
        "created-1",
        "updated-2-prev=created-1",
        "created-3",
        "deleted-prev=updated-2-prev=created-1",
        "deleted-prev=created-3",
    ]


@pytest.mark.engine
def test_pulumi_import_adopts_a_command(toolchain: Path, tmp_path: Path) -> None:
    """Upstream's Read hands the state back as is: the import records the resource and
    prints the Python code that declares it (the provider's schema, the host's codegen)."""
    project = tmp_path / "project"
    _write_program(project, "import pulumi\nfrom pulumi_command import local\n")
    env = _env(toolchain, tmp_path / "state")
    _pulumi(toolchain, env, project, "stack", "init", "dev")
    imported = _pulumi(toolchain, env, project, "import", "command:local:Command", "adopted",
                       "cmd-1234", "--yes")  # fmt: skip
    assert 'command.local.Command("adopted"' in imported.stdout, imported.stdout
    exported = json.loads(_pulumi(toolchain, env, project, "stack", "export").stdout)
    [adopted] = [r for r in exported["deployment"]["resources"]
                 if r["type"] == "command:local:Command"]  # fmt: skip
    assert adopted["id"] == "cmd-1234" and adopted["urn"].endswith("::adopted")


@pytest.mark.engine
def test_second_setup_is_a_no_op(toolchain: Path) -> None:
    script = ROOT / "tools" / "setup-toolchain"
    ours = toolchain == tools_bin()
    stamp = ROOT / ".tools" / "toolchain.stamp"
    watched = [stamp, toolchain / "pulumi", toolchain / "pulumi-language-python"] if ours else []
    before = {p: p.stat().st_mtime_ns for p in watched}
    proc = subprocess.run([str(script)], capture_output=True, text=True, check=True, timeout=600)
    assert proc.stdout.strip().splitlines()[-1] == str(toolchain)
    assert "building" not in proc.stderr
    assert {p: p.stat().st_mtime_ns for p in watched} == before
    if ours:
        plugin = (
            ROOT / ".tools" / "pulumi-home" / "plugins" / f"resource-command-v{COMMAND_VERSION}"
        )
        assert (plugin / "pulumi-resource-command").exists()


# --- the hermetic environment: tools/env.sh's rules, as Python reads them ---------------


@pytest.mark.parametrize(
    "scenario",
    [
        {},
        {"PULUMI_BACKEND_URL": "s3://team-bucket/state"},
        {"PULUMI_BACKEND_URL": "https://api.example.invalid"},
        {"PULUMI_CONFIG_PASSPHRASE": "mine"},
        {"PULUMI_CONFIG_PASSPHRASE": ""},
        {"PULUMI_CONFIG_PASSPHRASE_FILE": "/dev/null"},
        {"PULUMI_BACKEND_URL": "file:///tmp/elsewhere"},
        {"PULUMI_BACKEND_URL": f"file://{ROOT}/.pulumi-state/"},
        {"PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK": "true", "PULUMI_HOME": "/tmp/user-home"},
    ],
    ids=[
        "defaults",
        "team-s3",
        "team-cloud",
        "own-passphrase",
        "empty-passphrase",
        "passphrase-file",
        "file-outside-checkout",
        "file-inside-checkout",
        "skip-check-unset",
    ],
)
def test_hermetic_env_follows_env_sh_rules(scenario: dict[str, str], tmp_path: Path) -> None:
    base = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path), **scenario}
    from_python = hermetic_env(base)

    backend = from_python["PULUMI_BACKEND_URL"]
    if "PULUMI_BACKEND_URL" in scenario:
        assert backend == scenario["PULUMI_BACKEND_URL"]
    else:
        assert backend == f"file://{ROOT}/.pulumi-state"
    in_checkout = backend.startswith(f"file://{ROOT}")
    passphrase_set = {"PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE"} & set(scenario)
    expected = scenario.get("PULUMI_CONFIG_PASSPHRASE")
    if in_checkout and not passphrase_set:
        expected = LOCAL_PASSPHRASE
    assert from_python.get("PULUMI_CONFIG_PASSPHRASE") == expected
    assert from_python["PULUMI_SKIP_UPDATE_CHECK"] == "true"
    assert from_python["PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION"] == "true"
    assert "PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK" not in from_python
    if (tools_bin() / "pulumi").exists():
        assert from_python["PATH"].split(":")[0] == str(tools_bin())
        assert from_python["PULUMI_HOME"] == str(ROOT / ".tools" / "pulumi-home")
    else:
        assert from_python["PATH"] == base["PATH"]
        assert from_python.get("PULUMI_HOME") == scenario.get("PULUMI_HOME")


def test_hermetic_env_changes_only_what_env_sh_decides(tmp_path: Path) -> None:
    """Everything else passes through untouched; bash's own variables do not leak in."""
    base = {"PATH": os.defpath, "HOME": str(tmp_path), "ODD": "a=b\nc \u00e9", "PWD": "/x"}
    env = hermetic_env(base)
    assert (env["ODD"], env["HOME"], env["PWD"]) == (base["ODD"], base["HOME"], "/x")
    assert "SHLVL" not in env and "_" not in env and "OLDPWD" not in env
    decided = {
        "PULUMI_BACKEND_URL",
        "PULUMI_CONFIG_PASSPHRASE",
        "PULUMI_SKIP_UPDATE_CHECK",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION",
        "PULUMI_HOME",
        "FRUTEBOX_PYTHON",
    }
    assert set(env) - set(base) <= decided


def test_hermetic_env_backend_dir_is_a_throwaway_local_backend(tmp_path: Path) -> None:
    env = hermetic_env({"PATH": os.defpath}, backend_dir=tmp_path / "state")
    assert env["PULUMI_BACKEND_URL"] == f"file://{tmp_path.resolve()}/state"
    assert (tmp_path / "state").is_dir()
    assert env["PULUMI_CONFIG_PASSPHRASE"] == LOCAL_PASSPHRASE
    kept = hermetic_env(
        {"PATH": os.defpath, "PULUMI_CONFIG_PASSPHRASE": "mine"}, backend_dir=tmp_path / "s2"
    )
    assert kept["PULUMI_CONFIG_PASSPHRASE"] == "mine"
