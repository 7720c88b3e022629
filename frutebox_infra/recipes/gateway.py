"""The gateway in front of every engine: its configuration (a Caddyfile), written from the
engine's routes in registry/routes.yaml.

Deny by default: a request without the stack's key (`Authorization: Bearer KEY` or
`X-Api-Key: KEY`) is answered 401 whatever it asks for; with the key, only the engine's
`client`, `health` and `metrics` routes reach the engine, on loopback, and everything else is
answered 403. The key never appears in the configuration: Caddy reads it from the pod's environment
(`{$FRUTEBOX_SERVING_KEY}`) when it loads the file, and strips it from what it forwards.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from frutebox_infra.catalog.engine_routes import EngineRoutes, Route, RouteUse
from frutebox_infra.catalog.schema import GatewayRelease
from frutebox_infra.recipes.archives import RELEASE_PY, KeptArchive, release_check
from frutebox_infra.recipes.counts import COUNTS_ENV, KEEPER_ENV, CountsKeeper, keeper_env

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


def caddyfile(
    routes: EngineRoutes, *, port: int, upstream_port: int, counts: CountsKeeper | None = None
) -> str:
    """The gateway's whole configuration for one engine: listen on `port` on every interface,
    forward the engine's client, health and metrics routes to 127.0.0.1:`upstream_port`, and,
    where a counts keeper keeps the engine's counters, `GET counts.path` to the keeper."""
    forwarded = _forwarded(routes, counts)
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
        *_upstream("engine", upstream_port),
        *(_upstream("counts", counts.port) if counts is not None else ()),
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
    # handlers are tried in this order, and each sends to the engine's snippet (the counts
    # keeper's, for the keeper's route).
    for n, route in enumerate(forwarded):
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
        f"\thandle @route{n} {{\n\t\timport {_snippet(route, counts)}\n\t}}"
        for n, route in enumerate(forwarded)
    ]
    lines += [
        "\thandle {",
        f'\t\trespond "refused: not a route this model\'s clients use" {REFUSED_STATUS}',
        "\t}",
        "}",
    ]
    return "\n".join(lines) + "\n"


def _upstream(name: str, upstream_port: int) -> list[str]:
    """A snippet that forwards to 127.0.0.1:`upstream_port` without the key's headers."""
    return [
        f"({name}) {{",
        f"\treverse_proxy 127.0.0.1:{upstream_port} {{",
        "\t\theader_up -Authorization",
        "\t\theader_up -X-Api-Key",
        "\t}",
        "}",
        "",
    ]


def _forwarded(routes: EngineRoutes, counts: CountsKeeper | None) -> tuple[Route, ...]:
    """The routes the gateway forwards: the engine's, and the keeper's where the engine has no
    route of that path (ComfyUI and Ollama have no /metrics)."""
    if counts is None or any(r.path == counts.path for r in routes.forwarded):
        return routes.forwarded
    return (*routes.forwarded, Route(path=counts.path, methods=("GET",), use=RouteUse.METRICS))


def _snippet(route: Route, counts: CountsKeeper | None) -> str:
    """The keeper's routes go to the keeper (its counters, and the answers it counts)."""
    return "counts" if counts is not None and route.path in counts.routes else "engine"


CONFIG_ENV = "FRUTEBOX_GATEWAY_CONFIG"
"""The pod variable holding the gateway's configuration (the Caddyfile above; no key in it)."""

GATEWAY_DIR = "/workspace/frutebox/gateway"
"""Where the checked release archive lives on the stack's volume, one file per version."""

RUN_DIR = "/tmp/frutebox-gateway"
"""On the container disk: the program unpacked from the checked archive, and its config."""

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True, kw_only=True)
class GatewaySetup:
    """What a pod's gateway is made of: the pinned release and the engine's routes."""

    release: GatewayRelease
    routes: EngineRoutes
    volume_dir: str = GATEWAY_DIR
    run_dir: str = RUN_DIR

    @property
    def archive(self) -> str:
        """The archive's path on the volume."""
        return f"{self.volume_dir}/{self.release.name}-{self.release.version}.tar.gz"

    @property
    def program(self) -> str:
        """The gateway's program, unpacked from the checked archive onto the container disk."""
        return f"{self.run_dir}/{self.release.name}"

    @property
    def config(self) -> str:
        """Its configuration file, written from the pod's env at every start."""
        return f"{self.run_dir}/Caddyfile"

    @property
    def kept_archive(self) -> KeptArchive:
        """What the seeding CPU pod places for a seeded pod's gateway."""
        release = self.release
        return KeptArchive(path=self.archive, url=release.url, algorithm="sha512",
                           digest=release.sha512, size_gb=release.archive_mb / 1000)  # fmt: skip


def gateway_start(setup: GatewaySetup, *, python: str, fetch: bool) -> list[str]:
    """Shell lines that start the gateway before the engine, or exit 1: the key must be set,
    the release checked (fetched first when `fetch`: no CPU pod put it on the volume;
    recipes/archives.py `fetches` says when), and
    `caddy start` returns only once the gateway serves, non-zero when it cannot."""
    program, config = setup.program, setup.config
    check = release_check(setup.kept_archive, who="gateway", python=python, fetch=fetch,
                          dest=program, member=setup.release.member)  # fmt: skip
    return [
        f'if [ "${{#{KEY_ENV}}}" -lt {MIN_KEY_LENGTH} ]; then'
        f' echo "gateway: {KEY_ENV} is not set: refusing to serve" >&2; exit 1; fi',
        f"{shlex.join(check)} || exit 1",
        f"printf '%s' \"${CONFIG_ENV}\" > {config}",
        f"{program} start --config {config} --adapter caddyfile || exit 1",
    ]


def gateway_env(
    setup: GatewaySetup, port: int, *, counts: CountsKeeper | None = None
) -> dict[str, str]:
    """The pod variables the gateway reads (its key is filled by the deploy step); with
    `counts`, those of the keeper that keeps the engine's counters as well."""
    config = caddyfile(setup.routes, port=port, upstream_port=engine_port(port), counts=counts)
    return {CONFIG_ENV: config, **(keeper_env(counts) if counts is not None else {})}


def starts_gateway(words: Sequence[str]) -> bool:
    """Whether a launch (the pod's command words) starts the gateway before its engine."""
    return any(
        " start --config " in word and "/Caddyfile --adapter caddyfile || exit 1" in word
        for word in words
    )


# --- The start hook: the gateway in an image whose ENTRYPOINT runs a Python program --------
#
# RunPod takes no entrypoint override, so an image whose ENTRYPOINT is its engine (vLLM's
# `vllm serve`) or a dispatcher (llama.cpp's tools.sh) runs no launch script of ours. Their
# Python does read PYTHONPATH, and CPython's `site` imports the first `sitecustomize` on
# sys.path at every interpreter start, before the program's own code, with sys.argv already set
# (Python docs, `site` module). The hook below is that module: a file the seeding CPU pod puts
# on the volume (seeding/manifest.py), named by its own digest, which starts the gateway exactly
# as a launch script does (`gateway_start`'s check, fetch, unpack and `caddy start`), and only
# then lets the engine start, in one of two ways:
# - it writes the engine's config file, which the engine's launch names (`--config`, vLLM): an
#   engine whose hook did not run, or failed, exits at argument parsing, before any weight is
#   read;
# - or it execs the server with the interpreter's arguments (llama.cpp, whose dispatcher starts
#   Python on its convert script): without the hook, that script refuses the server's flags.
# Either way a missing or failed hook is a crash loop, never an engine served open. Any failure
# ends the process with os._exit (`site` would print an exception raised here and carry on).
# The first interpreter marks the environment, so the interpreters the engine spawns (its
# workers, compile jobs) inherit the mark and start nothing.

HOOK_ROOT = "/workspace/frutebox/hook"
"""Where start hooks live on the volume, one directory per hook text (its digest)."""

HOOK_MODULE = "sitecustomize.py"
HOOK_MARK_ENV = "FRUTEBOX_GATEWAY_HOOKED"
"""Set by the first interpreter that runs the hook; its children inherit it and skip it."""

ENGINE_CONFIG_DIR = "/dev/shm/frutebox-gateway"
"""On a tmpfs the container gets afresh at every start: a config file the hook wrote at an
earlier start is never there at the next one, so only a hook that ran now can let the engine
start."""

_HOOK_PY = '''"""The frutebox start hook (frutebox_infra/recipes/gateway.py): starts the gateway in
front of the engine before the engine's own code runs, or ends the process."""
import os as _os


def _frutebox_gateway():
    import json, subprocess, sys
    p = json.loads(%(params)r)
    def fail(why):
        print("gateway: " + why + ": refusing to serve", file=sys.stderr, flush=True)
        _os._exit(1)
    if p["engine_config"]:
        try:
            _os.remove(p["engine_config"])
        except OSError:
            pass
    if len(_os.environ.get(p["key_env"], "")) < p["min_key"]:
        fail(p["key_env"] + " is not set")
    check = [sys.executable, "-c", p["check"], "gateway", p["archive"], p["url"], "sha512",
             p["sha512"], p["fetch"], p["program"], p["member"]]
    if subprocess.run(check).returncode != 0:
        fail("the release " + p["archive"] + " could not be checked")
    config = p["config"]
    with open(config, "w") as f:
        f.write(_os.environ.get(p["config_env"], ""))
    start = [p["program"], "start", "--config", config, "--adapter", "caddyfile"]
    if subprocess.run(start).returncode != 0:
        fail("the gateway did not start")
    if p["execs"]:
        argv = [p["execs"]] + sys.argv[1:]
        sys.stdout.flush()
        sys.stderr.flush()
        kept = _os.environ.get(%(counts_env)r, "") if p["counts"] else ""
        keeper = _os.environ.get(%(keeper_env)r, "")
        if kept and keeper:
            _os.execv(sys.executable,
                      [sys.executable, "-I", "-c", keeper, kept, p["counts"]] + argv)
        _os.execv(p["execs"], argv)
    _os.makedirs(_os.path.dirname(p["engine_config"]), exist_ok=True)
    part = p["engine_config"] + ".part"
    with open(part, "w") as f:
        f.write(p["engine_config_text"])
    _os.replace(part, p["engine_config"])


if _os.environ.get(%(config_env)r) and not _os.environ.get(%(mark)r):
    _os.environ[%(mark)r] = str(_os.getpid())
    try:
        _frutebox_gateway()
    except BaseException as _e:
        import sys as _sys
        print("gateway: the start hook failed: " + repr(_e), file=_sys.stderr, flush=True)
        _os._exit(1)
'''


@dataclass(frozen=True, kw_only=True)
class StartHook:
    """A `sitecustomize` module that starts the gateway in an image whose ENTRYPOINT runs a
    Python program, then lets the engine start: the config file only it writes, or the server
    it execs."""

    text: str
    """The module's source (no key in it)."""
    engine_config: str | None = None
    """The file the hook writes last, once the gateway serves; the engine's launch names it."""
    execs: str | None = None
    """The server the hook execs last, once the gateway serves, with the interpreter's
    arguments (the launch's words after the dispatcher's)."""

    @property
    def directory(self) -> str:
        """Its directory on the volume (PYTHONPATH), named by the text's digest: a changed hook
        is a new file, never an edit of one a running pod reads."""
        digest = hashlib.sha256(self.text.encode()).hexdigest()[:16]
        return f"{HOOK_ROOT}/{digest}"

    @property
    def path(self) -> str:
        return f"{self.directory}/{HOOK_MODULE}"


def start_hook(
    setup: GatewaySetup,
    *,
    engine_config: str | None = None,
    engine_config_text: str = "",
    execs: str | None = None,
    counts: CountsKeeper | None = None,
    fetch: bool,
) -> StartHook:
    """The hook for `setup`: the same check (and, when `fetch`, fetch) and `caddy start` as
    `gateway_start`, then `engine_config_text` written to `engine_config`, or `execs` run in
    the interpreter's place, or, with `counts` and the pod naming a directory in COUNTS_ENV,
    the counts keeper (recipes/counts.py) in its place, which runs `execs` as its child."""
    if (engine_config is None) == (execs is None):
        raise ValueError("a start hook either writes the engine's config or execs its server")
    if counts is not None and execs is None:
        raise ValueError("only a hook that starts the server itself can keep its counters")
    release = setup.release
    params = {
        "key_env": KEY_ENV,
        "min_key": MIN_KEY_LENGTH,
        "config_env": CONFIG_ENV,
        "check": RELEASE_PY,
        "archive": setup.archive,
        "url": release.url,
        "sha512": release.sha512,
        "member": release.member,
        "program": setup.program,
        "config": setup.config,
        "engine_config": engine_config,
        "engine_config_text": engine_config_text,
        "execs": execs,
        "counts": counts.params if counts is not None else None,
        "fetch": "1" if fetch else "0",
    }
    text = _HOOK_PY % {
        "params": json.dumps(params, sort_keys=True),
        "config_env": CONFIG_ENV,
        "mark": HOOK_MARK_ENV,
        "counts_env": COUNTS_ENV,
        "keeper_env": KEEPER_ENV,
    }
    return StartHook(text=text, engine_config=engine_config, execs=execs)


def hook_env(hook: StartHook) -> dict[str, str]:
    """The pod variables that make the image's Python run `hook` (the key is the deploy
    step's to fill)."""
    return {"PYTHONPATH": hook.directory}


def hook_directory(env: Mapping[str, str]) -> str | None:
    """The start hook's directory a pod's env names (PYTHONPATH below HOOK_ROOT), or None."""
    path = env.get("PYTHONPATH", "")
    first = path.split(":", 1)[0]
    return first if first.startswith(HOOK_ROOT + "/") and env.get(CONFIG_ENV) else None
