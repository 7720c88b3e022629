"""Cancelling and failing `pulumi up` with the stand-ins behaving as upstream.

Upstream's command provider cancels by SIGKILLing the shell it started and signals nothing
else; upstream's language host SIGINTs the program when the engine aborts. These runs check
what a user then sees: nothing left billing, no traceback, no process left behind.
"""

from __future__ import annotations

import signal
import time

import pytest

from tests.e2e.deployment import SMALL, Deployment
from tests.e2e.processes import gone_within, new_marker, wait_for
from tests.emulator_client import requests

pytestmark = pytest.mark.engine


def test_sigint_while_a_pod_waits_for_health_leaves_nothing_billing(
    deployment: Deployment,
) -> None:
    project = deployment.project
    marker = new_marker()
    project.extra_env.update(marker, FRUTEBOX_HEALTH_TIMEOUT_S="600")
    deployment.fault({"op": "pods.create", "action": "never-healthy"})
    project.write_stack("small", {**SMALL, "models": ["qwen3-8b"]})
    project.init("small")
    up = project.start_up("small")
    try:
        wait_for("the pod's health probes", lambda: requests(deployment.emulator, "proxy"))
        assert deployment.live_pods(), "the pod being brought up"
        up.send_signal(signal.SIGINT)  # the CLI only, as a CI runner cancels it
        start = time.monotonic()
        output, _ = up.communicate(timeout=120)
        took = time.monotonic() - start
    finally:
        if up.poll() is None:
            up.kill()
    assert up.returncode != 0
    assert took < 60, f"up took {took:.0f}s to stop after SIGINT"
    assert deployment.live_pods() == [], output[-3000:]
    assert "terminated so that it does not bill" in output
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output[-3000:]
    assert gone_within(marker, timeout_s=20) == []


def test_a_failed_up_shows_its_error_without_a_traceback_and_leaves_no_process(
    deployment: Deployment,
) -> None:
    project = deployment.project
    marker = new_marker()
    project.extra_env.update(marker)
    deployment.fault({"op": "pods.create", "action": "never-healthy"})
    project.write_stack("small", {**SMALL, "models": ["qwen3-8b"]})
    proc = project.up("small", check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "never became healthy" in output
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output[-3000:]
    assert deployment.live_pods() == []
    assert gone_within(marker, timeout_s=20) == []
