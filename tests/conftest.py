"""Fixtures shared across the test directories."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from frutebox_infra.emulator.catalog import Stock
from frutebox_infra.emulator.realism import Realism
from frutebox_infra.emulator.server import RunningEmulator, start
from frutebox_infra.toolchain import ensure_toolchain
from tests.factories import emulator_parts


@pytest.fixture(scope="session")
def toolchain() -> Path:
    """Builds the pinned Pulumi toolchain on first use (minutes, once per machine)."""
    return ensure_toolchain()


@pytest.fixture
def emulator_factory() -> Iterator[Callable[..., RunningEmulator]]:
    """Starts emulators on loopback (optionally with `stock`) and stops them after the test."""
    started: list[RunningEmulator] = []
    catalog, hub, openapi = emulator_parts()

    def make(stock: Stock | None = None) -> RunningEmulator:
        # Unit tests use the fast account; tests/e2e run the realistic one.
        running = start(
            host="127.0.0.1", port=0, stock=stock, catalog=catalog, realism=Realism.fast(),
            hub=hub, openapi=openapi,
        )  # fmt: skip
        started.append(running)
        return running

    yield make
    for running in started:
        running.stop()


@pytest.fixture
def emulator(emulator_factory: Callable[..., RunningEmulator]) -> RunningEmulator:
    return emulator_factory()


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
