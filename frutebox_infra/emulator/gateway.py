"""A pod's gateway as the emulated proxy meets it: the rules of the Caddyfile a launch starts
(recipes/gateway.py) in front of the engine's stand-in, so a test sees what a client of a
real pod would. The real program, with the same configuration, is proven against the same
route table by tests/recipes/test_gateway_caddy.py."""

from __future__ import annotations

import ast
import json
import re
import shlex
from collections.abc import Mapping
from typing import Any

from frutebox_infra.emulator import layout
from frutebox_infra.emulator.records import RawBody, VolumeRecord
from frutebox_infra.recipes.gateway import (
    CONFIG_ENV,
    HOOK_MODULE,
    KEY_ENV,
    LOOPBACK,
    MIN_KEY_LENGTH,
    NO_KEY_STATUS,
    REFUSED_STATUS,
    UNKEYED_STATUS,
    hook_directory,
    starts_gateway,
)

_ODD = re.compile(r"(\.\.|//|%|\\)")
"""The paths the gateway refuses before anything else (its `@odd` matcher)."""


def launch_words(body: Mapping[str, Any]) -> list[str]:
    try:
        return shlex.split(str(body.get("args") or ""))
    except ValueError:
        return []


def engine_words(body: Mapping[str, Any]) -> list[str]:
    """The engine's command: the launch's words, or, for a launch script (the gateway first),
    the words its last line execs."""
    words = launch_words(body)
    if words[:2] == ["bash", "-c"] and len(words) > 2:
        execs = [ln[5:] for ln in words[2].splitlines() if ln.startswith("exec ")]
        if execs:
            try:
                return shlex.split(execs[-1])
            except ValueError:
                return []
    return words


def runs_gateway(body: Mapping[str, Any]) -> bool:
    """Whether the pod's launch starts the gateway in front of its engine."""
    return starts_gateway(launch_words(body))


def pod_key(body: Mapping[str, Any]) -> str:
    env = body.get("env") or {}
    value = env.get(KEY_ENV) if isinstance(env, Mapping) else None
    return value if isinstance(value, str) else ""


def start_failure(body: Mapping[str, Any]) -> str | None:
    """The line a gateway launch prints before it exits, or None when its gateway starts."""
    env = body.get("env") or {}
    if len(pod_key(body)) < MIN_KEY_LENGTH:
        return f"gateway: {KEY_ENV} is not set: refusing to serve"
    if not isinstance(env, Mapping) or not env.get(CONFIG_ENV):
        return f"Error: adapting config using caddyfile: {CONFIG_ENV} is empty"
    return None


_HOOK_PARAMS = re.compile(r"^    p = json\.loads\((.+)\)$", re.M)
"""The line of the start hook that holds its parameters (recipes/gateway.py `_HOOK_PY`)."""


def hook_params(body: Mapping[str, Any], volume: VolumeRecord | None) -> dict[str, Any] | None:
    """The parameters of the start hook a pod finds on the volume, read from the hook's own
    text, or None (no hook there)."""
    env = body.get("env") or {}
    directory = hook_directory(env) if isinstance(env, Mapping) else None
    below = layout.below_mount(directory) if directory is not None else None
    text = volume.refs.get(f"{below}/{HOOK_MODULE}") if volume and below else None
    found = _HOOK_PARAMS.search(text) if text else None
    if found is None:
        return None
    try:
        params = json.loads(ast.literal_eval(found.group(1)))
    except (ValueError, SyntaxError):
        return None
    return params if isinstance(params, dict) else None


def hook_archive(
    body: Mapping[str, Any], volume: VolumeRecord | None
) -> tuple[str, str, bool] | None:
    """The gateway release the start hook a pod finds on the volume checks before its engine
    starts: (its path below the volume's mount, its URL, whether the hook fetches it when the
    volume lacks it), or None."""
    params = hook_params(body, volume)
    if params is None:
        return None
    kept = layout.below_mount(str(params.get("archive", "")))
    url = params.get("url")
    if kept is None or not isinstance(url, str):
        return None
    return kept, url, params.get("fetch") == "1"


def hook_failure(body: Mapping[str, Any], volume: VolumeRecord | None) -> tuple[bool, str | None]:
    """For a pod whose env points its image's Python at a start hook (PYTHONPATH below the
    hook root): whether the hook is on the volume and runs, and the line its container prints
    before it exits (None: it starts). A hook on the volume starts the gateway as a launch
    script does, or ends the process (`start_failure`); without it nothing writes the config
    file the engine's launch names, and the engine exits reading its arguments, or nothing
    execs the server, and the Python program the image's dispatcher started (llama.cpp's
    convert script) refuses the server's flags."""
    env = body.get("env") or {}
    directory = hook_directory(env) if isinstance(env, Mapping) else None
    if directory is None:
        return False, None
    below = layout.below_mount(directory)
    present = volume is not None and below is not None and f"{below}/{HOOK_MODULE}" in volume.refs
    if present:
        return True, start_failure(body)
    words = engine_words(body)
    if "--config" not in words[:-1]:
        if words and words[0].startswith("-"):
            # A dispatcher's word started the image's Python on a program of its own, whose
            # argparse reads the server's `-hf` as `-h` with an argument, and exits 2.
            return False, "error: argument -h/--help: ignored explicit argument 'f'"
        return False, None  # an engine that needs nothing of the hook starts (on loopback)
    config = words[words.index("--config") + 1]
    return False, (
        f"ERROR Unable to read the config file at {config}. Check path correctness"
        f" (FileNotFoundError: No such file or directory: '{config}')"
    )


def engine_on_loopback(body: Mapping[str, Any]) -> bool:
    """Whether the engine listens on loopback only (`--host`/`--listen 127.0.0.1`, Ollama's
    OLLAMA_HOST): the proxy then finds nothing on the published port without a gateway."""
    words = engine_words(body)
    for flag in ("--host", "--listen"):
        if flag in words[:-1] and words[words.index(flag) + 1] == LOOPBACK:
            return True
    env = body.get("env") or {}
    host = env.get("OLLAMA_HOST", "") if isinstance(env, Mapping) else ""
    return isinstance(host, str) and host.startswith(LOOPBACK + ":")


_ROUTE = re.compile(r"\t@route\d+ \{\n\t\tmethod ([^\n]+)\n\t\tpath ([^\n]+)\n\t\}")


def configured_routes(body: Mapping[str, Any]) -> list[tuple[frozenset[str], str]]:
    """The routes the pod's own gateway configuration forwards (its `@routeN` matchers):
    what a gateway forwards is its configuration's business, not the emulator's."""
    env = body.get("env") or {}
    config = env.get(CONFIG_ENV) if isinstance(env, Mapping) else None
    if not isinstance(config, str):
        return []
    return [(frozenset(m.group(1).split()), m.group(2)) for m in _ROUTE.finditer(config)]


def _forwards(routes: list[tuple[frozenset[str], str]], method: str, path: str) -> bool:
    for methods, pattern in routes:
        if method not in methods:
            continue
        if (pattern.endswith("*") and path.startswith(pattern[:-1])) or path == pattern:
            return True
    return False


_COUNTED = re.compile(r"\thandle @route(\d+) \{\n\t\timport counts\n\t\}")


def counted_paths(body: Mapping[str, Any]) -> set[str]:
    """The paths the pod's gateway configuration sends to a counts keeper (recipes/gateway.py
    `CountsKeeper`) rather than to the engine."""
    env = body.get("env") or {}
    config = env.get(CONFIG_ENV) if isinstance(env, Mapping) else None
    if not isinstance(config, str):
        return set()
    routes = configured_routes(body)
    return {routes[int(m.group(1))][1] for m in _COUNTED.finditer(config)
            if int(m.group(1)) < len(routes)}  # fmt: skip


def gateway_answer(
    body: Mapping[str, Any],
    method: str,
    path: str,
    headers: Mapping[str, str],
) -> tuple[int, Any] | None:
    """The gateway's own answer (refusals), or None: it forwards the request to the engine."""
    key = pod_key(body)
    bare = path.split("?", 1)[0]
    if len(key) < MIN_KEY_LENGTH:
        return _text(NO_KEY_STATUS, "the gateway has no serving key")
    if _ODD.search(bare):
        return _text(REFUSED_STATUS, "refused: not a route this model's clients use")
    bearer = headers.get("authorization", "")
    if bearer != f"Bearer {key}" and headers.get("x-api-key", "") != key:
        return _text(UNKEYED_STATUS, "the stack's serving key is required:"
                     " Authorization: Bearer KEY, or X-Api-Key: KEY")  # fmt: skip
    if not _forwards(configured_routes(body), method, bare):
        return _text(REFUSED_STATUS, "refused: not a route this model's clients use")
    return None


def _text(status: int, text: str) -> tuple[int, RawBody]:
    return status, RawBody("text/plain; charset=utf-8", text.encode())


def forwarded_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """What reaches the engine: the key headers stripped, as the gateway strips them."""
    return {k: v for k, v in headers.items() if k not in ("authorization", "x-api-key")}
