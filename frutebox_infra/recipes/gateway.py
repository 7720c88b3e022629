"""The gateway in front of every engine: its configuration (a Caddyfile), written from the
engine's routes in registry/routes.yaml.

Deny by default: a request without the stack's key (`Authorization: Bearer KEY` or
`X-Api-Key: KEY`) is answered 401 whatever it asks for; with the key, only the engine's
`client` and `health` routes reach the engine, on loopback, and everything else is answered
403. The key never appears in the configuration: Caddy reads it from the pod's environment
(`{$FRUTEBOX_SERVING_KEY}`) when it loads the file, and strips it from what it forwards.
"""

from __future__ import annotations

from frutebox_infra.catalog.engine_routes import EngineRoutes

KEY_ENV = "FRUTEBOX_SERVING_KEY"
"""The pod variable that carries the stack's serving key to the gateway (never stored)."""

ENGINE_PORT_OFFSET = 10_000
"""The engine listens on loopback at its image's port plus this; the gateway takes the
image's port itself, the one the pod publishes."""

MIN_KEY_LENGTH = 32
"""The shortest serving key the gateway takes; a minted key is longer (stack/serving_key)."""

NO_KEY_STATUS = 503
UNKEYED_STATUS = 401
REFUSED_STATUS = 403


def engine_port(port: int) -> int:
    """Where the engine listens (on 127.0.0.1 only) when the gateway publishes `port`."""
    return port + ENGINE_PORT_OFFSET


def caddyfile(routes: EngineRoutes, *, port: int, upstream_port: int) -> str:
    """The gateway's whole configuration for one engine: listen on `port` on every interface,
    forward the engine's client and health routes to 127.0.0.1:`upstream_port`."""
    key = "{$" + KEY_ENV + "}"
    lines = [
        f"# The frutebox gateway for {routes.image}: written from registry/routes.yaml by",
        "# frutebox_infra/recipes/gateway.py; every change is a change there.",
        "{",
        "\tadmin off",
        "\tpersist_config off",
        "\tauto_https off",
        "\tlog {",
        "\t\toutput stderr",
        "\t\tlevel WARN",
        "\t}",
        "}",
        "",
        "(engine) {",
        f"\treverse_proxy 127.0.0.1:{upstream_port} {{",
        "\t\theader_up -Authorization",
        "\t\theader_up -X-Api-Key",
        "\t}",
        "}",
        "",
        f"http://:{port} {{",
        # A path that could read differently to the matcher and to the engine is refused
        # before anything else: dot segments, doubled slashes, escapes, backslashes.
        "\t@odd path_regexp (\\.\\.|//|%|\\\\)",
        # Fail closed on a key too short to be one (unset, empty): an empty key would let an
        # empty X-Api-Key header through. The launch refuses to start without it as well.
        f"\t@keyless expression \"'{key}'.size() < {MIN_KEY_LENGTH}\"",
        "\t@unkeyed {",
        f'\t\tnot header Authorization "Bearer {key}"',
        f'\t\tnot header X-Api-Key "{key}"',
        "\t}",
    ]
    # One matcher and one handler per forwarded route (Caddy names a matcher once); the
    # handlers are tried in this order, and each sends to the same upstream (the snippet).
    for n, route in enumerate(routes.forwarded):
        lines += [
            f"\t@route{n} {{",
            f"\t\tmethod {' '.join(route.methods)}",
            f"\t\tpath {route.path}",
            "\t}",
        ]
    lines += [
        "",
        "\thandle @keyless {",
        f'\t\trespond "the gateway has no serving key" {NO_KEY_STATUS}',
        "\t}",
        "\thandle @odd {",
        f'\t\trespond "refused: not a route this model\'s clients use" {REFUSED_STATUS}',
        "\t}",
        "\thandle @unkeyed {",
        '\t\theader WWW-Authenticate "Bearer"',
        "\t\trespond \"the stack's serving key is required:"
        f' Authorization: Bearer KEY, or X-Api-Key: KEY" {UNKEYED_STATUS}',
        "\t}",
    ]
    lines += [
        f"\thandle @route{n} {{\n\t\timport engine\n\t}}" for n in range(len(routes.forwarded))
    ]
    lines += [
        "\thandle {",
        f'\t\trespond "refused: not a route this model\'s clients use" {REFUSED_STATUS}',
        "\t}",
        "}",
    ]
    return "\n".join(lines) + "\n"
