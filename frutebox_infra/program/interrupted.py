"""The Pulumi program's answer to the language host's SIGINT: one line, no traceback.

Upstream Python hosts (since v3.229) interrupt the program whenever the engine aborts an
update — a resource failed, or the user pressed Ctrl-C. By then the program body has long
run and the SDK is waiting on the engine, so Python's default KeyboardInterrupt would print
some 70 lines of asyncio traceback under the real error. The engine has already said what
went wrong; the program only says that it stopped.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType
from typing import TextIO

BAIL_EXIT_CODE = 32
"""What the SDK's exec script exits with after it has shown its error: the host then adds
no "Program exited with non-zero exit code" of its own."""

MESSAGE = "frutebox-infra: the Pulumi engine stopped the update; the program stopped with it"


def exit_quietly_on_interrupt(stream: TextIO | None = None) -> None:
    """Make SIGINT print MESSAGE and end the program at once."""
    out = stream or sys.stderr

    def stop(signum: int, frame: FrameType | None) -> None:
        try:
            out.write(MESSAGE + "\n")
            out.flush()
        finally:
            # Not sys.exit: SystemExit raised inside the SDK's event loop is a traceback too.
            os._exit(BAIL_EXIT_CODE)

    signal.signal(signal.SIGINT, stop)
