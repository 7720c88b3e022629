"""The typed v2 client: auth over verified TLS, parsing, retries of idempotent calls, the quota it
paces by, and error translation (a refused key named by its source, with what the command needs)."""

from __future__ import annotations

import inspect
import ssl
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from frutebox_infra.runpod import errors
from frutebox_infra.runpod.access import DEPLOY, KeyUse, Need, method_need, refusal_hint
from frutebox_infra.runpod.client import CREATE_TIMEOUT_S, RunPodClient, problem_of
from frutebox_infra.runpod.proxy import ProxyClient
from frutebox_infra.runpod.quota import Quota, Window, parse
from frutebox_infra.runpod.retrying import RetryPolicy
from frutebox_infra.runpod.tls import tls_context
from tests.runpod.conftest import API, API_KEY, PROXY, Clock, FakeApi, ok, pod, problem


def test_sends_the_bearer_key_and_parses_the_pod(client: RunPodClient, fake: FakeApi) -> None:
    fake.on("GET", "/v2/pods/pod1", ok(200, pod(status="RUNNING", cost=0.8, count=2)))
    got = client.get_pod("pod1")
    assert (got.status, got.cost, got.gpu and got.gpu.count, got.volume_id) == (
        "RUNNING",
        0.8,
        2,
        "vol1",
    )
    assert got.data_center_id == "EU-RO-1"
    assert fake.requests[0].headers["Authorization"] == f"Bearer {API_KEY}"
    assert str(fake.requests[0].url) == f"{API}/v2/pods/pod1"


def test_a_missing_api_key_names_the_stack_secret_and_the_variable() -> None:
    with pytest.raises(errors.ConfigurationError) as caught:
        RunPodClient(api_key="")
    assert "frutebox-infra:runpodApiKey" in str(caught.value)
    assert "RUNPOD_API_KEY" in str(caught.value)


def test_list_pods_reads_the_documented_envelope(client: RunPodClient, fake: FakeApi) -> None:
    fake.on("GET", "/v2/pods", ok(200, {"pods": [pod("a"), pod("b", name="other")]}))
    assert [p.id for p in client.list_pods()] == ["a", "b"]


@pytest.mark.parametrize("status", [400, 401, 402, 403, 404, 409, 418, 422])
def test_a_4xx_problem_is_raised_as_its_own_error_and_never_retried(
    client: RunPodClient, fake: FakeApi, status: int
) -> None:
    fake.on("PATCH", "/v2/pods/pod1", problem(status, "nope", errors=["$.image: bad"]))
    with pytest.raises(errors.ApiError) as caught:
        client.update_pod("pod1", {"image": "x"})
    # Which class each status gets is errors.api_error's rule (tests/runpod/test_errors.py).
    assert type(caught.value) is type(errors.api_error(caught.value.problem, operation=""))
    assert (caught.value.status, caught.value.problem.errors) == (status, ("$.image: bad",))
    assert "PATCH /v2/pods/pod1 failed" in str(caught.value) and "$.image: bad" in str(caught.value)
    assert len(fake.requests) == 1


def test_idempotent_calls_retry_5xx_with_backoff(
    client: RunPodClient, fake: FakeApi, clock: Clock
) -> None:
    fake.on(
        "GET", "/v2/pods/pod1", problem(502, "bad gateway"), problem(500, "oops"), ok(200, pod())
    )
    assert client.get_pod("pod1").id == "pod1"
    assert clock.sleeps == [0.5, 1.0]


def test_idempotent_calls_wait_retry_after_on_429(
    client: RunPodClient, fake: FakeApi, clock: Clock
) -> None:
    fake.on(
        "DELETE", "/v2/pods/pod1", problem(429, "slow down", headers={"Retry-After": "7"}), ok(204)
    )
    client.delete_pod("pod1")
    assert clock.sleeps == [7.0]


def test_retries_are_bounded(client: RunPodClient, fake: FakeApi) -> None:
    fake.on("GET", "/v2/pods", problem(503, "down"))
    with pytest.raises(errors.ServerError) as caught:
        client.list_pods()
    assert caught.value.status == 503
    assert len(fake.requests) == 3


def test_create_is_sent_once_even_on_5xx(client: RunPodClient, fake: FakeApi) -> None:
    fake.on("POST", "/v2/pods", problem(503, "down"))
    with pytest.raises(errors.ServerError):
        client.create_pod_once({"name": "x"})
    assert len(fake.requests) == 1


def test_a_body_that_is_not_the_contract_is_a_protocol_error(
    client: RunPodClient, fake: FakeApi
) -> None:
    fake.on("GET", "/v2/pods/pod1", httpx.Response(200, text="<html>proxy login</html>"))
    with pytest.raises(errors.ProtocolError, match="RUNPOD_API_URL"):
        client.get_pod("pod1")
    fake.on("GET", "/v2/network-volumes/v", ok(200, {"id": "v"}))
    with pytest.raises(errors.ProtocolError):
        client.get_volume("v")


def test_problem_of_reads_problem_json_and_tolerates_other_bodies() -> None:
    parsed = problem_of(problem(429, "rate", headers={"Retry-After": "12"}))
    assert (parsed.status, parsed.detail, parsed.retry_after_s) == (429, "rate", 12.0)
    dated = problem_of(
        httpx.Response(429, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})
    )
    assert dated.retry_after_s == 0.0  # a date in the past means "now"
    plain = problem_of(httpx.Response(502, text="Bad gateway\nfrom the edge"))
    assert (plain.status, plain.detail) == (502, "Bad gateway from the edge")
    assert problem_of(httpx.Response(500)).detail == "(empty body)"


@pytest.mark.parametrize(
    "base", ["https://api.test", "https://api.test/", "https://api.test/v2", "https://api.test/v2/"]
)
def test_a_pasted_v2_base_url_is_normalised(base: str, fake: FakeApi) -> None:
    fake.on("GET", "/v2/pods", ok(200, {"pods": []}))
    api = RunPodClient(api_key=API_KEY, base_url=base, transport=httpx.MockTransport(fake))
    assert api.list_pods() == []
    assert [r.url.path for r in fake.requests] == ["/v2/pods"]


def test_every_answer_updates_the_quota_the_client_paces_by(
    client: RunPodClient, fake: FakeApi
) -> None:
    quota = '"minute";r=11;t=30, "hour";r=2800;t=1800'
    fake.on("GET", "/v2/pods", httpx.Response(200, json={"pods": []}, headers={"RateLimit": quota}))
    assert client.quota.pace_s() == 0
    client.list_pods()
    # 10 spendable requests in the minute's 30 s left: one every 3 s at most.
    assert client.quota.pace_s() == pytest.approx(3.0)


def test_the_documented_rate_limit_example_reads_into_windows() -> None:
    quota = parse('"minute";r=0;t=12, "hour";r=2800;t=1812, "day";r=49500;t=45012')
    assert quota.windows == (
        Window("minute", 0, 12),
        Window("hour", 2800, 1812),
        Window("day", 49500, 45012),
    )


@pytest.mark.parametrize(
    ("header", "pace"),
    [
        ('"minute";r=0;t=12', 12.0),  # nothing left: wait for the reset
        ('"minute";r=1;t=12', 12.0),  # the last one is kept for a teardown
        ('"minute";r=31;t=30', 1.0),
        ('"minute";r=59;t=60, "hour";r=11;t=100', 10.0),  # the strictest window decides
    ],
)
def test_pace_spreads_what_is_left_over_the_time_left(header: str, pace: float) -> None:
    assert parse(header).pace_s() == pytest.approx(pace)


def test_no_rate_limit_header_or_an_unreadable_one_paces_nothing() -> None:
    assert Quota().pace_s() == 0
    assert parse('garbage, ;;, "minute";r=x').pace_s() == 0
    assert Quota().updated({}) == Quota()


def test_pod_logs_reads_the_event_stream_and_never_fails_for_want_of_it(
    client: RunPodClient, fake: FakeApi
) -> None:
    stream = (
        'id: 1\ndata: {"ts": "1", "source": "container", "line": "loading"}\n\n'
        'id: 2\ndata: {"ts": "2", "source": "container", "line": "CUDA error"}\n\n'
    )
    fake.on("GET", "/v2/pods/pod1/logs", httpx.Response(200, text=stream))
    assert client.pod_logs("pod1", tail=5) == ["loading", "CUDA error"]
    fake.on("GET", "/v2/pods/pod2/logs", problem(500, "down"))
    assert client.pod_logs("pod2") == []


def test_volume_calls_use_the_v2_paths(client: RunPodClient, fake: FakeApi) -> None:
    vol = {"id": "v1", "name": "w", "size": 50, "dataCenter": "EU-RO-1", "type": "STANDARD"}
    fake.on("POST", "/v2/network-volumes", ok(201, vol))
    fake.on("GET", "/v2/network-volumes", ok(200, {"networkVolumes": [vol]}))
    fake.on("PATCH", "/v2/network-volumes/v1", ok(200, {**vol, "size": 80}))
    fake.on("DELETE", "/v2/network-volumes/v1", ok(204))
    assert client.create_volume_once({"name": "w", "size": 50, "dataCenter": "EU-RO-1"}).id == "v1"
    assert [v.data_center for v in client.list_volumes()] == ["EU-RO-1"]
    assert client.update_volume("v1", {"size": 80}).size == 80
    client.delete_volume("v1")
    assert fake.trail() == [
        "POST /v2/network-volumes",
        "GET /v2/network-volumes",
        "PATCH /v2/network-volumes/v1",
        "DELETE /v2/network-volumes/v1",
    ]


def test_read_only_views_use_the_documented_paths_and_shapes(
    client: RunPodClient, fake: FakeApi
) -> None:
    gpu = {
        "id": "NVIDIA A40",
        "name": "A40",
        "price": {"secure": 0.4, "community": 0.0},
        "availability": "LOW",
        "dataCenters": [{"id": "EU-RO-1", "name": "Romania", "availability": "LOW"}],
        "cudaVersions": [{"version": "12.8", "available": True}],
    }
    fake.on("GET", "/v2/catalog/gpus", ok(200, {"gpus": [gpu]}))
    fake.on("GET", "/v2/catalog/datacenters", ok(200, {"dataCenters": [
        {"id": "EU-RO-1", "name": "Romania", "networkVolumeTypes": ["STANDARD"]}]}))  # fmt: skip
    record = {"podId": "p1", "totalAmount": 1.25, "startTime": "x", "endTime": "y"}
    fake.on("GET", "/v2/billing/pods", ok(200, {"records": [record], "metadata": {}}))
    [offer] = client.gpu_catalog()
    assert (offer.price.secure, offer.data_centers[0].availability) == (0.4, "LOW")
    assert offer.cuda_versions[0].version == "12.8"
    assert client.data_centers()[0].network_volume_types == ["STANDARD"]
    assert [(r.pod_id, r.total_amount) for r in client.pod_billing(bucket="day", last=7)] == [
        ("p1", 1.25)
    ]
    queries = [str(r.url.query, "ascii") for r in fake.requests]
    assert queries == ["include=AVAILABILITY&product=POD", "", "bucketSize=day&lastN=7"]


HTTPX_FAILURES: list[type[Exception]] = [
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.ReadTimeout,
    httpx.WriteTimeout,
    httpx.PoolTimeout,
    httpx.ReadError,
    httpx.WriteError,
    httpx.RemoteProtocolError,
    httpx.LocalProtocolError,
    httpx.ProxyError,
    httpx.UnsupportedProtocol,
    httpx.DecodingError,
    httpx.TooManyRedirects,
]

CALLS: list[Callable[[RunPodClient], Any]] = [
    lambda c: c.create_pod_once({"name": "x"}),
    lambda c: c.list_pods(),
    lambda c: c.get_pod("p"),
    lambda c: c.update_pod("p", {"image": "i"}),
    lambda c: c.restart_pod("p"),
    lambda c: c.delete_pod("p"),
    lambda c: c.create_volume_once({"name": "x", "size": 10, "dataCenter": "EU-RO-1"}),
    lambda c: c.list_volumes(),
    lambda c: c.get_volume("v"),
    lambda c: c.update_volume("v", {"size": 20}),
    lambda c: c.delete_volume("v"),
    lambda c: c.gpu_catalog(),
    lambda c: c.data_centers(),
    lambda c: c.pod_billing(bucket="hour", last=24),
]


def test_every_public_client_call_is_exercised_below() -> None:
    public = {
        n for n, f in inspect.getmembers(RunPodClient, inspect.isfunction) if not n.startswith("_")
    } - {"close", "pod_logs", "read_pod_logs"}  # logs are best effort: never raise
    assert len(public) == len(CALLS)


@given(failure=st.sampled_from(HTTPX_FAILURES), call=st.sampled_from(CALLS))
def test_no_httpx_exception_leaks_through_the_public_surface(
    failure: type[Exception], call: Callable[[RunPodClient], Any]
) -> None:
    def explode(request: httpx.Request) -> httpx.Response:
        if failure is httpx.TooManyRedirects or issubclass(failure, httpx.RequestError):
            raise failure("boom", request=request)
        raise failure("boom")

    api = RunPodClient(
        api_key=API_KEY,
        base_url=API,
        transport=httpx.MockTransport(explode),
        retry=RetryPolicy(max_attempts=2, backoff_s=0),
        sleep=lambda s: None,
    )
    with pytest.raises(errors.RunPodError) as caught:
        call(api)
    assert isinstance(caught.value, errors.TransportError)
    assert isinstance(caught.value.__cause__, httpx.HTTPError)
    proxy = ProxyClient(template=PROXY, transport=httpx.MockTransport(explode))
    assert proxy.probe("https://p-1.proxy.test/") is None
    with (
        pytest.raises(errors.TransportError),
        proxy.stream_post("https://p-1.proxy.test/api/pull", {}, read_timeout_s=1),
    ):
        pass


def test_an_unusable_api_url_is_a_transport_error_not_an_httpx_one() -> None:
    api = RunPodClient(api_key=API_KEY, base_url="htp:/nowhere", retry=RetryPolicy(max_attempts=1))
    with pytest.raises(errors.RunPodError):
        api.list_pods()


def test_a_create_waits_longer_than_the_proxys_100_s_cap(fake: FakeApi) -> None:
    seen: list[Any] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request.extensions["timeout"]["read"])
        return ok(201, pod())

    fake.on("POST", "/v2/pods", record)
    fake.on("GET", "/v2/pods", lambda r: (seen.append(r.extensions["timeout"]["read"]),
                                          ok(200, {"pods": []}))[1])  # fmt: skip
    api = RunPodClient(api_key=API_KEY, base_url=API, transport=httpx.MockTransport(fake))
    api.create_pod_once({"name": "x"})
    api.list_pods()
    assert seen[0] > 100 and seen[0] == CREATE_TIMEOUT_S and seen[1] < 100


@pytest.mark.parametrize(
    ("answer", "named"),
    [
        pytest.param(problem(401, "invalid API key"), True, id="401"),
        pytest.param(problem(403, "access denied"), True, id="403-the-key"),
        pytest.param(problem(403, "your account cannot access the requested pool"), False,
                     id="403-a-pool"),
        pytest.param(problem(404, "not found"), False, id="404"),
    ],
)
def test_a_refusal_of_the_key_names_its_source_never_its_value(
    fake: FakeApi, answer: httpx.Response, named: bool
) -> None:
    fake.on("POST", "/v2/network-volumes", answer)
    use = KeyUse("environment variable RUNPOD_API_KEY", DEPLOY, Need.WRITE)
    api = RunPodClient(api_key=API_KEY, base_url=API, transport=httpx.MockTransport(fake),
                       key_use=use)  # fmt: skip
    with pytest.raises(errors.ApiError) as caught:
        api.create_volume_once({"name": "v", "size": 10, "dataCenter": "EU-RO-1"})
    message = str(caught.value)
    assert ("environment variable RUNPOD_API_KEY" in message) is named
    assert ("write access" in message) is named
    assert API_KEY not in message


def test_a_log_that_cannot_be_read_is_none_not_empty(client: RunPodClient, fake: FakeApi) -> None:
    fake.on("GET", "/v2/pods/pod1/logs", problem(503, "down"))
    fake.on("GET", "/v2/pods/pod2/logs", httpx.Response(200, text=""))
    assert client.read_pod_logs("pod1", tail=5, source="system") is None
    assert client.read_pod_logs("pod2", tail=5, source="system") == []
    assert client.pod_logs("pod1") == []
    [sent] = [r for r in fake.requests if r.url.path == "/v2/pods/pod2/logs"]
    assert dict(sent.url.params) == {"tail": "5", "source": "system"}


SOURCE = "stack secret frutebox-infra:runpodApiKey"


@pytest.mark.parametrize(
    ("status", "method", "use", "says"),
    [
        pytest.param(401, "GET", KeyUse(SOURCE, DEPLOY, Need.WRITE),
                     ["does not accept the API key from " + SOURCE, "disabled",
                      "`pulumi up` and `pulumi destroy` the key needs write access"],
                     id="revoked-during-up"),
        pytest.param(403, "POST", KeyUse(SOURCE, DEPLOY, Need.WRITE),
                     [SOURCE + " is valid but may not write", "Read Only",
                      "permission All, or Restricted with Read/Write"],
                     id="read-only-during-up"),
        pytest.param(403, "GET", KeyUse("environment variable RUNPOD_API_KEY",
                                        "`frutebox status`", Need.READ),
                     ["may not read", "`frutebox status` the key needs read access",
                      "a Read Only key is enough"], id="no-read-for-status"),
        pytest.param(401, "GET", KeyUse(None, "`frutebox prices`", Need.READ),
                     ["the configured RunPod key", "RUNPOD_API_KEY",
                      "frutebox-infra:runpodApiKey"], id="unknown-source"),
    ],
)
def test_a_refused_key_is_named_by_its_source_with_what_the_command_needs(
    status: int, method: str, use: KeyUse, says: list[str]
) -> None:
    hint = refusal_hint(status, method, use)
    for part in says:
        assert part in hint


@pytest.mark.parametrize(
    ("method", "need"),
    [
        pytest.param("GET", Need.READ, id="get"),
        pytest.param("head", Need.READ, id="head"),
        *(pytest.param(m, Need.WRITE, id=m.lower()) for m in ("POST", "PATCH", "DELETE")),
    ],
)
def test_a_read_needs_read_access_and_a_write_write_access(method: str, need: Need) -> None:
    assert method_need(method) is need


def test_the_api_and_the_proxy_verify_certificates_and_hosts() -> None:
    context = tls_context()
    assert context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] > 0  # a CA bundle is loaded
