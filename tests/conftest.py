"""Fixtures shared across the test directories."""

from __future__ import annotations

from pathlib import Path

import pytest

from frutebox_infra.toolchain import ensure_toolchain


@pytest.fixture(scope="session")
def toolchain() -> Path:
    """Builds the pinned Pulumi toolchain on first use (minutes, once per machine)."""
    return ensure_toolchain()
