"""Work that builds many objects and no reference cycles, run without the cyclic collector."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def cycle_collector_paused() -> Iterator[None]:
    """Planning and rendering a plan make tens of objects per model, none of them in a
    reference cycle, and keep them until they return: the cyclic collector's full passes over
    that growing heap free nothing and cost a third of a 10,000-model plan. Paused meanwhile,
    then restored as it was; also a decorator (`@cycle_collector_paused()`).

    On the way out the objects made meanwhile join the oldest generation (a freeze and an
    unfreeze: two list splices) instead of waiting in the youngest, whose next pass would
    walk every one of them to free nothing; a cycle among them is still freed, by the next
    full pass. Left as they are when the process froze objects of its own (`gc.freeze`),
    which an unfreeze would release."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()
