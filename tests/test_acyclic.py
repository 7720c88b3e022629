"""The cyclic collector is off inside the block and restored as it was, however it ends."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from frutebox_infra.acyclic import cycle_collector_paused


@pytest.fixture
def collector() -> Iterator[None]:
    was = gc.isenabled()
    yield
    gc.enable() if was else gc.disable()


@pytest.mark.parametrize("enabled", [pytest.param(True, id="on"), pytest.param(False, id="off")])
def test_paused_inside_and_restored_after(collector: None, enabled: bool) -> None:
    gc.enable() if enabled else gc.disable()
    with cycle_collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled() is enabled


def test_restored_when_the_block_raises(collector: None) -> None:
    gc.enable()
    with pytest.raises(ValueError), cycle_collector_paused():
        raise ValueError("boom")
    assert gc.isenabled()


def test_a_decorated_function_runs_paused(collector: None) -> None:
    gc.enable()

    @cycle_collector_paused()
    def inside() -> bool:
        return gc.isenabled()

    assert inside() is False
    assert gc.isenabled()
