"""Wait for RUNNING, health or a restart, pull, and tear down a pod this run made on failure."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import httpx
import pytest

from frutebox_infra.runpod import errors
from frutebox_infra.runpod.lifecycle import Provisioner
from frutebox_infra.runpod.wire import Pod
from tests.runpod.command import HEALTH, HEALTH_URL, PULL_URL, TAGS_URL, TIMEOUTS
from tests.runpod.conftest import Clock, FakeApi, ndjson, ok, pod, problem, pulled, states


def test_bring_up_runs_wait_health_and_pull(provisioner: Provisioner, fake: FakeApi) -> None:
    fake.on("GET", "/v2/pods/pod1", *states("STARTING", "RUNNING"))
    fake.on("GET", HEALTH_URL, ok(200, {}))
    fake.on("POST", PULL_URL, pulled)
    fake.on("GET", TAGS_URL, ok(200, {"models": []}), ok(200, {"models": [{"name": "qwen3:8b"}]}))
    got = provisioner.bring_up("pod1", health=HEALTH, ollama_tags=["qwen3:8b"], timeouts=TIMEOUTS)
    assert got.status == "RUNNING"
    assert len(fake.calls("POST")) == 1
    assert not fake.calls("DELETE")


def test_a_pod_whose_launch_pulls_is_only_checked_never_pulled_through(
    provisioner: Provisioner, fake: FakeApi, logs: list[str]
) -> None:
    # Behind a gateway (which refuses /api/pull and /api/delete) the pod's own launch pulls
    # its tags before its server answers; the deploy step only sees them listed.
    gated = replace(HEALTH, pulls_on_pod=True)
    fake.on("GET", "/v2/pods/pod1", *states("RUNNING"))
    fake.on("GET", HEALTH_URL, ok(200, {}))
    fake.on("GET", TAGS_URL, ok(200, {"models": [{"name": "qwen3:8b"}]}))
    got = provisioner.bring_up("pod1", health=gated, ollama_tags=["qwen3:8b"], timeouts=TIMEOUTS)
    assert got.status == "RUNNING" and not fake.calls("POST")
    provisioner.refresh_pull(got, health=gated, tags=["qwen3:8b"], timeouts=TIMEOUTS)
    provisioner.forget(got, health=gated, tags=["llama3.2:1b"])
    assert not fake.calls("POST") and not fake.calls("DELETE")
    assert any("stays in its store" in line for line in logs)


def test_a_pod_whose_launch_pulls_fails_when_a_tag_is_not_listed(
    provisioner: Provisioner, fake: FakeApi
) -> None:
    gated = replace(HEALTH, pulls_on_pod=True)
    fake.on("GET", "/v2/pods/pod1", *states("RUNNING"))
    fake.on("GET", HEALTH_URL, ok(200, {}))
    fake.on("GET", TAGS_URL, ok(200, {"models": []}))
    fake.on("DELETE", "/v2/pods/pod1", ok(204))
    with pytest.raises(errors.PodFailedError, match="does not list qwen3:8b"):
        provisioner.bring_up("pod1", health=gated, ollama_tags=["qwen3:8b"], timeouts=TIMEOUTS)
    assert not fake.calls("POST")


def test_bring_up_pulls_only_the_tags_the_store_does_not_list(
    provisioner: Provisioner, fake: FakeApi, logs: list[str]
) -> None:
    fake.on("GET", "/v2/pods/pod1", *states("RUNNING"))
    fake.on("GET", HEALTH_URL, ok(200, {}))
    fake.on("POST", PULL_URL, pulled)
    listed = {"models": [{"name": "qwen3:8b"}, {"name": "llama3.2:1b"}]}
    fake.on("GET", TAGS_URL, ok(200, {"models": [{"name": "qwen3:8b"}]}), ok(200, listed))
    provisioner.bring_up(
        "pod1", health=HEALTH, ollama_tags=["qwen3:8b", "llama3.2:1b"], timeouts=TIMEOUTS
    )
    assert [json.loads(r.content)["model"] for r in fake.calls("POST")] == ["llama3.2:1b"]
    assert any("qwen3:8b already in its store; not pulled" in line for line in logs)


def test_bring_up_pulls_every_tag_when_the_server_gives_no_listing(
    provisioner: Provisioner, fake: FakeApi
) -> None:
    fake.on("GET", "/v2/pods/pod1", *states("RUNNING"))
    fake.on("GET", HEALTH_URL, ok(200, {}))
    fake.on("POST", PULL_URL, pulled)
    fake.on("GET", TAGS_URL, ok(502, {}), ok(200, {"models": [{"name": "qwen3:8b"}]}))
    provisioner.bring_up("pod1", health=HEALTH, ollama_tags=["qwen3:8b"], timeouts=TIMEOUTS)
    assert len(fake.calls("POST")) == 1


def test_bring_up_terminates_a_pod_that_never_serves(
    provisioner: Provisioner, fake: FakeApi
) -> None:
    fake.on("GET", "/v2/pods/pod1", *states("RUNNING"))
    fake.on("GET", HEALTH_URL, ok(502, {}))
    fake.on("DELETE", "/v2/pods/pod1", ok(204))
    with pytest.raises(errors.PodFailedError) as caught:
        provisioner.bring_up("pod1", health=HEALTH, ollama_tags=(), timeouts=TIMEOUTS)
    assert "terminated so that it does not bill" in str(caught.value)
    assert caught.value.last_status == "RUNNING"
    assert len(fake.calls("DELETE", "/v2/pods/pod1")) == 1


def test_bring_up_terminates_after_a_failed_pull(provisioner: Provisioner, fake: FakeApi) -> None:
    fake.on("GET", "/v2/pods/pod1", *states("RUNNING"))
    fake.on("GET", HEALTH_URL, ok(200, {}))
    fake.on("POST", PULL_URL, ndjson({"error": "no such model"}))
    fake.on("DELETE", "/v2/pods/pod1", ok(204))
    with pytest.raises(errors.PodFailedError, match="no such model"):
        provisioner.bring_up("pod1", health=HEALTH, ollama_tags=["nope:1b"], timeouts=TIMEOUTS)
    assert len(fake.calls("DELETE")) == 1


def test_bring_up_terminates_on_an_api_failure_while_waiting(
    provisioner: Provisioner, fake: FakeApi
) -> None:
    fake.on("GET", "/v2/pods/pod1", problem(401, "token revoked"))
    fake.on("DELETE", "/v2/pods/pod1", ok(204))
    with pytest.raises(errors.PodFailedError, match="token revoked"):
        provisioner.bring_up("pod1", health=HEALTH, ollama_tags=(), timeouts=TIMEOUTS)
    assert len(fake.calls("DELETE")) == 1


def test_bring_up_terminates_on_interrupt(provisioner: Provisioner, fake: FakeApi) -> None:
    def interrupt(request: httpx.Request) -> httpx.Response:
        raise KeyboardInterrupt

    fake.on("GET", "/v2/pods/pod1", interrupt)
    fake.on("DELETE", "/v2/pods/pod1", ok(204))
    with pytest.raises(KeyboardInterrupt):
        provisioner.bring_up("pod1", health=HEALTH, ollama_tags=(), timeouts=TIMEOUTS)
    assert len(fake.calls("DELETE")) == 1


def test_bring_up_terminates_when_cancelled(provisioner: Provisioner, fake: FakeApi) -> None:
    def cancel(request: httpx.Request) -> httpx.Response:
        raise errors.Cancelled("Cancelled by SIGTERM before finishing.")

    fake.on("GET", "/v2/pods/pod1", cancel)
    fake.on("DELETE", "/v2/pods/pod1", ok(204))
    with pytest.raises(errors.PodFailedError) as caught:
        provisioner.bring_up("pod1", health=HEALTH, ollama_tags=(), timeouts=TIMEOUTS)
    assert "Cancelled by SIGTERM" in str(caught.value) and "terminated" in str(caught.value)
    assert len(fake.calls("DELETE")) == 1


def test_a_failed_teardown_says_the_pod_may_still_bill(
    provisioner: Provisioner, fake: FakeApi
) -> None:
    fake.on("GET", "/v2/pods/pod1", *states("ERROR"))
    fake.on("DELETE", "/v2/pods/pod1", problem(403, "no delete permission"))
    with pytest.raises(errors.MayStillBillError, match="may still bill") as caught:
        provisioner.bring_up("pod1", health=HEALTH, ollama_tags=(), timeouts=TIMEOUTS)
    assert (caught.value.kind, caught.value.ids) == ("pod", ("pod1",))
    assert "went to ERROR" in str(caught.value) and "RunPod console" in str(caught.value)


def test_terminate_treats_404_as_already_gone_once_the_listing_agrees(
    provisioner: Provisioner, fake: FakeApi
) -> None:
    fake.on("DELETE", "/v2/pods/gone", problem(404, "pod not found"))
    fake.on("GET", "/v2/pods", ok(200, {"pods": [pod("other")]}))
    fake.on("DELETE", "/v2/pods/pod1", ok(204))
    assert provisioner.terminate("gone") is False
    assert provisioner.terminate("pod1") is True


def test_a_404_from_a_path_the_api_does_not_have_is_never_already_gone(
    provisioner: Provisioner, fake: FakeApi
) -> None:
    # A wrong base URL: every path is "not found", the listing too. The pod may still bill.
    fake.on("DELETE", "/v2/pods/pod1", problem(404, "path not found"))
    with pytest.raises(errors.MayStillBillError, match="API URL is wrong") as caught:
        provisioner.terminate("pod1")
    assert (caught.value.kind, caught.value.ids) == ("pod", ("pod1",))


def test_terminate_rides_out_5xx_and_429_until_its_deadline(
    provisioner: Provisioner, fake: FakeApi, clock: Clock
) -> None:
    fake.on(
        "DELETE",
        "/v2/pods/pod1",
        *[problem(503, "down")] * 6,
        problem(429, "slow down", headers={"Retry-After": "40"}),
        ok(204),
    )
    assert provisioner.terminate("pod1") is True
    assert 40 in clock.sleeps


# An update: the PATCHed pod must show a restart before its health means anything.

BEFORE = Pod.model_validate(pod(status="RUNNING") | {"startedAt": "2026-01-01T00:00:00Z"})


def at(status: str, started: str | None = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    return pod(status=status) | {"startedAt": started}


def settle(provisioner: Provisioner, patched: dict[str, Any], tag: str | None = None) -> Pod:
    return provisioner.settle_update(
        BEFORE,
        Pod.model_validate(patched),
        health=HEALTH,
        ollama_tags=[tag] if tag else [],
        timeouts=TIMEOUTS,
        patched_at=provisioner.clock(),
    )


def test_after_a_patch_health_is_read_only_once_the_pod_restarted(
    provisioner: Provisioner, fake: FakeApi
) -> None:
    # The API keeps saying RUNNING for a while, with the old start time: the old process.
    fake.on(
        "GET",
        "/v2/pods/pod1",
        ok(200, at("RUNNING")),
        ok(200, at("RUNNING")),
        ok(200, at("STARTING", None)),
        ok(200, at("RUNNING", "2026-01-01T00:05:00Z")),
    )
    probed_while: list[int] = []

    def healthy(request: httpx.Request) -> httpx.Response:
        probed_while.append(len(fake.calls("GET", "/v2/pods/pod1")))
        return ok(200, {})

    fake.on("GET", HEALTH_URL, healthy)
    fake.on("POST", PULL_URL, pulled)
    fake.on("GET", TAGS_URL, ok(200, {"models": [{"name": "qwen3:8b"}]}))
    got = settle(provisioner, at("RUNNING"), tag="qwen3:8b")
    assert got.started_at == "2026-01-01T00:05:00Z"
    assert probed_while and min(probed_while) == 4  # not before the restart showed
    assert not fake.calls("DELETE")


def test_a_new_start_time_counts_as_the_restart(provisioner: Provisioner, fake: FakeApi) -> None:
    fake.on("GET", "/v2/pods/pod1", ok(200, at("RUNNING", "2026-01-01T00:05:00Z")))
    fake.on("GET", HEALTH_URL, ok(200, {}))
    settle(provisioner, at("RUNNING", "2026-01-01T00:05:00Z"))
    assert len(fake.calls("GET", "/health")) == 1


def test_an_uptime_shorter_than_the_time_since_the_patch_counts_as_the_restart(
    provisioner: Provisioner, fake: FakeApi, clock: Clock
) -> None:
    # Nothing documents that startedAt changes: runtime.uptime is what the v2 Pod promises.
    old = at("RUNNING") | {"runtime": {"uptime": 86400}}
    fake.on(
        "GET",
        "/v2/pods/pod1",
        ok(200, old),
        ok(200, at("RUNNING") | {"runtime": {"uptime": 1}}),
    )
    fake.on("GET", HEALTH_URL, ok(200, {}))
    settle(provisioner, old)
    # old process, restarted (up 1 s, 4 s after the PATCH), then the wait for RUNNING
    assert len(fake.calls("GET", "/v2/pods/pod1")) == 3
    assert len(fake.calls("GET", "/health")) == 1


def test_a_patch_that_never_shows_a_restart_fails_and_leaves_the_pod(
    provisioner: Provisioner, fake: FakeApi
) -> None:
    fake.on("GET", "/v2/pods/pod1", ok(200, at("RUNNING")))
    fake.on("GET", HEALTH_URL, ok(200, {}))
    with pytest.raises(errors.PodFailedError) as caught:
        settle(provisioner, at("RUNNING"))
    message = str(caught.value)
    assert "showed no restart within 30s" in message and "left running" in message
    assert not fake.calls("GET", "/health") and not fake.calls("DELETE")


@pytest.mark.parametrize("dead", ["never-healthy", "error", "cancelled"])
def test_a_patched_pod_that_does_not_serve_is_reported_not_terminated(
    provisioner: Provisioner, fake: FakeApi, dead: str
) -> None:
    def cancel(request: httpx.Request) -> httpx.Response:
        raise errors.Cancelled("Cancelled by SIGTERM before finishing.")

    after = {"never-healthy": ok(200, at("RUNNING", "new")), "error": ok(200, at("ERROR"))}
    fake.on("GET", "/v2/pods/pod1", after.get(dead, cancel))
    fake.on("GET", HEALTH_URL, ok(502, {}))
    fake.on("DELETE", "/v2/pods/pod1", ok(204))
    with pytest.raises(errors.PodFailedError) as caught:
        settle(provisioner, at("STARTING", None))
    assert "left running because the stack records it" in str(caught.value)
    assert not fake.calls("DELETE")


def test_a_crash_looping_pod_this_run_created_is_terminated_with_its_log(
    provisioner: Provisioner, fake: FakeApi, clock: Clock
) -> None:
    fake.on("GET", "/v2/pods/pod1", ok(200, at("RUNNING") | {"runtime": {"uptime": 0}}))
    fake.on("GET", HEALTH_URL, ok(502, {}))
    stream = 'data: {"line": "error: unrecognized arguments: --bogus"}\n\n'
    fake.on("GET", "/v2/pods/pod1/logs", httpx.Response(200, text=stream))
    fake.on("DELETE", "/v2/pods/pod1", ok(204))
    with pytest.raises(errors.PodFailedError) as caught:
        provisioner.bring_up("pod1", health=HEALTH, ollama_tags=(), timeouts=TIMEOUTS)
    message = str(caught.value)
    assert "crash-loops" in message and "unrecognized arguments: --bogus" in message
    assert "terminated so that it does not bill" in message
    assert len(fake.calls("DELETE", "/v2/pods/pod1")) == 1
    assert clock.now < TIMEOUTS.healthy_s  # long before the health deadline


def test_a_cancelled_update_is_left_as_it_is_and_never_rolled_back(
    provisioner: Provisioner, fake: FakeApi
) -> None:
    def cancel(request: httpx.Request) -> httpx.Response:
        raise errors.Cancelled("Cancelled by SIGTERM before finishing.")

    fake.on("GET", "/v2/pods/pod1", cancel)
    with pytest.raises(errors.PodFailedError, match="was being updated in place"):
        provisioner.settle_update(
            BEFORE,
            Pod.model_validate(at("STARTING", None)),
            health=HEALTH,
            ollama_tags=[],
            timeouts=TIMEOUTS,
            patched_at=provisioner.clock(),
            rollback={"image": "img:1"},
        )
    assert not fake.calls("PATCH") and not fake.calls("DELETE")
