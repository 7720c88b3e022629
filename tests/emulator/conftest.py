"""Fixtures for the emulator: a manual clock, an account on it, the in-process app, a caller."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from frutebox_infra.emulator.catalog import Catalog
from frutebox_infra.emulator.clock import ManualClock
from frutebox_infra.emulator.openapi import OpenApi
from frutebox_infra.emulator.routes import App, Response
from frutebox_infra.emulator.state import Account

Call = Callable[..., Response]
OPENAPI = OpenApi()
"""Built once: compiling the document's validators is the slow part."""


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def account(clock: ManualClock) -> Account:
    return Account(Catalog.builtin(), clock=clock)


@pytest.fixture
def app(account: Account) -> App:
    return App(account, proxy_base="http://127.0.0.1:9", openapi=OPENAPI)


@pytest.fixture
def call(app: App) -> Call:
    def send(
        method: str,
        path: str,
        body: Any = None,
        *,
        auth: str | None = "Bearer t",
        raw: bytes | None = None,
    ) -> Response:
        headers = {"authorization": auth} if auth is not None else {}
        payload = raw if raw is not None else b"" if body is None else json.dumps(body).encode()
        return app.handle(method, path, headers, payload)

    return send


def valid(schema: str, body: Any) -> Any:
    """`body`, after checking it against the official document's response schema."""
    assert OPENAPI.errors(schema, body) == []
    return body


def pod_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "p",
        "image": "img:1",
        "ports": ["8080/http"],
        "gpu": {"id": "NVIDIA A40", "count": 1},
        "dataCenterIds": ["EU-RO-1"],
    }
    body.update(overrides)
    return body


def network(volume_id: str) -> dict[str, Any]:
    """A create's `mounts` with the network volume `volume_id` at /workspace."""
    return {"network": [{"volumeId": volume_id, "path": "/workspace"}]}
