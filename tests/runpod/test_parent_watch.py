"""The deploy step stops and cleans up when the shell that started it is SIGKILLed.

That is how upstream's command provider cancels: it kills its `/bin/sh` and signals nothing
else, so the step must notice on its own (frutebox_infra/runpod/parent_watch.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from frutebox_infra.emulator.server import RunningEmulator
from frutebox_infra.runpod.parent_watch import ParentWatch, unread_pipe
from tests.emulator_client import fault, live_pods
from tests.factories import ROOT
from tests.runpod.command import env_for, pod_request, volume
from tests.runpod.conftest import API_KEY, HF_TOKEN
from tests.runpod.test_command_line import wait_for_health_probes


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _ended(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if "zombie" in Path(f"/proc/{pid}/status").read_text():
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def _start_create(emulator: RunningEmulator, argv: list[str]) -> subprocess.Popen[str]:
    """`argv` started on a never-healthy pod create, its request written and stdin closed."""
    fault(emulator, {"op": "pods.create", "action": "never-healthy"})
    env = {"PATH": os.environ["PATH"], **env_for(emulator, FRUTEBOX_HEALTH_TIMEOUT_S="120")}
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(pod_request(volume(emulator))))
    proc.stdin.close()
    proc.stdin = None  # written in full: communicate() must not touch it again
    return proc


def test_a_killed_shell_makes_the_step_terminate_its_pod(emulator: RunningEmulator) -> None:
    # As the provider runs it: a shell whose child is the step (dash does not exec it).
    step_command = f'"{sys.executable}" -m frutebox_infra.runpod pod create; echo after'
    shell = _start_create(emulator, ["/bin/sh", "-c", step_command])
    wait_for_health_probes(emulator)
    [step] = _children(shell.pid)
    shell.kill()  # SIGKILL to the shell only, as upstream's cancel does
    start = time.monotonic()
    out, err = shell.communicate(timeout=60)  # EOF once the step, holding the pipes, exits
    took = time.monotonic() - start
    assert _ended(step, within_s=10), "the step outlived its output"
    assert took < 30, f"the step ran on for {took:.0f}s after its shell died"
    assert out == ""
    assert "is gone" in err and "terminated so that it does not bill" in err
    assert err.count("Pulumi cancelled or stopped") == 1
    assert "Traceback" not in err and API_KEY not in err and HF_TOKEN not in err
    assert live_pods(emulator) == []


def test_the_watch_sees_a_changed_parent_and_an_unread_pipe() -> None:
    seen: list[str] = []
    watch = ParentWatch(seen.append, interval_s=0.01)
    assert watch.reason() is None
    watch.parent = -1
    watch.start()
    deadline = time.monotonic() + 5
    while not seen and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen and "is gone" in seen[0]

    read_end, write_end = os.pipe()
    try:
        assert not unread_pipe(write_end)
        os.close(read_end)
        assert unread_pipe(write_end)
    finally:
        os.close(write_end)


def test_a_step_whose_reader_is_gone_stops(emulator: RunningEmulator) -> None:
    """The engine (and provider) gone while the shell lives: nobody reads the output."""
    proc = _start_create(emulator, [sys.executable, "-m", "frutebox_infra.runpod", "pod", "create"])
    assert proc.stdout is not None and proc.stderr is not None
    wait_for_health_probes(emulator)
    proc.stdout.close()
    proc.stderr.close()
    assert proc.wait(timeout=30) == 1
    assert live_pods(emulator) == []
