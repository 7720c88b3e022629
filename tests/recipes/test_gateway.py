"""The gateway's configuration, written from registry/routes.yaml: pure text, no key in it."""

from __future__ import annotations

import re

from frutebox_infra.catalog.engine_routes import RouteUse
from frutebox_infra.catalog.schema import Runtime
from frutebox_infra.plumbing.paths import REPO_ROOT
from frutebox_infra.recipes.gateway import KEY_ENV, caddyfile, engine_port
from tests.factories import real_registry


def test_one_matcher_per_forwarded_route_and_none_for_a_refused_one() -> None:
    for runtime, routes in real_registry().engine_routes.items():
        text = caddyfile(routes, port=8080, upstream_port=18080)
        matched = re.findall(r"\tmethod ([A-Z ]+)\n\t\tpath (\S+)\n", text)
        assert matched == [(" ".join(r.methods), r.path) for r in routes.forwarded], runtime
        refused_only = {r.path for r in routes.refused} - {r.path for r in routes.forwarded}
        assert not refused_only & {path for _, path in matched}, runtime
        assert "http://:8080 {" in text and "reverse_proxy 127.0.0.1:18080" in text
        assert "{$" + KEY_ENV + "}" in text and "admin off" in text


def test_the_engine_moves_to_a_loopback_port_of_its_own() -> None:
    ports = {image.port for image in real_registry().images.values()}
    assert not ports & {engine_port(p) for p in ports}
    assert all(engine_port(p) < 65536 for p in ports)


def test_the_health_route_is_forwarded_with_the_key_like_a_client_route() -> None:
    routes = real_registry().engine_routes[Runtime.OLLAMA]
    assert [r.path for r in routes.forwarded if r.use is RouteUse.HEALTH] == ["/api/version"]


def test_the_gateway_built_here_is_the_version_pods_fetch() -> None:
    gateway = real_registry().gateway
    assert gateway is not None
    go_mod = (REPO_ROOT / "tools" / "gateway" / "go.mod").read_text()
    assert f"require github.com/caddyserver/caddy/v2 {gateway.version}\n" in go_mod
    assert gateway.url.endswith(f"caddy_{gateway.version[1:]}_linux_amd64.tar.gz")
