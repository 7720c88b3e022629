"""Notice that whoever started the deploy step is gone, and cancel the step.

Upstream's command provider cancels an operation by SIGKILLing the `/bin/sh` it started;
the shell's child, this step, gets no signal and would run on, creating and keeping a pod
whose result the engine throws away. So the step asks Linux to signal it when its parent
dies (PR_SET_PDEATHSIG), and on every platform a thread polls for the same thing: the
parent id changed (the shell died and the step was re-parented), or nobody reads the
step's output any more (the provider, and so the engine, is gone). Either sends this
process SIGTERM, which `cancellable` turns into Cancelled: the step stops waiting and
terminates what this run created.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import stat
import sys
import threading
from collections.abc import Callable, Iterator

PR_SET_PDEATHSIG = 1
"""From <linux/prctl.h>."""

POLL_INTERVAL_S = 0.5


def _set_parent_death_signal(sig: int) -> bool:
    """Ask Linux to send `sig` when the parent dies (0 clears it); False elsewhere."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def unread_pipe(fd: int) -> bool:
    """True when `fd` is a pipe whose reading end is closed (writes would fail)."""
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return False
    except OSError:
        return False
    if not hasattr(select, "poll"):
        return False
    poller = select.poll()
    poller.register(fd, 0)  # POLLERR and POLLHUP are reported whatever is asked for
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


class ParentWatch:
    """Polls for the step's starter being gone; `reason()` says why, or None."""

    def __init__(self, on_gone: Callable[[str], None], interval_s: float = POLL_INTERVAL_S):
        self.parent = os.getppid()
        self._on_gone = on_gone
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="parent-watch", daemon=True)

    def reason(self) -> str | None:
        if os.getppid() != self.parent:
            return f"the process that started this step (pid {self.parent}) is gone"
        if unread_pipe(1) or unread_pipe(2):
            _silence_output()
            return "nobody reads this step's output any more"
        return None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop polling; returns once the thread is done, so no signal comes after."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            why = self.reason()
            if why is not None and not self._stop.is_set():
                self._on_gone(why)
                return


def _silence_output() -> None:
    """Point stdout/stderr at /dev/null: the cleanup still logs, and must not die of EPIPE."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in (1, 2):
            if unread_pipe(fd):
                os.dup2(devnull, fd)
    finally:
        os.close(devnull)


@contextlib.contextmanager
def watching_parent(sig: signal.Signals = signal.SIGTERM) -> Iterator[ParentWatch]:
    """While inside: `sig` arrives when the parent dies or stops reading our output."""

    def gone(_why: str) -> None:
        os.kill(os.getpid(), sig)

    watch = ParentWatch(gone)
    armed = _set_parent_death_signal(sig)
    # A parent that died before the signal was armed is caught by the first poll.
    watch.start()
    try:
        yield watch
    finally:
        watch.stop()
        if armed:
            _set_parent_death_signal(0)
