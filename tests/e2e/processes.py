"""Which processes a `pulumi` run left behind, found by a marker in their environment.

Every process the CLI starts (language host, program, providers, their commands) inherits
its environment, so a unique variable names them all, whatever re-parenting happened.
"""

from __future__ import annotations

import os
import uuid
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
