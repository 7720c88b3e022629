"""API keys with scopes: a wrong or revoked key is RunPod's 401, a Read Only key's write its 403."""

from __future__ import annotations

import json

import pytest

from frutebox_infra.emulator.catalog import Catalog
from frutebox_infra.emulator.clock import ManualClock
from frutebox_infra.emulator.errors import ApiProblem
from frutebox_infra.emulator.keys import Scope, authenticate, parse_key, permit
from frutebox_infra.emulator.realism import Realism
from frutebox_infra.emulator.routes import App
from frutebox_infra.emulator.state import Account
from tests.emulator.conftest import OPENAPI, pod_body

KEYS = {"rk-all": Scope.ALL, "rk-read": Scope.READ_ONLY, "rk-gone": Scope.REVOKED}


@pytest.mark.parametrize(
    ("header", "any_key", "expected"),
    [
        pytest.param("Bearer rk-all", False, Scope.ALL, id="all"),
        pytest.param("Bearer rk-read", False, Scope.READ_ONLY, id="read-only"),
        pytest.param("Bearer rk-other", True, Scope.ALL, id="any-key-accepts-an-unknown-one"),
        pytest.param("Bearer rk-gone", True, 401, id="revoked-even-with-any-key"),
        pytest.param("Bearer rk-other", False, 401, id="unknown"),
        pytest.param("Bearer ", True, 401, id="empty"),
        pytest.param("Basic rk-all", True, 401, id="not-bearer"),
    ],
)
def test_authenticate(header: str, any_key: bool, expected: Scope | int) -> None:
    if isinstance(expected, Scope):
        assert authenticate(KEYS, header, any_key=any_key) is expected
        return
    with pytest.raises(ApiProblem) as caught:
        authenticate(KEYS, header, any_key=any_key)
    assert caught.value.status == expected


@pytest.mark.parametrize(
    ("scope", "method", "refused"),
    [
        pytest.param(Scope.READ_ONLY, "GET", False, id="read-only-reads"),
        *(
            pytest.param(Scope.READ_ONLY, m, True, id=f"read-only-{m}")
            for m in ("POST", "PATCH", "DELETE")
        ),
        pytest.param(Scope.ALL, "DELETE", False, id="all-writes"),
    ],
)
def test_permit(scope: Scope, method: str, refused: bool) -> None:
    if not refused:
        permit(scope, method)
        return
    with pytest.raises(ApiProblem) as caught:
        permit(scope, method)
    assert (caught.value.status, caught.value.detail) == (403, "access denied")


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param("rk1", ("rk1", Scope.ALL), id="bare"),
        pytest.param("rk1:read-only", ("rk1", Scope.READ_ONLY), id="read-only"),
        pytest.param("rk1:revoked", ("rk1", Scope.REVOKED), id="revoked"),
        pytest.param("rk1:root", ValueError, id="unknown-scope"),
        pytest.param(":all", ValueError, id="no-key"),
    ],
)
def test_parse_key(spec: str, expected: tuple[str, Scope] | type[Exception]) -> None:
    if isinstance(expected, tuple):
        assert parse_key(spec) == expected
        return
    with pytest.raises(ValueError, match=spec):
        parse_key(spec)


def app_with_keys(clock: ManualClock) -> App:
    realism = Realism.realistic(api_keys=dict(KEYS), any_key=False)
    return App(Account(Catalog.builtin(), realism=realism, clock=clock), openapi=OPENAPI)


def send(app: App, method: str, path: str, key: str, body: bytes = b"") -> tuple[int, object]:
    response = app.handle(method, path, {"authorization": f"Bearer {key}"}, body)
    return response.status, response.body


def test_a_read_only_key_reads_and_gets_runpods_403_on_every_write(clock: ManualClock) -> None:
    app = app_with_keys(clock)
    assert send(app, "GET", "/v2/pods", "rk-read")[0] == 200
    body = b'{"name": "w", "size": 20, "dataCenter": "EU-RO-1"}'
    status, problem = send(app, "POST", "/v2/network-volumes", "rk-read", body)
    assert status == 403
    assert problem == {"title": "Forbidden", "status": 403, "detail": "access denied"}
    assert app.account.volumes == {}  # refused: nothing was created
    assert send(app, "POST", "/v2/network-volumes", "rk-all", body)[0] == 201


def test_a_key_revoked_in_the_console_is_401_from_then_on(clock: ManualClock) -> None:
    app = app_with_keys(clock)
    assert send(app, "GET", "/v2/pods", "rk-all")[0] == 200
    changed = app.handle("POST", "/_emulator/keys", {}, b'{"key": "rk-all", "scope": "revoked"}')
    assert changed.status == 200
    status, problem = send(app, "GET", "/v2/pods", "rk-all")
    assert status == 401
    assert problem == {"title": "Unauthorized", "status": 401, "detail": "invalid API key"}
    bad = app.handle("POST", "/_emulator/keys", {}, b'{"key": "rk-all", "scope": "root"}')
    assert bad.status == 400


def test_a_refused_key_costs_no_quota_but_a_forbidden_write_does(clock: ManualClock) -> None:
    realism = Realism.realistic(api_keys=dict(KEYS), any_key=False, quotas=(("minute", 2, 60.0),))
    app = App(Account(Catalog.builtin(), realism=realism, clock=clock), openapi=OPENAPI)
    assert send(app, "GET", "/v2/pods", "rk-gone")[0] == 401
    raw = json.dumps(pod_body()).encode()
    assert send(app, "POST", "/v2/pods", "rk-read", raw)[0] == 403
    assert send(app, "GET", "/v2/pods", "rk-read")[0] == 200
    assert send(app, "GET", "/v2/pods", "rk-read")[0] == 429
