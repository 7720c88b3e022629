"""Fixtures for end-to-end tests with the real Pulumi engine on throwaway local backends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.project import PulumiProject


@pytest.fixture
def project(tmp_path: Path, toolchain: Path) -> Iterator[PulumiProject]:
    yield PulumiProject.create(tmp_path)
