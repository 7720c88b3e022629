"""Fixtures shared across the test directories."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from frutebox_infra.emulator.catalog import Stock
    from frutebox_infra.emulator.server import RunningEmulator

# The emulator and the toolchain are imported by the fixtures that use them: this module is
# also imported by xdist's controller, which runs no test and starts the workers after it.


@pytest.fixture(scope="session")
def toolchain() -> Path:
    """Builds the pinned Pulumi toolchain on first use (minutes, once per machine)."""
    from frutebox_infra.commands.toolchain import ensure_toolchain

    return ensure_toolchain()


@pytest.fixture
def emulator_factory() -> Iterator[Callable[..., RunningEmulator]]:
    """Starts emulators on loopback (optionally with `stock`) and stops them after the test."""
    from frutebox_infra.emulator.realism import Realism
    from frutebox_infra.emulator.server import start
    from tests.factories import emulator_parts

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

FAST_LOOP = f"not {ENGINE}"
"""The fast loop's marker expression, under which `tests/e2e` (all engine) is not imported."""

E2E = Path(__file__).parent / "e2e"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """`-m "not engine"` would deselect every test of `tests/e2e` after importing them all, in
    every worker; the directory is left out instead (its tests must all be marked, below)."""
    if collection_path == E2E and config.option.markexpr.strip() == FAST_LOOP:
        return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that asks for the toolchain, or lives in `tests/e2e`, must say so with the marker,
    or the run stops."""
    unmarked = [
        item.nodeid
        for item in items
        if ("toolchain" in getattr(item, "fixturenames", ()) or E2E in item.path.parents)
        and item.get_closest_marker(ENGINE) is None
    ]
    if unmarked:
        raise pytest.UsageError(
            f"these tests use the Pulumi toolchain or live in tests/e2e but are not marked"
            f" `{ENGINE}` (add `pytestmark = pytest.mark.{ENGINE}` to the module):"
            f" {', '.join(unmarked)}"
        )
