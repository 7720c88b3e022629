"""The Pulumi toolchain facts, in Python, for tests and bench scripts.

Why: they run the pulumi CLI as a subprocess and need exactly the environment
that ``source tools/env.sh`` gives a developer, and a toolchain that exists.
This module mirrors tools/env.sh (tests/test_toolchain.py checks that the two
agree) and fronts tools/setup-toolchain, which finds or builds the pinned
toolchain. It does not import pulumi, so it is cheap to import anywhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from frutebox_infra.errors import FruteboxError
from frutebox_infra.paths import REPO_ROOT, STACKS_DIR, TOOLS_DIR

#: The pinned CLI version; tools/setup-toolchain and tools/pulumi/go.mod pin the same.
PULUMI_VERSION = "v3.274.1"
#: The command provider version, matching the pulumi-command Python package.
COMMAND_VERSION = "1.2.1"
#: The documented passphrase of the local, in-checkout file backend.
LOCAL_PASSPHRASE = "frutebox-local"


class ToolchainError(FruteboxError):
    """The pinned Pulumi toolchain could not be found or built."""


def tools_bin() -> Path:
    """Where tools/setup-toolchain puts the binaries it builds (git-ignored)."""
    return TOOLS_DIR / "bin"


def hermetic_env(
    base: Mapping[str, str] | None = None, *, backend_dir: Path | None = None
) -> dict[str, str]:
    """The environment ``source tools/env.sh`` would produce from ``base``.

    ``base`` defaults to the current environment. The rules are env.sh's: our
    built toolchain first on PATH with its own PULUMI_HOME; a user's
    PULUMI_BACKEND_URL is kept (team backends work unchanged), else the local
    file backend in the checkout; the local default passphrase only for a
    file backend inside the checkout when the user set no passphrase (nor a
    passphrase file); no update checks, no plugin downloads, and the Automation
    API's real version check. ``backend_dir`` (tests' throwaway backends)
    replaces the backend with ``file://<backend_dir>`` and, being local and
    throwaway like the in-checkout backend, gets the same passphrase default.
    """
    env = dict(os.environ if base is None else base)
    root = REPO_ROOT

    bin_dir = tools_bin()
    if os.access(bin_dir / "pulumi", os.X_OK):
        path = env.get("PATH", "")
        if not f":{path}:".startswith(f":{bin_dir}:"):
            env["PATH"] = f"{bin_dir}:{path}" if path else str(bin_dir)
        env["PULUMI_HOME"] = str(TOOLS_DIR / "pulumi-home")

    throwaway = False
    if backend_dir is not None:
        backend_dir = backend_dir.resolve()
        backend_dir.mkdir(parents=True, exist_ok=True)
        env["PULUMI_BACKEND_URL"] = f"file://{backend_dir}"
        throwaway = True
    elif not env.get("PULUMI_BACKEND_URL"):
        (root / ".pulumi-state").mkdir(exist_ok=True)
        env["PULUMI_BACKEND_URL"] = f"file://{root}/.pulumi-state"

    backend = env["PULUMI_BACKEND_URL"]
    if (
        backend.startswith("file://")
        and "PULUMI_CONFIG_PASSPHRASE" not in env
        and "PULUMI_CONFIG_PASSPHRASE_FILE" not in env
    ):
        path = backend.removeprefix("file://").removesuffix("/")
        if throwaway or path == str(root) or path.startswith(f"{root}/"):
            env["PULUMI_CONFIG_PASSPHRASE"] = LOCAL_PASSPHRASE

    env["PULUMI_SKIP_UPDATE_CHECK"] = "true"
    env["PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION"] = "true"
    env.pop("PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK", None)

    venv_python = root / ".venv" / "bin" / "python"
    if os.access(venv_python, os.X_OK):
        env["FRUTEBOX_PYTHON"] = str(venv_python)
    return env


def ensure_toolchain() -> Path:
    """The directory holding the pinned ``pulumi``, building it first if needed.

    Runs tools/setup-toolchain, which returns at once when the toolchain is
    already built (or a suitable pulumi is on PATH) and otherwise builds it
    from Go modules, printing progress on stderr (minutes, the first time).
    """
    script = REPO_ROOT / "tools" / "setup-toolchain"
    try:
        proc = subprocess.run([str(script)], stdout=subprocess.PIPE, text=True, check=False)
    except OSError as exc:
        raise ToolchainError(f"cannot run {script}: {exc}") from exc
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise ToolchainError(
            f"{script} failed with exit code {proc.returncode}; its messages are above"
        )
    bin_dir = Path(lines[-1])
    if not os.access(bin_dir / "pulumi", os.X_OK):
        raise ToolchainError(f"{script} reported {bin_dir}, which holds no pulumi")
    return bin_dir


def pulumi_version(pulumi: Path | str | None = None, env: Mapping[str, str] | None = None) -> str:
    """What ``pulumi version`` prints (e.g. ``v3.274.1``), run in the hermetic environment.

    ``pulumi`` defaults to the one in our built toolchain, else the one on PATH.
    """
    if pulumi is None:
        built = tools_bin() / "pulumi"
        pulumi = built if os.access(built, os.X_OK) else "pulumi"
    try:
        proc = subprocess.run(
            [str(pulumi), "version"],
            env=hermetic_env(env),
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolchainError(f"cannot run {pulumi} version: {exc}") from exc
    if proc.returncode != 0:
        raise ToolchainError(f"{pulumi} version failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


PROJECT_FILES = ("Pulumi.yaml", "__main__.py")


def copy_project(dest: Path) -> Path:
    """The checkout's Pulumi project (program and stacks) copied to `dest`, run on the
    checkout's .venv: tests and bench scripts preview and deploy a copy, never the work tree."""
    dest.mkdir(parents=True)
    for name in PROJECT_FILES:
        shutil.copy(REPO_ROOT / name, dest / name)
    shutil.copytree(STACKS_DIR, dest / "stacks")
    use_checkout_venv(dest / "Pulumi.yaml")
    return dest


def use_checkout_venv(pulumi_yaml: Path) -> None:
    """Point a Pulumi.yaml's Python runtime at the checkout's .venv, which has this package."""
    doc: dict[str, Any] = yaml.safe_load(pulumi_yaml.read_text())
    doc["runtime"]["options"]["virtualenv"] = str(REPO_ROOT / ".venv")
    pulumi_yaml.write_text(yaml.safe_dump(doc, sort_keys=False))


def sandbox_env(backend_dir: Path) -> dict[str, str]:
    """`hermetic_env` on a throwaway backend, without the caller's RunPod or HF credentials."""
    env = hermetic_env(backend_dir=backend_dir)
    for name in ("RUNPOD_API_KEY", "HF_TOKEN", "FRUTEBOX_HF_TOKEN"):
        env.pop(name, None)
    return env
