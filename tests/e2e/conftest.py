"""Fixtures for end-to-end tests with the real Pulumi engine on throwaway local backends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.deployment import Deployment
from tests.e2e.project import PulumiProject


@pytest.fixture
def project(tmp_path: Path, toolchain: Path) -> Iterator[PulumiProject]:
    yield PulumiProject.create(tmp_path)


@pytest.fixture
def deployment(project: PulumiProject) -> Iterator[Deployment]:
    """The project deploying against a fresh emulator, stopped afterwards."""
    running = Deployment.start(project)
    yield running
    running.stop()
