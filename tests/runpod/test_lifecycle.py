"""Wait for RUNNING and healthy, pull, and tear down on any failure; volume grow/shrink rules."""

from __future__ import annotations

import json

import httpx
import pytest

from frutebox_infra.runpod import errors
from frutebox_infra.runpod.client import NetworkVolume
from frutebox_infra.runpod.lifecycle import Provisioner, Timeouts
from tests.runpod.command import HEALTH, HEALTH_URL, PULL_URL, TAGS_URL, TIMEOUTS
from tests.runpod.conftest import Clock, FakeApi, ndjson, ok, pod, problem, pulled


def states(*statuses: str) -> list[httpx.Response]:
    return [ok(200, pod(status=s)) for s in statuses]


def test_wait_running_polls_until_running(
    provisioner: Provisioner, fake: FakeApi, clock: Clock
) -> None:
    fake.on("GET", "/v2/pods/pod1", *states("PROVISIONING", "STARTING", "RUNNING"))
    assert provisioner.wait_running("pod1", TIMEOUTS).status == "RUNNING"
    assert clock.sleeps == [2, 2]


@pytest.mark.parametrize("dead", ["ERROR", "EXITED", "TERMINATED"])
def test_wait_running_fails_on_a_dead_status(
    provisioner: Provisioner, fake: FakeApi, dead: str
) -> None:
    fake.on("GET", "/v2/pods/pod1", *states("STARTING", dead))
    with pytest.raises(errors.PodFailedError) as caught:
        provisioner.wait_running("pod1", TIMEOUTS)
    assert caught.value.last_status == dead
    assert "pod1" in str(caught.value)


def test_wait_running_times_out_naming_status_and_timeout(
    provisioner: Provisioner, fake: FakeApi, clock: Clock
) -> None:
    fake.on("GET", "/v2/pods/pod1", *states("STARTING"))
    with pytest.raises(errors.PodFailedError) as caught:
        provisioner.wait_running("pod1", TIMEOUTS)
    message = str(caught.value)
    assert "still STARTING after 30s" in message and "FRUTEBOX_RUNNING_TIMEOUT_S" in message
    assert "timeouts." not in message  # a request field users cannot set
    assert 30 <= clock.now <= 32


def test_wait_healthy_polls_the_proxy_until_2xx(
    provisioner: Provisioner, fake: FakeApi, clock: Clock
) -> None:
    fake.on("GET", "/v2/pods/pod1", *states("RUNNING"))
    fake.on("GET", HEALTH_URL, ok(502, {}), ok(404, {}), ok(204))
    provisioner.wait_healthy("pod1", HEALTH, TIMEOUTS)
    assert len(fake.calls("GET", "/health")) == 3
    assert all("authorization" not in r.headers for r in fake.calls("GET", "/health"))


def test_wait_healthy_gives_up_after_its_timeout(
    provisioner: Provisioner, fake: FakeApi, clock: Clock
) -> None:
    fake.on("GET", "/v2/pods/pod1", *states("RUNNING"))
    fake.on("GET", HEALTH_URL, ok(502, {}))
    with pytest.raises(errors.PodFailedError) as caught:
        provisioner.wait_healthy("pod1", HEALTH, TIMEOUTS)
    message = str(caught.value)
    assert "never became healthy" in message and HEALTH_URL in message
    assert "HTTP 502" in message and "60s" in message
    assert "frutebox-infra:healthTimeoutSeconds" in message
    assert "FRUTEBOX_HEALTH_TIMEOUT_S" in message and "timeouts." not in message


def test_the_timeout_defaults_live_in_timeouts() -> None:
    assert (Timeouts().running_s, Timeouts().healthy_s) == (900, 1800)


def test_wait_healthy_stops_early_when_the_pod_dies(
    provisioner: Provisioner, fake: FakeApi, clock: Clock
) -> None:
    fake.on("GET", "/v2/pods/pod1", *states("RUNNING", "ERROR"))
    fake.on("GET", HEALTH_URL, ok(502, {}))
    with pytest.raises(errors.PodFailedError) as caught:
        provisioner.wait_healthy("pod1", HEALTH, TIMEOUTS)
    assert caught.value.last_status == "ERROR"
    assert clock.now < 10


def test_bring_up_runs_wait_health_and_pull(provisioner: Provisioner, fake: FakeApi) -> None:
    fake.on("GET", "/v2/pods/pod1", *states("STARTING", "RUNNING"))
    fake.on("GET", HEALTH_URL, ok(200, {}))
    fake.on("POST", PULL_URL, pulled)
    fake.on("GET", TAGS_URL, ok(200, {"models": [{"name": "qwen3:8b"}]}))
    got = provisioner.bring_up("pod1", health=HEALTH, ollama_tags=["qwen3:8b"], timeouts=TIMEOUTS)
    assert got.status == "RUNNING"
    assert not fake.calls("DELETE")


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
    with pytest.raises(errors.PodFailedError, match="may still bill"):
        provisioner.bring_up("pod1", health=HEALTH, ollama_tags=(), timeouts=TIMEOUTS)


def test_terminate_treats_404_as_already_gone_once_the_listing_agrees(
    provisioner: Provisioner, fake: FakeApi
) -> None:
    fake.on("DELETE", "/v2/pods/gone", problem(404, "pod not found"))
    fake.on("GET", "/v2/pods", ok(200, {"pods": [pod("other")]}))
    fake.on("DELETE", "/v2/pods/pod1", ok(204))
    assert provisioner.terminate("gone") is False
    assert provisioner.terminate("pod1") is True


def test_a_404_from_a_path_the_api_does_not_have_is_a_configuration_error(
    provisioner: Provisioner, fake: FakeApi
) -> None:
    # A wrong base URL: every path is "not found", the listing too. Never "already gone".
    fake.on("DELETE", "/v2/pods/pod1", problem(404, "path not found"))
    with pytest.raises(errors.ConfigurationError, match="API URL is wrong"):
        provisioner.terminate("pod1")


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


VOL = {"id": "v1", "name": "w", "size": 100, "dataCenter": "EU-RO-1", "type": "STANDARD"}


def test_a_volume_grows_when_asked_bigger(
    provisioner: Provisioner, fake: FakeApi, logs: list[str]
) -> None:
    fake.on("PATCH", "/v2/network-volumes/v1", ok(200, {**VOL, "size": 150}))
    grown = provisioner.grow_volume(NetworkVolume.model_validate(VOL), 150)
    assert grown.size == 150
    assert fake.bodies("PATCH", "/v2/network-volumes/v1") == [{"size": 150}]


def test_a_volume_never_shrinks_and_says_so(
    provisioner: Provisioner, fake: FakeApi, logs: list[str]
) -> None:
    kept = provisioner.grow_volume(NetworkVolume.model_validate(VOL), 40)
    assert kept.size == 100
    assert not fake.requests
    assert any("never shrink" in line for line in logs)


OWNED = {**VOL, "name": "w-tok12345"}


def test_volume_create_adopts_after_a_5xx(provisioner: Provisioner, fake: FakeApi) -> None:
    fake.on(
        "GET",
        "/v2/network-volumes",
        ok(200, {"networkVolumes": [{**VOL, "id": "theirs"}, {**OWNED, "size": 50}]}),
    )
    fake.on("POST", "/v2/network-volumes", problem(503, "down"))
    volume, outcome, owner = provisioner.create_volume("w", 50, "EU-RO-1", "STANDARD", "tok12345")
    assert (volume.id, outcome, owner) == ("v1", "adopted", "tok12345")
    assert len(fake.calls("POST")) == 1


def test_volume_create_names_the_volume_with_a_fresh_token_and_the_tier(
    provisioner: Provisioner, fake: FakeApi
) -> None:
    fake.on("GET", "/v2/network-volumes", ok(200, {"networkVolumes": [VOL]}))
    fake.on("POST", "/v2/network-volumes", lambda r: ok(201, {**VOL, "id": "v9",
            **{k: v for k, v in json.loads(r.content).items() if k == "name"}}))  # fmt: skip
    volume, outcome, owner = provisioner.create_volume("w", 100, "EU-RO-1", "STANDARD")
    assert (volume.id, outcome) == ("v9", "created")  # "w" itself is never adopted
    [body] = fake.bodies("POST", "/v2/network-volumes")
    assert body == {"name": f"w-{owner}", "size": 100, "dataCenter": "EU-RO-1",
                    "type": "STANDARD"}  # fmt: skip
    assert len(owner) == 16


def test_a_created_volume_whose_answer_is_unreadable_is_adopted(
    provisioner: Provisioner, fake: FakeApi
) -> None:
    fake.on(
        "GET",
        "/v2/network-volumes",
        ok(200, {"networkVolumes": [OWNED]}),
    )
    fake.on("POST", "/v2/network-volumes", httpx.Response(201, text="<html>hiccup</html>"))
    volume, outcome, _ = provisioner.create_volume("w", 100, "EU-RO-1", "STANDARD", "tok12345")
    assert (volume.id, outcome) == ("v1", "adopted")
    assert len(fake.calls("POST")) == 1


def test_volume_delete_treats_404_as_gone(provisioner: Provisioner, fake: FakeApi) -> None:
    fake.on("DELETE", "/v2/network-volumes/v1", problem(404, "not found"))
    fake.on("GET", "/v2/network-volumes", ok(200, {"networkVolumes": []}))
    assert provisioner.delete_volume("v1") is False


def test_waits_ride_out_5xx_429_and_silence_until_their_own_deadline(
    provisioner: Provisioner, fake: FakeApi, clock: Clock, logs: list[str]
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
    assert provisioner.wait_running("pod1", TIMEOUTS).status == "RUNNING"
    assert 7 in clock.sleeps  # Retry-After honoured
    assert not fake.calls("DELETE")
    assert sum("did not answer" in line for line in logs) == 7


def test_a_wait_still_ends_at_its_deadline_when_the_api_never_answers(
    provisioner: Provisioner, fake: FakeApi, clock: Clock
) -> None:
    fake.on("GET", "/v2/pods/pod1", problem(503, "down"))
    with pytest.raises(errors.PodFailedError, match="after 30s"):
        provisioner.wait_running("pod1", TIMEOUTS)
    assert 30 <= clock.now <= 31


def test_health_is_probed_through_the_proxy_and_the_api_asked_rarely(
    provisioner: Provisioner, fake: FakeApi, clock: Clock
) -> None:
    fake.on("GET", "/v2/pods/pod1", ok(200, pod(status="RUNNING")))
    fake.on("GET", HEALTH_URL, *[ok(502, {})] * 20, ok(200, {}))
    provisioner.wait_healthy("pod1", HEALTH, TIMEOUTS)
    probes, api_reads = len(fake.calls("GET", "/health")), len(fake.calls("GET", "/v2/pods/pod1"))
    # A probe every poll interval, the API only once per api_check_s.
    assert probes == 21 and 0 < api_reads <= clock.now / TIMEOUTS.api_check_s


def test_polling_slows_down_when_the_quota_runs_low(
    provisioner: Provisioner, fake: FakeApi, clock: Clock
) -> None:
    low = {"RateLimit": '"minute";r=3;t=40, "hour";r=2000;t=3000'}
    fake.on(
        "GET",
        "/v2/pods/pod1",
        httpx.Response(200, json=pod(status="STARTING"), headers=low),
        ok(200, pod(status="RUNNING")),
    )
    provisioner.wait_running("pod1", TIMEOUTS)
    assert clock.sleeps == [20.0]  # 2 spendable requests in 40 s, not the 2 s poll interval


def test_a_failure_carries_the_last_lines_of_the_pods_log(
    provisioner: Provisioner, fake: FakeApi
) -> None:
    fake.on("GET", "/v2/pods/pod1", ok(200, pod(status="ERROR")))
    stream = 'data: {"line": "RuntimeError: no kernel image is available"}\n\n'
    fake.on("GET", "/v2/pods/pod1/logs", httpx.Response(200, text=stream))
    with pytest.raises(errors.PodFailedError, match="no kernel image is available"):
        provisioner.wait_running("pod1", TIMEOUTS)
