"""The cyclic collector is off inside the block and restored as it was, however it ends."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from frutebox_infra import acyclic
from frutebox_infra.acyclic import cycle_collector_paused, freeze_long_lived


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


class Node:
    """An object a reference cycle can be made of, and a weak reference watch."""

    def __init__(self) -> None:
        self.other: Node | None = None


def test_what_was_made_inside_leaves_the_youngest_generation(collector: None) -> None:
    gc.enable()
    gc.collect()
    with cycle_collector_paused():
        kept = [[i] for i in range(20_000)]  # far above the youngest generation's threshold
    # In the oldest generation at once: no pass of a younger one walked them to get there.
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert id(kept) in oldest and id(kept[0]) in oldest and id(kept[-1]) in oldest
    assert gc.get_freeze_count() == 0  # nothing is left frozen


def test_a_cycle_made_inside_is_still_freed_by_a_full_pass(collector: None) -> None:
    gc.enable()
    with cycle_collector_paused():
        a, b = Node(), Node()
        a.other, b.other = b, a
        watch = weakref.ref(a)
        del a, b
    assert watch() is not None  # a cycle: only the collector frees it
    gc.collect()
    assert watch() is None


def test_objects_the_process_froze_stay_frozen(
    collector: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    gc.enable()
    monkeypatch.setattr(acyclic, "_process_froze", False)  # restored after the test
    freeze_long_lived()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with cycle_collector_paused():
            made = [[i] for i in range(1_000)]
        assert gc.get_freeze_count() == frozen  # an unfreeze would have released them
        assert len(made) == 1_000
    finally:
        gc.unfreeze()
