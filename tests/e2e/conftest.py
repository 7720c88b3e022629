"""Fixtures for end-to-end tests with the real Pulumi engine on throwaway local backends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from frutebox_infra.toolchain import ensure_toolchain
from tests.e2e.project import PulumiProject


@pytest.fixture(scope="session")
def toolchain() -> Path:
    """Builds the pinned Pulumi toolchain on first use (minutes, once per machine)."""
    return ensure_toolchain()


@pytest.fixture
def project(tmp_path: Path, toolchain: Path) -> Iterator[PulumiProject]:
    yield PulumiProject.create(tmp_path)
