"""A pod's ports through the RunPod proxy: URLs from the template, never the API key, answers
read as "nothing yet" rather than raised, and a broken stream as a TransportError."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from frutebox_infra.runpod import errors
from frutebox_infra.runpod.proxy import ProxyClient
from tests.runpod.conftest import PROXY, Answer, FakeApi, ok

BASE = "https://abc-8080.proxy.test"


@pytest.fixture
def proxy(fake: FakeApi) -> Iterator[ProxyClient]:
    client = ProxyClient(template=PROXY, transport=httpx.MockTransport(fake))
    yield client
    client.close()


def silence(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("no route", request=request)


def test_proxy_urls_fill_the_template_and_never_carry_the_api_key(
    proxy: ProxyClient, fake: FakeApi
) -> None:
    url = proxy.url("abc", 8080)
    assert url == BASE
    fake.on("GET", url + "/health", ok(200, {}))
    assert proxy.probe(url + "/health") == 200
    assert "authorization" not in fake.requests[0].headers


@pytest.mark.parametrize(
    "template",
    [
        pytest.param("https://proxy.test/{port}", id="no-pod-id"),
        pytest.param("https://{podId}.proxy.test", id="no-port"),
    ],
)
def test_a_proxy_template_without_placeholders_is_refused(template: str) -> None:
    with pytest.raises(errors.ConfigurationError, match="RUNPOD_PROXY_URL_TEMPLATE"):
        ProxyClient(template=template)


def test_a_probe_reports_the_status_or_none_while_nothing_answers(
    proxy: ProxyClient, fake: FakeApi
) -> None:
    fake.on("GET", BASE + "/health", ok(502, {}))
    fake.on("GET", BASE + "/down", silence)
    assert proxy.probe(BASE + "/health") == 502
    assert proxy.probe(BASE + "/down") is None


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        pytest.param(ok(200, ["a.safetensors"]), ["a.safetensors"], id="2xx-json"),
        pytest.param(httpx.Response(200, text="<html>loading</html>"), None, id="2xx-not-json"),
        pytest.param(ok(404, {"error": "no"}), None, id="4xx-json"),
        pytest.param(silence, None, id="no-answer"),
    ],
)
def test_get_json_is_the_body_only_of_a_2xx_json_answer(
    proxy: ProxyClient, fake: FakeApi, answer: Answer, expected: list[str] | None
) -> None:
    fake.on("GET", BASE + "/models/checkpoints", answer)
    assert proxy.get_json(BASE + "/models/checkpoints") == expected


def test_delete_json_sends_its_body_and_reports_the_status(
    proxy: ProxyClient, fake: FakeApi
) -> None:
    fake.on("DELETE", BASE + "/api/delete", ok(200, {}))
    assert proxy.delete_json(BASE + "/api/delete", {"model": "qwen3:8b"}) == 200
    assert json.loads(fake.requests[0].content) == {"model": "qwen3:8b"}
    fake.on("DELETE", BASE + "/gone", silence)
    assert proxy.delete_json(BASE + "/gone", {}) is None


def test_a_stream_that_breaks_while_being_read_is_a_transport_error() -> None:
    def lines() -> Iterator[bytes]:
        yield b'{"status": "pulling manifest"}\n'
        raise httpx.ReadError("connection reset")

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=lines())

    proxy = ProxyClient(template=PROXY, transport=httpx.MockTransport(answer))
    seen: list[str] = []
    with (
        pytest.raises(errors.TransportError, match="connection reset"),
        proxy.stream_post("https://p-1.proxy.test/api/pull", {}, read_timeout_s=1) as response,
    ):
        seen.extend(response.iter_lines())
    assert seen == ['{"status": "pulling manifest"}']


def test_a_stream_gets_the_read_timeout_it_asks_for(proxy: ProxyClient, fake: FakeApi) -> None:
    seen: list[object] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request.extensions["timeout"]["read"])
        return ok(200, {})

    fake.on("POST", BASE + "/api/pull", record)
    with proxy.stream_post(BASE + "/api/pull", {"model": "m"}, read_timeout_s=42) as response:
        assert response.status_code == 200
    assert seen == [42]
