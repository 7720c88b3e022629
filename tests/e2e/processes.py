"""Which processes a `pulumi` run left behind, found by a marker in their environment.

Every process the CLI starts (language host, program, providers, their commands) inherits
its environment, so a unique variable names them all, whatever re-parenting happened.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

MARKER = "FRUTEBOX_TEST_RUN"


def new_marker() -> dict[str, str]:
    return {MARKER: uuid.uuid4().hex}


def survivors(marker: dict[str, str]) -> list[str]:
    """Command lines of live (not zombie) processes carrying `marker`, other than this one."""
    needle = f"{MARKER}={marker[MARKER]}".encode()
    found: list[str] = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if needle not in (proc / "environ").read_bytes().split(b"\0"):
                continue
            if "State:\tZ" in (proc / "status").read_text():
                continue
            found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip())
        except OSError:
            continue
    return found


def wait_for(condition: str, check: Callable[[], object], timeout_s: float = 120) -> None:
    """Poll `check` until it is true; `condition` names what timed out."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {condition}"
        time.sleep(0.1)


def gone_within(marker: dict[str, str], timeout_s: float) -> list[str]:
    """What still runs `timeout_s` after the CLI exited (the host's grace included)."""
    deadline = time.monotonic() + timeout_s
    while (left := survivors(marker)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left
