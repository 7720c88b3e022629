"""Work that builds many objects and no reference cycles, run without the cyclic collector."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_process_froze = False
"""Whether `freeze_long_lived` ran: `gc.get_freeze_count()` would say so too, but it counts
by walking every frozen object (about 4 ms after `import pulumi` on a 2-core machine), too
dear to ask on the way out of every paused block."""


def freeze_long_lived() -> None:
    """Freeze everything alive now (a program's imports, which live until it exits): the
    collector's full passes then skip it instead of walking it again and again."""
    global _process_froze
    gc.freeze()
    _process_froze = True


@contextmanager
def cycle_collector_paused() -> Iterator[None]:
    """Planning and rendering a plan make tens of objects per model, none of them in a
    reference cycle, and keep them until they return: the cyclic collector's full passes over
    that growing heap free nothing and cost a third of a 10,000-model plan. Paused meanwhile,
    then restored as it was; also a decorator (`@cycle_collector_paused()`).

    On the way out the objects made meanwhile join the oldest generation (a freeze and an
    unfreeze: two list splices) instead of waiting in the youngest, whose next pass would
    walk every one of them to free nothing; a cycle among them is still freed, by the next
    full pass. Left as they are when the process froze objects of its own
    (`freeze_long_lived`), which an unfreeze would release."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if not _process_froze:
                gc.freeze()
                gc.unfreeze()
            gc.enable()
