"""A restart under a RUNNING pod: start time, uptime against our clock, status, system log."""

from __future__ import annotations

from typing import Any

import pytest

from frutebox_infra.runpod.restarts import Reading, RestartWatch, restarted_between
from frutebox_infra.runpod.wire import Pod
from tests.runpod.conftest import pod

T0 = "2026-01-01T00:00:00Z"


def reading(uptime: float | None, sent: float, answered: float | None = None,
            started: str | None = T0) -> Reading:  # fmt: skip
    return Reading("RUNNING", started, uptime, sent, sent if answered is None else answered)


@pytest.mark.parametrize(
    ("before", "now", "restarted"),
    [
        # Whole seconds are truncated: an uptime of 2 may be up to 3 s of real time.
        pytest.param(reading(50, 0), reading(2, 3.0), False, id="whole-seconds-at-the-bound"),
        pytest.param(reading(50, 0), reading(2, 3.01), True, id="whole-seconds-past-the-bound"),
        pytest.param(reading(0.2, 0), reading(0.5, 0.501), False, id="ms-at-the-bound"),
        pytest.param(reading(0.2, 0), reading(0.5, 0.502), True, id="ms-past-the-bound"),
        # The API answered `before` at most at its answered time and `now` at least at sent.
        pytest.param(reading(50, 0, 2.0), reading(0, 2.9), False, id="a-slow-earlier-answer"),
        pytest.param(reading(50, 0), reading(None, 100), False, id="no-runtime-says-nothing"),
        pytest.param(reading(50, 0), reading(400, 100, started="2026-01-01T00:05:00Z"), True,
                     id="a-new-start-time"),
        pytest.param(reading(50, 0, started=None), reading(150, 100), False, id="growing"),
    ],
)
def test_restarted_between(before: Reading, now: Reading, restarted: bool) -> None:
    assert restarted_between(before, now) is restarted


def at(status: str = "RUNNING", uptime: float | None = 10, started: str = T0) -> Pod:
    data: dict[str, Any] = pod(status=status) | {"startedAt": started}
    data["runtime"] = None if uptime is None else {"uptime": uptime}
    return Pod.model_validate(data)


def test_the_status_leaving_running_and_coming_back_is_one_restart() -> None:
    watch = RestartWatch()
    assert watch.see(at(uptime=10), sent=0, answered=0) is False
    assert watch.see(at("STARTING", None), sent=5, answered=5) is False
    assert watch.see(at(uptime=30), sent=10, answered=10) is True
    assert (watch.restarts, watch.first_seen) == (1, 10)


def test_a_running_pod_without_a_runtime_after_one_is_down_not_yet_a_restart() -> None:
    watch = RestartWatch()
    assert watch.see(at(uptime=None), sent=0, answered=0) is False
    assert not watch.container_down  # no runtime seen yet: a container still starting
    watch.see(at(uptime=3), sent=5, answered=5)
    assert watch.see(at(uptime=None), sent=10, answered=10) is False
    assert watch.container_down and watch.restarts == 0
    # compared with the last read that saw it up (5 s), 1 s of uptime at 20 s is a new one
    assert watch.see(at(uptime=1), sent=20, answered=20) is True
    assert not watch.container_down


@pytest.mark.parametrize(
    ("before", "starts", "restarts"),
    [
        pytest.param(0, 1, 0, id="a-new-pod-started-once"),
        pytest.param(0, 5, 4, id="a-new-pod-started-five-times"),
        pytest.param(7, 8, 0, id="a-patched-pod-restarted-once-by-its-patch"),
        pytest.param(7, 10, 2, id="a-patched-pod-restarted-since"),
        pytest.param(None, 50, 0, id="unknown-baseline-ignores-the-log"),
    ],
)
def test_the_system_log_counts_starts_since_the_watch_began(
    before: int | None, starts: int, restarts: int
) -> None:
    watch = RestartWatch(logged_before=before)
    assert watch.logged(starts, at=3.0) is (restarts > 0)
    assert watch.restarts == restarts
    assert watch.first_seen == (3.0 if restarts else None)
    assert watch.logged(starts, at=9.0) is False  # the same starts are not counted twice
