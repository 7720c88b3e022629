"""The real gateway — Caddy at the pinned version, with the configuration a pod runs — in
front of a stand-in engine: it proves every engine's route table from registry/routes.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest

from frutebox_infra.catalog.engine_routes import RouteUse
from frutebox_infra.catalog.schema import Runtime
from tests.factories import real_registry
from tests.recipes.gateway_process import running_gateway

KEY = "k3y-" + "a" * 40


@pytest.mark.parametrize("runtime", sorted(real_registry().engine_routes), ids=str)
def test_the_gateway_proves_the_engines_route_table(runtime: Runtime, tmp_path: Path) -> None:
    routes = real_registry().engine_routes[runtime]
    with running_gateway(routes, KEY, tmp_path) as gateway:
        for route in routes.routes:
            path = route.path.replace("/*", "/x")
            for method in route.methods:
                # Without the key, or with a wrong one: 401 on every route, the health path too.
                assert gateway.ask(method, path)[0] == 401, (method, path)
                wrong = {"Authorization": "Bearer not-the-key"}
                assert gateway.ask(method, path, wrong)[0] == 401, (method, path)
                # With the key: forwarded exactly when clients (or our probes) use the route.
                for keyed in ({"Authorization": f"Bearer {KEY}"}, {"X-Api-Key": KEY}):
                    before = len(gateway.seen.requests)
                    status, _ = gateway.ask(method, path, keyed)
                    reached = len(gateway.seen.requests) > before
                    if route.use is RouteUse.REFUSED:
                        assert (status, reached) == (403, False), (method, path)
                    else:
                        assert (status, reached) == (200, True), (method, path)
        # A route nobody listed, or a listed path by another method: refused with the key.
        keyed = {"Authorization": f"Bearer {KEY}"}
        assert gateway.ask("GET", "/no/such/route", keyed)[0] == 403
        assert gateway.ask("DELETE", routes.forwarded[0].path.replace("/*", "/x"), keyed)[0] == 403
        # The key never reaches the engine (nor its logs).
        for _, _, headers in gateway.seen.requests:
            assert "authorization" not in headers and "x-api-key" not in headers


@pytest.mark.parametrize(
    "path",
    [
        "/v1/chat/completions/../../api/pull",
        "/v1/chat/completions/%2e%2e/%2e%2e/api/pull",
        "//api/pull",
        "/v1/models/..%2fapi%2fpull",
    ],
)
def test_a_path_that_could_read_otherwise_upstream_is_refused(path: str, tmp_path: Path) -> None:
    routes = real_registry().engine_routes[Runtime.OLLAMA]
    with running_gateway(routes, KEY, tmp_path) as gateway:
        status, _ = gateway.ask("POST", path, {"Authorization": f"Bearer {KEY}"})
        assert status in (400, 403) and not gateway.seen.requests


def test_the_configuration_holds_no_key_and_the_gateway_reads_it_from_the_env(
    tmp_path: Path,
) -> None:
    routes = real_registry().engine_routes[Runtime.VLLM]
    with running_gateway(routes, KEY, tmp_path) as gateway:
        assert KEY not in gateway.config and KEY not in (tmp_path / "Caddyfile").read_text()
        ok = gateway.ask("POST", "/v1/chat/completions", {"Authorization": f"Bearer {KEY}"})
        assert ok[0] == 200


@pytest.mark.parametrize("key", ["", "too-short"], ids=["unset", "short"])
def test_a_gateway_without_a_real_key_fails_closed(key: str, tmp_path: Path) -> None:
    # An empty key would otherwise let an empty X-Api-Key header through.
    routes = real_registry().engine_routes[Runtime.OLLAMA]
    with running_gateway(routes, key, tmp_path) as gateway:
        for headers in ({}, {"X-Api-Key": ""}, {"X-Api-Key": key}, {"Authorization": "Bearer "}):
            assert gateway.ask("POST", "/api/chat", headers)[0] == 503
        assert not gateway.seen.requests
