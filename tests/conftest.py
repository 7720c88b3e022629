"""Fixtures shared across the test directories."""

from __future__ import annotations

from pathlib import Path

import pytest

from frutebox_infra.toolchain import ensure_toolchain


@pytest.fixture(scope="session")
def toolchain() -> Path:
    """Builds the pinned Pulumi toolchain on first use (minutes, once per machine)."""
    return ensure_toolchain()


ENGINE = "engine"
"""The one marker of tests that need the real Pulumi engine: `pytest -m "not engine"` skips
them for the fast loop."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that asks for the toolchain must say so with the marker, or the run stops."""
    unmarked = [
        item.nodeid
        for item in items
        if "toolchain" in getattr(item, "fixturenames", ())
        and item.get_closest_marker(ENGINE) is None
    ]
    if unmarked:
        raise pytest.UsageError(
            f"these tests use the Pulumi toolchain but are not marked `{ENGINE}`"
            f" (add `pytestmark = pytest.mark.{ENGINE}` to the module): {', '.join(unmarked)}"
        )
