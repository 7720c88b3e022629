"""Waiting for a pod: RUNNING, health through the proxy, a restart after a PATCH, and a crash
loop seen while it lasts (restarts in the reads and the system log)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import httpx
import pytest

from frutebox_infra.runpod import errors
from frutebox_infra.runpod.restarts import RestartWatch
from frutebox_infra.runpod.waits import Waits
from tests.runpod.command import HEALTH, HEALTH_URL, TIMEOUTS
from tests.runpod.conftest import Clock, FakeApi, ok, pod, problem, states


def test_wait_running_polls_until_running(
    waits: Waits, fake: FakeApi, clock: Clock
) -> None:
    fake.on("GET", "/v2/pods/pod1", *states("PROVISIONING", "STARTING", "RUNNING"))
    assert waits.wait_running("pod1", TIMEOUTS).status == "RUNNING"
    assert clock.sleeps == [2, 2]


@pytest.mark.parametrize("dead", ["ERROR", "EXITED", "TERMINATED"])
def test_wait_running_fails_on_a_dead_status(
    waits: Waits, fake: FakeApi, dead: str
) -> None:
    fake.on("GET", "/v2/pods/pod1", *states("STARTING", dead))
    with pytest.raises(errors.PodFailedError) as caught:
        waits.wait_running("pod1", TIMEOUTS)
    assert caught.value.last_status == dead
    assert "pod1" in str(caught.value)


def test_wait_running_times_out_naming_status_and_timeout(
    waits: Waits, fake: FakeApi, clock: Clock
) -> None:
    fake.on("GET", "/v2/pods/pod1", *states("STARTING"))
    with pytest.raises(errors.PodFailedError) as caught:
        waits.wait_running("pod1", TIMEOUTS)
    message = str(caught.value)
    assert "still STARTING after 30s" in message and "FRUTEBOX_RUNNING_TIMEOUT_S" in message
    assert "timeouts." not in message  # a request field users cannot set
    assert 30 <= clock.now <= 32


def test_wait_healthy_polls_the_proxy_until_2xx(
    waits: Waits, fake: FakeApi, clock: Clock
) -> None:
    fake.on("GET", "/v2/pods/pod1", *states("RUNNING"))
    fake.on("GET", HEALTH_URL, ok(502, {}), ok(404, {}), ok(204))
    waits.wait_healthy("pod1", HEALTH, TIMEOUTS)
    assert len(fake.calls("GET", "/health")) == 3
    assert all("authorization" not in r.headers for r in fake.calls("GET", "/health"))


def test_wait_healthy_gives_up_after_its_timeout(
    waits: Waits, fake: FakeApi, clock: Clock
) -> None:
    fake.on("GET", "/v2/pods/pod1", *states("RUNNING"))
    fake.on("GET", HEALTH_URL, ok(502, {}))
    with pytest.raises(errors.PodFailedError) as caught:
        waits.wait_healthy("pod1", HEALTH, TIMEOUTS)
    message = str(caught.value)
    assert "never became healthy" in message and HEALTH_URL in message
    assert "HTTP 502" in message and "60s" in message
    assert "frutebox-infra:healthTimeoutSeconds" in message
    assert "FRUTEBOX_HEALTH_TIMEOUT_S" in message and "timeouts." not in message





def test_wait_healthy_stops_early_when_the_pod_dies(
    waits: Waits, fake: FakeApi, clock: Clock
) -> None:
    fake.on("GET", "/v2/pods/pod1", *states("RUNNING", "ERROR"))
    fake.on("GET", HEALTH_URL, ok(502, {}))
    with pytest.raises(errors.PodFailedError) as caught:
        waits.wait_healthy("pod1", HEALTH, TIMEOUTS)
    assert caught.value.last_status == "ERROR"
    assert clock.now < 10


def test_waits_ride_out_5xx_429_and_silence_until_their_own_deadline(
    waits: Waits, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    def silence(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("no route", request=request)

    fake.on(
        "GET",
        "/v2/pods/pod1",
        *[problem(503, "down")] * 5,
        problem(429, "slow down", headers={"Retry-After": "7"}),
        silence,
        ok(200, pod(status="RUNNING")),
    )
    assert waits.wait_running("pod1", TIMEOUTS).status == "RUNNING"
    assert 7 in clock.sleeps  # Retry-After honoured
    assert not fake.calls("DELETE")
    assert sum("did not answer" in line for line in logs) == 7


def test_a_wait_still_ends_at_its_deadline_when_the_api_never_answers(
    waits: Waits, fake: FakeApi, clock: Clock
) -> None:
    fake.on("GET", "/v2/pods/pod1", problem(503, "down"))
    with pytest.raises(errors.PodFailedError, match="after 30s"):
        waits.wait_running("pod1", TIMEOUTS)
    assert 30 <= clock.now <= 31


def test_health_is_probed_through_the_proxy_and_the_api_asked_rarely(
    waits: Waits, fake: FakeApi, clock: Clock
) -> None:
    fake.on("GET", "/v2/pods/pod1", ok(200, pod(status="RUNNING")))
    fake.on("GET", HEALTH_URL, *[ok(502, {})] * 20, ok(200, {}))
    waits.wait_healthy("pod1", HEALTH, TIMEOUTS)
    probes, api_reads = len(fake.calls("GET", "/health")), len(fake.calls("GET", "/v2/pods/pod1"))
    # A probe every poll interval, the API only once per api_check_s.
    assert probes == 21 and 0 < api_reads <= clock.now / TIMEOUTS.api_check_s


def test_polling_slows_down_when_the_quota_runs_low(
    waits: Waits, fake: FakeApi, clock: Clock
) -> None:
    low = {"RateLimit": '"minute";r=3;t=40, "hour";r=2000;t=3000'}
    fake.on(
        "GET",
        "/v2/pods/pod1",
        httpx.Response(200, json=pod(status="STARTING"), headers=low),
        ok(200, pod(status="RUNNING")),
    )
    waits.wait_running("pod1", TIMEOUTS)
    assert clock.sleeps == [20.0]  # 2 spendable requests in 40 s, not the 2 s poll interval


def test_a_failure_carries_the_last_lines_of_the_pods_log(
    waits: Waits, fake: FakeApi
) -> None:
    fake.on("GET", "/v2/pods/pod1", ok(200, pod(status="ERROR")))
    stream = 'data: {"line": "RuntimeError: no kernel image is available"}\n\n'
    fake.on("GET", "/v2/pods/pod1/logs", httpx.Response(200, text=stream))
    with pytest.raises(errors.PodFailedError, match="no kernel image is available"):
        waits.wait_running("pod1", TIMEOUTS)


# A crash loop: RunPod keeps the pod RUNNING while its container exits and starts again.

LOOPING = replace(TIMEOUTS, restart_check_s=1, crash_window_s=20)
CRASH_LINE = "sglang.launch_server: error: unrecognized arguments: --bogus"


def up(uptime: float | None, started: str = "2026-01-01T00:00:00Z") -> httpx.Response:
    data = pod(status="RUNNING") | {"startedAt": started}
    data["runtime"] = None if uptime is None else {"uptime": uptime}
    return ok(200, data)


def logs(container: list[str], starts: int | None) -> Callable[[httpx.Request], httpx.Response]:
    """The pod's log by source: its container's lines, and `starts` in the system log."""

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.params.get("source") == "system":
            if starts is None:
                return problem(503, "logs unavailable")
            lines = ["start container"] * starts
        else:
            lines = container
        body = "".join(f'data: {{"line": "{line}"}}\n\n' for line in lines)
        return httpx.Response(200, text=body)

    return answer


def test_uptimes_that_keep_resetting_fail_the_wait_after_the_restart_limit(
    waits: Waits, fake: FakeApi, clock: Clock
) -> None:
    fake.on("GET", "/v2/pods/pod1", up(0))  # every read: a container started just now
    fake.on("GET", HEALTH_URL, ok(502, {}))
    fake.on("GET", "/v2/pods/pod1/logs", logs([CRASH_LINE], None))
    watch = RestartWatch()
    with pytest.raises(errors.CrashLoopError) as caught:
        waits.wait_healthy("pod1", HEALTH, LOOPING, watch=watch)
    assert caught.value.restarts == LOOPING.restart_limit == 3
    message = str(caught.value)
    assert "crash-loops" in message and CRASH_LINE in message and "pulumi up" in message
    # base read at 4 s, restarts seen at 8, 10 and 12 s: the checks tightened after the first
    assert clock.now < 14 < LOOPING.healthy_s


def test_starts_in_the_system_log_fail_the_wait_at_the_first_restart_seen(
    waits: Waits, fake: FakeApi, clock: Clock
) -> None:
    # The reads see one new start time; the log shows every start since the pod began.
    fake.on("GET", "/v2/pods/pod1", up(30), up(1, "2026-01-01T00:05:00Z"))
    fake.on("GET", HEALTH_URL, ok(502, {}))
    fake.on("GET", "/v2/pods/pod1/logs", logs([CRASH_LINE], starts=6))
    with pytest.raises(errors.CrashLoopError) as caught:
        waits.wait_healthy("pod1", HEALTH, LOOPING, watch=RestartWatch(logged_before=0))
    assert caught.value.restarts == 5
    assert len(fake.calls("GET", "/v2/pods/pod1")) == 2


def test_fewer_restarts_than_the_limit_still_serve(
    waits: Waits, fake: FakeApi, clock: Clock
) -> None:
    fake.on("GET", "/v2/pods/pod1", up(5), up(0), up(0), up(10))
    fake.on("GET", HEALTH_URL, *[ok(502, {})] * 7, ok(200, {}))
    fake.on("GET", "/v2/pods/pod1/logs", logs([], None))
    watch = RestartWatch()
    waits.wait_healthy("pod1", HEALTH, LOOPING, watch=watch)
    assert watch.restarts == 2 < LOOPING.restart_limit


def test_a_slow_loop_fails_once_the_crash_window_after_its_first_restart_has_passed(
    waits: Waits, fake: FakeApi, clock: Clock
) -> None:
    # One restart seen, then a container that loads for long and never answers.
    fake.on("GET", "/v2/pods/pod1", up(30), up(0), *[up(u) for u in range(2, 200, 2)])
    fake.on("GET", HEALTH_URL, ok(502, {}))
    fake.on("GET", "/v2/pods/pod1/logs", logs([CRASH_LINE], None))
    with pytest.raises(errors.CrashLoopError) as caught:
        waits.wait_healthy("pod1", HEALTH, LOOPING, watch=RestartWatch())
    assert caught.value.restarts == 1
    ends = 8.0 + LOOPING.crash_window_s  # the restart was seen at the second check, at 8 s
    assert ends <= clock.now < ends + 3


def test_a_running_pod_whose_runtime_is_gone_is_not_a_crash_loop(
    waits: Waits, fake: FakeApi, clock: Clock
) -> None:
    # A host that died: RUNNING, no runtime, the proxy 502, and no new start in the log.
    fake.on("GET", "/v2/pods/pod1", up(30), up(None))
    fake.on("GET", HEALTH_URL, ok(502, {}))
    fake.on("GET", "/v2/pods/pod1/logs", logs([], starts=1))
    with pytest.raises(errors.PodFailedError) as caught:
        waits.wait_healthy("pod1", HEALTH, LOOPING, watch=RestartWatch(logged_before=0))
    assert not isinstance(caught.value, errors.CrashLoopError)
    assert "never became healthy" in str(caught.value)
    # the API is asked once a minute's worth (api_check_s), never at the restart pace
    reads = len(fake.calls("GET", "/v2/pods/pod1"))
    assert reads <= LOOPING.healthy_s / LOOPING.api_check_s + 1
