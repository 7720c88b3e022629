"""Fixtures shared across the test directories."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

import pytest

from frutebox_infra.emulator.catalog import Catalog, Stock
from frutebox_infra.emulator.hub import Hub
from frutebox_infra.emulator.openapi import OpenApi
from frutebox_infra.emulator.realism import Realism
from frutebox_infra.emulator.server import RunningEmulator, start
from frutebox_infra.registry_files import load_registry
from frutebox_infra.toolchain import ensure_toolchain


@pytest.fixture(scope="session")
def toolchain() -> Path:
    """Builds the pinned Pulumi toolchain on first use (minutes, once per machine)."""
    return ensure_toolchain()


@cache
def emulator_parts() -> tuple[Catalog, Hub, OpenApi]:
    """What every emulator of a session reads and none changes, built once: the registry's
    catalog (frozen), its hub (each account works on a deep copy) and the API document's
    schemas, whose validators compile on first use."""
    return Catalog.builtin(), Hub.from_registry(load_registry()), OpenApi()


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
