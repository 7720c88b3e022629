"""Create with candidates: each status rule of the v2 create contract, and adopt-after-5xx."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from frutebox_infra.runpod import errors
from frutebox_infra.runpod.access import DEPLOY, KeyUse, Need
from frutebox_infra.runpod.client import RunPodClient
from frutebox_infra.runpod.lifecycle import Timeouts
from frutebox_infra.runpod.placement import Ownership, gpu_of, hardware_of, place
from tests.runpod.conftest import (
    API,
    API_KEY,
    OWNER,
    VOLUME_ID,
    Clock,
    FakeApi,
    ok,
    pod,
    problem,
)

OURS = Ownership(OWNER, VOLUME_ID)
NAME = "frutebox-dev-m"
CAPACITY_DETAIL = (
    "There are no longer any instances available with the requested specifications."
    " Please refresh and try again."
)


def body(gpu: str, count: int = 1) -> dict[str, Any]:
    return {
        "name": NAME,
        "image": "img:1",
        "gpu": {"id": gpu, "count": count},
        "ports": ["8080/http"],
    }


CANDIDATES = [body("NVIDIA RTX A4000"), body("NVIDIA RTX A5000"), body("NVIDIA A40", 2)]


def created(gpu: str, pod_id: str = "new1", count: int = 1) -> httpx.Response:
    return ok(201, pod(pod_id, name=NAME, gpu=gpu, count=count))


def run(
    client: RunPodClient,
    clock: Clock,
    logs: list[str],
    candidates: list[dict[str, Any]] = CANDIDATES,
) -> Any:
    return place(
        client,
        NAME,
        candidates,
        OURS,
        sleep=clock.sleep,
        log=logs.append,
        duplicate_check_s=Timeouts.duplicate_check_s,
        clock=clock,
    )


FIRST_LOOK_S = Timeouts.duplicate_check_s / 64
"""When the sweep after an ambiguous create first looks for a duplicate."""


def listings(fake: FakeApi, *pod_lists: list[dict[str, Any]]) -> None:
    """What GET /v2/pods answers, call after call (the last one repeats)."""
    fake.queues[("GET", "/v2/pods")].clear()
    fake.on("GET", "/v2/pods", *(ok(200, {"pods": pods}) for pods in pod_lists))


def posted_gpus(fake: FakeApi) -> list[str]:
    return [b["gpu"]["id"] for b in fake.bodies("POST", "/v2/pods")]


@pytest.fixture(autouse=True)
def no_pods_yet(fake: FakeApi) -> None:
    fake.on("GET", "/v2/pods", ok(200, {"pods": []}))


def test_the_cheapest_candidate_in_stock_wins(
    client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    fake.on("POST", "/v2/pods", created("NVIDIA RTX A4000"))
    placement = run(client, clock, logs)
    assert (placement.pod.id, placement.candidate_index) == ("new1", 0)
    assert [a.outcome for a in placement.attempts] == ["created"]
    assert posted_gpus(fake) == ["NVIDIA RTX A4000"]


def test_400_no_capacity_moves_to_the_next_candidate(
    client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    fake.on("POST", "/v2/pods", problem(400, CAPACITY_DETAIL), created("NVIDIA RTX A5000"))
    placement = run(client, clock, logs)
    assert placement.candidate_index == 1
    assert [(a.gpu_id, a.outcome) for a in placement.attempts] == [
        ("NVIDIA RTX A4000", "no-capacity"),
        ("NVIDIA RTX A5000", "created"),
    ]
    assert clock.sleeps == []


def test_a_403_for_the_pool_skips_the_candidate(
    client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    pool = problem(403, "your account cannot access the requested pool")
    fake.on("POST", "/v2/pods", pool, created("NVIDIA RTX A5000"))
    placement = run(client, clock, logs)
    assert [a.outcome for a in placement.attempts] == ["forbidden", "created"]


def test_a_403_for_the_key_stops_at_once_naming_its_source_and_the_permission(
    fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    # RunPod's 403 for a valid key without access to the action: no candidate can succeed.
    fake.on("POST", "/v2/pods", problem(403, "access denied"))
    use = KeyUse("stack secret frutebox-infra:runpodApiKey", DEPLOY, Need.WRITE)
    api = RunPodClient(api_key=API_KEY, base_url=API, transport=httpx.MockTransport(fake),
                       sleep=clock.sleep, key_use=use)  # fmt: skip
    with pytest.raises(errors.KeyNotPermittedError) as caught:
        run(api, clock, logs)
    message = str(caught.value)
    assert "stack secret frutebox-infra:runpodApiKey" in message and "may not write" in message
    assert "For `pulumi up` and `pulumi destroy` the key needs write access" in message
    assert API_KEY not in message
    assert len(fake.calls("POST")) == 1


def test_every_candidate_refused_for_its_pool_names_the_keys_source(
    fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    fake.on("POST", "/v2/pods", problem(403, "your account cannot access the requested pool"))
    use = KeyUse("environment variable RUNPOD_API_KEY", DEPLOY, Need.WRITE)
    api = RunPodClient(api_key=API_KEY, base_url=API, transport=httpx.MockTransport(fake),
                       sleep=clock.sleep, key_use=use)  # fmt: skip
    with pytest.raises(errors.PlacementError, match="environment variable RUNPOD_API_KEY"):
        run(api, clock, logs)
    assert len(fake.calls("POST")) == len(CANDIDATES)


def test_every_candidate_out_of_capacity_fails_naming_the_last_detail(
    client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    fake.on("POST", "/v2/pods", problem(400, CAPACITY_DETAIL))
    with pytest.raises(errors.PlacementError) as caught:
        run(client, clock, logs)
    assert CAPACITY_DETAIL in str(caught.value)
    assert [a.outcome for a in caught.value.attempts] == ["no-capacity"] * 3
    assert posted_gpus(fake) == [b["gpu"]["id"] for b in CANDIDATES]


def test_every_candidate_refused_with_400_is_a_request_problem(
    client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    fake.on(
        "POST",
        "/v2/pods",
        problem(400, CAPACITY_DETAIL),
        problem(400, "network volume vol1 is in EU-SE-1; dataCenterIds must include it"),
    )
    with pytest.raises(errors.PlacementError) as caught:
        run(client, clock, logs)
    message = str(caught.value)
    assert "problem with the request" in message
    assert "dataCenterIds must include it" in message


def test_402_stops_without_trying_other_candidates(
    client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    fake.on("POST", "/v2/pods", problem(402, "insufficient balance"))
    with pytest.raises(errors.InsufficientBalanceError, match="add funds"):
        run(client, clock, logs)
    assert len(fake.calls("POST")) == 1


def test_422_stops_never_retries_and_shows_the_errors(
    client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    fake.on(
        "POST",
        "/v2/pods",
        problem(
            422,
            "Request validation failed.",
            errors=["$.gpu.count: 0 is less than the minimum of 1"],
        ),
    )
    with pytest.raises(errors.ContractError) as caught:
        run(client, clock, logs)
    assert "$.gpu.count: 0 is less than the minimum of 1" in str(caught.value)
    assert "never retried" in str(caught.value)
    assert len(fake.calls("POST")) == 1


def test_429_waits_retry_after_then_retries_the_same_candidate(
    client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    fake.on(
        "POST",
        "/v2/pods",
        problem(429, "slow", headers={"Retry-After": "9"}),
        created("NVIDIA RTX A4000"),
    )
    placement = run(client, clock, logs)
    assert placement.candidate_index == 0
    assert clock.sleeps == [9.0]
    assert posted_gpus(fake) == ["NVIDIA RTX A4000", "NVIDIA RTX A4000"]
    assert fake.calls("GET", "/v2/pods") == fake.calls("GET")[:1]  # a 429 created nothing


def test_429_retries_are_bounded(
    client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    fake.on("POST", "/v2/pods", problem(429, "slow", headers={"Retry-After": "1"}))
    with pytest.raises(errors.RateLimitedError, match="after 3 attempts"):
        run(client, clock, logs)
    assert len(fake.calls("POST")) == 3


def test_a_5xx_that_created_the_pod_is_adopted_not_created_twice(
    client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    listings(fake, [], [pod("ghost", name=NAME, gpu="NVIDIA RTX A4000")])
    fake.on("POST", "/v2/pods", problem(503, "upstream unavailable"))
    placement = run(client, clock, logs)
    assert (placement.pod.id, placement.attempts[0].outcome) == ("ghost", "adopted")
    assert len(fake.calls("POST")) == 1
    # ...and what the one ambiguous answer made is accounted for: nothing more to look for.
    assert fake.trail() == ["GET /v2/pods", "POST /v2/pods", "GET /v2/pods"]
    assert placement.sweep is not None and placement.sweep.done


def test_after_a_5xx_with_no_pod_the_same_candidate_is_retried_with_backoff(
    client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    listings(fake, [], [], [pod("new1", name=NAME)])
    fake.on("POST", "/v2/pods", problem(500, "oops"), created("NVIDIA RTX A4000"))
    placement = run(client, clock, logs)
    assert placement.attempts[0].outcome == "created"
    assert fake.trail() == ["GET /v2/pods", "POST /v2/pods", "GET /v2/pods", "POST /v2/pods"]
    # the backoff only: what the 500 may have made is looked for while the pod comes up
    assert clock.sleeps == [0.5]
    assert placement.sweep is not None and placement.sweep.unseen == 1


def test_a_pod_left_with_our_name_is_terminated_first_and_never_adopted(
    client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    old = pod("old", name=NAME, status="RUNNING")
    other = pod("other", name="someone-else", status="RUNNING")
    listings(fake, [old, other])  # still listed: not adopted
    fake.on("DELETE", "/v2/pods/old", ok(204))
    fake.on("POST", "/v2/pods", problem(502, "bad gateway"), created("NVIDIA RTX A4000"))
    placement = run(client, clock, logs)
    assert placement.pod.id == "new1"
    assert fake.trail()[:3] == ["GET /v2/pods", "DELETE /v2/pods/old", "POST /v2/pods"]
    assert [r.url.path for r in fake.calls("DELETE")] == ["/v2/pods/old"]
    assert any("old" in line and "orphan" in line for line in logs)


def test_an_orphan_that_cannot_be_terminated_stops_before_creating(
    client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    listings(fake, [pod("old", name=NAME)])
    fake.on("DELETE", "/v2/pods/old", problem(403, "no delete permission"))
    with pytest.raises(errors.MayStillBillError, match="could not be terminated") as caught:
        run(client, clock, logs)
    assert (caught.value.kind, caught.value.name, caught.value.ids) == ("pod", NAME, ("old",))
    assert "RunPod console" in str(caught.value)
    assert not fake.calls("POST")


def test_a_201_with_an_unreadable_body_is_looked_up_and_adopted(
    client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    listings(fake, [], [pod("made", name=NAME, gpu="NVIDIA RTX A4000")])
    fake.on("POST", "/v2/pods", httpx.Response(201, text="<html>upstream hiccup</html>"))
    placement = run(client, clock, logs)
    assert (placement.pod.id, placement.attempts[0].outcome) == ("made", "adopted")
    assert len(fake.calls("POST")) == 1


def test_a_201_with_an_unreadable_body_and_no_pod_is_retried(
    client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    listings(fake, [], [], [pod("new1", name=NAME)])
    fake.on("POST", "/v2/pods", httpx.Response(201, json={"no": "id"}), created("NVIDIA RTX A4000"))
    placement = run(client, clock, logs)
    assert (placement.pod.id, placement.attempts[0].outcome) == ("new1", "created")
    assert fake.trail() == ["GET /v2/pods", "POST /v2/pods", "GET /v2/pods", "POST /v2/pods"]
    assert any("unreadable answer" in line for line in logs)


def test_a_cancellation_mid_create_terminates_what_the_create_made(
    client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    def cancel(request: httpx.Request) -> httpx.Response:
        raise errors.Cancelled("Cancelled by SIGTERM before finishing.")

    listings(fake, [], [pod("made", name=NAME)])
    fake.on("POST", "/v2/pods", cancel)
    fake.on("DELETE", "/v2/pods/made", ok(204))
    with pytest.raises(errors.Cancelled):
        run(client, clock, logs)
    assert [r.url.path for r in fake.calls("DELETE")] == ["/v2/pods/made"]


def test_a_lost_connection_on_create_is_treated_like_a_5xx(
    client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    def drop(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    listings(fake, [], [pod("made", name=NAME)])
    fake.on("POST", "/v2/pods", drop)
    assert run(client, clock, logs).pod.id == "made"


def test_duplicates_found_after_a_5xx_are_terminated(
    client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    listings(
        fake,
        [],
        [pod("a", name=NAME), pod("b", name=NAME)],
        [pod("a", name=NAME), pod("b", name=NAME, status="TERMINATED")],
    )
    fake.on("POST", "/v2/pods", problem(503, "down"))
    fake.on("DELETE", "/v2/pods/b", ok(204))
    assert run(client, clock, logs).pod.id == "a"
    assert [r.url.path for r in fake.calls("DELETE")] == ["/v2/pods/b"]


def test_persistent_5xx_gives_up_after_checking_each_time(
    client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    fake.on("POST", "/v2/pods", problem(503, "down"))
    with pytest.raises(errors.ServerError, match="nothing was left behind"):
        run(client, clock, logs)
    assert len(fake.calls("POST")) == 3
    assert len(fake.calls("GET", "/v2/pods")) == 1 + 3


def test_when_the_lookup_after_a_5xx_fails_the_error_warns_of_a_billing_pod(
    client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    fake.queues[("GET", "/v2/pods")].clear()
    fake.on("GET", "/v2/pods", ok(200, {"pods": []}), problem(403, "no list permission"))
    fake.on("POST", "/v2/pods", problem(500, "oops"))
    with pytest.raises(errors.MayStillBillError, match="may exist and bill") as caught:
        run(client, clock, logs)
    assert (caught.value.kind, caught.value.name, caught.value.ids) == ("pod", NAME, ())
    assert f"look for pod {NAME} in the RunPod console" in str(caught.value)
    assert len(fake.calls("POST")) == 1


def test_when_the_second_look_for_a_duplicate_fails_the_error_warns_of_a_billing_pod(
    client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    # Two 503s; the second one's look adopts a pod, so one answer's result is still unseen.
    made = pod("made", name=NAME, gpu="NVIDIA RTX A4000")
    listings(fake, [], [], [made])
    fake.on("GET", "/v2/pods", problem(403, "no list permission"))
    fake.on("POST", "/v2/pods", problem(503, "down"), problem(503, "down"))
    placement = run(client, clock, logs)
    assert placement.pod.id == "made" and placement.sweep is not None
    with pytest.raises(errors.MayStillBillError, match="checking for a duplicate") as caught:
        placement.sweep.finish()
    assert (caught.value.kind, caught.value.name) == ("pod", NAME)
    assert f"pods named {NAME} in the RunPod console" in str(caught.value)
    assert clock.now == pytest.approx(FIRST_LOOK_S)  # the look came after the wait


@pytest.mark.parametrize(
    ("candidate", "expected"),
    [
        pytest.param({"gpu": {"id": "NVIDIA A40", "count": 2}}, ("NVIDIA A40", 2), id="both"),
        pytest.param({"gpu": {"id": "NVIDIA A40"}}, ("NVIDIA A40", 1), id="count-defaults-1"),
        pytest.param({"cpu": {"id": "cpu5c"}}, ("", 0), id="no-gpu"),
    ],
)
def test_gpu_of(candidate: dict[str, Any], expected: tuple[str, int]) -> None:
    assert gpu_of(candidate) == expected


def test_a_cancellation_while_looking_after_a_5xx_still_cleans_up(
    client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    def cancel(request: httpx.Request) -> httpx.Response:
        raise errors.Cancelled("Cancelled by SIGTERM before finishing.")

    fake.queues[("GET", "/v2/pods")].clear()
    fake.on(
        "GET",
        "/v2/pods",
        ok(200, {"pods": []}),
        cancel,
        ok(200, {"pods": [pod("made", name=NAME)]}),
    )
    fake.on("POST", "/v2/pods", problem(503, "down"))
    fake.on("DELETE", "/v2/pods/made", ok(204))
    with pytest.raises(errors.Cancelled):
        run(client, clock, logs)
    assert [r.url.path for r in fake.calls("DELETE")] == ["/v2/pods/made"]


def test_a_pod_that_only_shares_our_name_is_left_alone_and_never_adopted(
    client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    theirs = pod("theirs", name=NAME, status="RUNNING", owner="someoneelse0000")
    unmounted = {**pod("unmounted", name=NAME, status="RUNNING"), "mounts": {}}
    listings(fake, [theirs, unmounted])
    fake.on("POST", "/v2/pods", problem(503, "down"), created("NVIDIA RTX A4000"))
    placement = run(client, clock, logs)
    assert placement.pod.id == "new1"  # after the 503 neither was adopted
    assert fake.calls("DELETE") == []
    assert sum("leaving it alone" in line for line in logs) == 2


def test_a_late_duplicate_from_an_ambiguous_create_is_terminated_as_soon_as_it_lists(
    client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    # The first create's pod is not listed yet when we look right after its 503 ...
    late, kept = pod("late", name=NAME), pod("new1", name=NAME)
    listings(fake, [], [], [], [late], [late, kept])
    fake.on("POST", "/v2/pods", problem(503, "down"), created("NVIDIA RTX A4000"))
    fake.on("DELETE", "/v2/pods/late", ok(204))
    placement = run(client, clock, logs)
    # ... so the retry creates a second; the look goes on with backoff (here: at the step's
    # end, with no bring-up in between) and removes the first as soon as it is listed.
    assert placement.pod.id == "new1" and placement.sweep is not None
    placement.sweep.finish()
    assert [r.url.path for r in fake.calls("DELETE")] == ["/v2/pods/late"]
    assert clock.now == pytest.approx(3 * FIRST_LOOK_S)  # the second look, then done
    assert placement.sweep.done and not any("not seen" in line for line in logs)


def test_a_result_the_listing_never_shows_is_looked_for_the_whole_window_then_said(
    client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    fake.on("POST", "/v2/pods", problem(503, "down"), created("NVIDIA RTX A4000"))
    placement = run(client, clock, logs)
    assert placement.sweep is not None
    placement.sweep.finish()
    # looks with doubling waits fill the window, whatever the listing shows of the kept pod
    assert clock.sleeps[1:3] == [FIRST_LOOK_S - 0.5, 2 * FIRST_LOOK_S]
    assert clock.now == pytest.approx(Timeouts.duplicate_check_s, abs=0.01)
    assert any("was not seen within 120s" in line for line in logs)


def test_a_422_without_field_errors_points_at_the_detail_and_the_image_registry(
    client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    fake.on("POST", "/v2/pods", problem(422, "image 'x:1' could not be pulled"))
    with pytest.raises(errors.ContractError) as caught:
        run(client, clock, logs)
    message = str(caught.value)
    assert "could not be pulled" in message and "registry/images.yaml" in message
    assert "bug" not in message


@pytest.mark.parametrize(
    ("candidate", "expected"),
    [
        pytest.param({"cpu": {"id": "cpu3c", "vcpuCount": 2}}, ("cpu3c", 2), id="cpu-pod"),
        pytest.param({"cpu": {"id": "cpu3c"}}, ("cpu3c", 0), id="cpu-without-a-count"),
        pytest.param({"gpu": {"id": "NVIDIA A40", "count": 2}}, ("NVIDIA A40", 2), id="gpu-pod"),
        pytest.param({}, ("", 0), id="neither"),
    ],
)
def test_hardware_of_names_a_cpu_flavor_or_a_gpu(
    candidate: dict[str, Any], expected: tuple[str, int]
) -> None:
    assert hardware_of(candidate) == expected
