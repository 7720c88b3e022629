"""Where the checkout's files are: the package is always imported from the checkout it is in."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The checkout: registry/, stacks/, .tools/ and .pulumi-state/ are relative to it."""
REGISTRY_DIR = REPO_ROOT / "registry"
STACKS_DIR = REPO_ROOT / "stacks"
TOOLS_DIR = REPO_ROOT / ".tools"
"""The git-ignored toolchain tools/setup-toolchain builds."""
