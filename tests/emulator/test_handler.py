"""The HTTP server around the app: whole answers with their own type and length, keep-alive,
IPv6, and a client hanging up is not an error."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterator

import pytest

from frutebox_infra.emulator.catalog import Catalog
from frutebox_infra.emulator.handler import EmulatorHTTPServer
from frutebox_infra.emulator.routes import App
from frutebox_infra.emulator.state import Account
from tests.emulator.conftest import OPENAPI, pod_body

AUTH = {"Authorization": "Bearer t"}


def serve(host: str) -> Iterator[EmulatorHTTPServer]:
    app = App(Account(Catalog.builtin()), openapi=OPENAPI)
    server = EmulatorHTTPServer((host, 0), app)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01})
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def server() -> Iterator[EmulatorHTTPServer]:
    yield from serve("127.0.0.1")


def connect(server: EmulatorHTTPServer) -> http.client.HTTPConnection:
    host, port = server.server_address[:2]
    return http.client.HTTPConnection(str(host), int(port), timeout=5)


def test_answers_are_json_with_their_length_on_one_kept_alive_connection(
    server: EmulatorHTTPServer,
) -> None:
    connection = connect(server)
    connection.request("POST", "/v2/pods", json.dumps(pod_body()), AUTH)
    created = connection.getresponse()
    payload = created.read()
    assert created.status == 201 and created.getheader("Content-Type") == "application/json"
    assert int(created.getheader("Content-Length") or -1) == len(payload)
    sock = connection.sock
    connection.request("DELETE", f"/v2/pods/{json.loads(payload)['id']}", headers=AUTH)
    deleted = connection.getresponse()
    assert (deleted.status, deleted.read(), deleted.getheader("Content-Type")) == (204, b"", None)
    assert connection.sock is sock  # the same connection answered both
    connection.close()


def test_problems_and_raw_bodies_keep_their_own_content_type(server: EmulatorHTTPServer) -> None:
    connection = connect(server)
    connection.request("GET", "/v2/pods")
    missing = connection.getresponse()
    assert missing.status == 401
    assert missing.getheader("Content-Type") == "application/problem+json"
    assert json.loads(missing.read())["detail"] == "missing bearer token"
    pod_id = server.app.account.create_pod(pod_body()).id
    connection.request("GET", f"/v2/pods/{pod_id}/logs", headers=AUTH)
    logs = connection.getresponse()
    assert logs.getheader("Content-Type") == "text/event-stream"
    assert b"pulling image img:1" in logs.read()
    connection.close()


def test_an_ipv6_loopback_is_served() -> None:
    if not socket.has_ipv6:
        pytest.skip("this machine has no IPv6")
    try:
        servers = serve("::1")
        server = next(servers)
    except OSError as exc:  # IPv6 compiled in but not configured
        pytest.skip(f"no IPv6 loopback here: {exc}")
    try:
        assert server.address_family == socket.AF_INET6
        connection = connect(server)
        connection.request("GET", "/v2/pods", headers=AUTH)
        assert connection.getresponse().status == 200
        connection.close()
    finally:
        next(servers, None)


def test_a_client_that_hangs_up_mid_answer_is_not_reported(
    server: EmulatorHTTPServer, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        raise BrokenPipeError(32, "Broken pipe")
    except BrokenPipeError:
        server.handle_error(None, ("127.0.0.1", 1))
    assert capsys.readouterr().err == ""
    try:
        raise KeyError("a real bug")
    except KeyError:
        server.handle_error(None, ("127.0.0.1", 1))
    assert "a real bug" in capsys.readouterr().err
