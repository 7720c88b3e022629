"""The Pulumi toolchain facts, in Python, for tests and bench scripts.

Why: they run the pulumi CLI as a subprocess and need exactly the environment
that ``source tools/env.sh`` gives a developer, and a toolchain that exists.
This module reads that environment from tools/env.sh itself and fronts
tools/setup-toolchain, which finds or builds the pinned toolchain. It does not
import pulumi, so it is cheap to import anywhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from frutebox_infra.plumbing.errors import FruteboxError
from frutebox_infra.plumbing.paths import REPO_ROOT, STACKS_DIR, TOOLS_DIR
from frutebox_infra.stack.endpoints import SECRET_ENV

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


ENV_SH = REPO_ROOT / "tools" / "env.sh"
"""The one implementation of the hermetic environment's rules (its header lists them)."""
_BASH_OWN = ("PWD", "OLDPWD", "SHLVL", "_")
"""Variables bash sets for itself: not env.sh's decisions, so the caller's values stand."""


def hermetic_env(
    base: Mapping[str, str] | None = None, *, backend_dir: Path | None = None
) -> dict[str, str]:
    """The environment ``source tools/env.sh`` produces from ``base`` (default: this process's).

    Runs env.sh in bash and reads the result rather than re-implementing it: env.sh must work
    in a bare shell before any .venv exists (tools/dev and developers source it), so it is the
    implementation and Python is its reader; the two can never drift apart. ``backend_dir``
    (tests' and bench scripts' throwaway backends) selects ``file://<backend_dir>`` and, being
    local and throwaway like the in-checkout backend, the same default passphrase.
    """
    env = dict(os.environ if base is None else base)
    if backend_dir is not None:
        backend_dir = backend_dir.resolve()
        backend_dir.mkdir(parents=True, exist_ok=True)
        env["PULUMI_BACKEND_URL"] = f"file://{backend_dir}"
        if "PULUMI_CONFIG_PASSPHRASE" not in env and "PULUMI_CONFIG_PASSPHRASE_FILE" not in env:
            env["PULUMI_CONFIG_PASSPHRASE"] = LOCAL_PASSPHRASE
    # `env -0`, not a Python child: Python adds LC_CTYPE to its own environment at start-up.
    bash, dump = shutil.which("bash") or "bash", shutil.which("env") or "env"
    argv = [bash, "-c", 'source "$1" && exec "$2" -0', "bash", str(ENV_SH), dump]
    proc = _run(argv, env, what=f"bash sourcing {ENV_SH}", timeout=60)
    pairs = (os.fsdecode(item).partition("=") for item in proc.stdout.split(b"\0") if item)
    result = {name: value for name, _, value in pairs}
    for name in _BASH_OWN:
        result.pop(name, None)
        if name in env:
            result[name] = env[name]
    return result


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
    proc = _run([str(pulumi), "version"], hermetic_env(env), what=f"{pulumi} version", timeout=120)
    return proc.stdout.decode().strip()


def _run(
    argv: list[str], env: Mapping[str, str], *, what: str, timeout: float
) -> subprocess.CompletedProcess[bytes]:
    """Run a toolchain command: not starting, not finishing or failing is a ToolchainError."""
    try:
        proc = subprocess.run(
            argv, env=dict(env), capture_output=True, check=False, timeout=timeout
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolchainError(f"cannot run {what}: {exc}") from exc
    if proc.returncode != 0:
        raise ToolchainError(f"{what} failed: {proc.stderr.decode().strip()}")
    return proc


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
    for name in (*SECRET_ENV, "HF_TOKEN", "FRUTEBOX_HF_TOKEN"):
        env.pop(name, None)
    return env
