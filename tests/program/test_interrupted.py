"""SIGINT to the program: one line and the bail exit code, no traceback."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from frutebox_infra.program.interrupted import BAIL_EXIT_CODE, MESSAGE
from tests.factories import ROOT

PROGRAM = """
import asyncio, sys
from frutebox_infra.program.interrupted import exit_quietly_on_interrupt
exit_quietly_on_interrupt()
async def wait_for_engine():
    print("ready", flush=True)
    await asyncio.sleep(60)
asyncio.run(wait_for_engine())
"""


def test_sigint_while_waiting_on_the_engine_is_one_line() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", PROGRAM],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == BAIL_EXIT_CODE
    assert err == MESSAGE + "\n"
