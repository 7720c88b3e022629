"""Engine stand-ins: each engine's real route set (registry/routes.yaml), with its own weak auth.

An engine answers 404 for a path it does not serve and 405 for a method it does not take on
one it does. Its own key, when the launch sets one (a flag in `args` or a variable in `env`,
as registry/routes.yaml says), guards only what the engine makes it guard: vLLM's only paths
under /v1 (so /invocations answers a completion without it), SGLang's and llama.cpp's all but
their open paths, Ollama's and ComfyUI's nothing at all. A launch that relies on an engine's
own key therefore stays open here exactly where it would on a pod.
"""

from __future__ import annotations

import shlex
import uuid
from collections.abc import Mapping
from typing import Any

from frutebox_infra.catalog.engine_routes import EngineKey, EngineRoutes

UNSET = ""
"""The key a launch sets through a file (`--api-key-file`): some key no request can carry."""


def refusal(
    routes: EngineRoutes,
    body: Mapping[str, Any],
    method: str,
    path: str,
    headers: Mapping[str, str],
) -> tuple[int, Any] | None:
    """The engine's own refusal of `method` `path` (404, 405, 401), or None: it serves it."""
    bare = path.split("?", 1)[0]
    if routes.route(method, bare) is None:
        if any(route.matches(m, bare) for route in routes.routes for m in route.methods):
            return 405, {"detail": "Method Not Allowed"}
        return 404, {"detail": "Not Found"}
    key = launch_key(routes.key, body)
    if key is not None and routes.key.guards_path(bare) and not carries(routes.key, headers, key):
        return 401, {"error": "Unauthorized"}
    return None


def launch_key(key: EngineKey, body: Mapping[str, Any]) -> str | None:
    """The engine's own key as the pod's launch sets it, or None: no key, the engine is open."""
    try:
        words = shlex.split(str(body.get("args") or ""))
    except ValueError:
        words = []
    for flag in key.flags:
        for i, word in enumerate(words):
            if word == flag and i + 1 < len(words):
                return UNSET if flag.endswith("-file") else words[i + 1]
            if word.startswith(flag + "="):
                return UNSET if flag.endswith("-file") else word.partition("=")[2]
    env = body.get("env") or {}
    for name in key.env:
        value = env.get(name) if isinstance(env, Mapping) else None
        if isinstance(value, str) and value:
            return value
    return None


def carries(key: EngineKey, headers: Mapping[str, str], value: str) -> bool:
    """Does a request with `headers` (lower-case names) carry `value` as the engine reads it?"""
    if not value:
        return False
    sent = {
        "bearer": headers.get("authorization", "").removeprefix("Bearer "),
        "x-api-key": headers.get("x-api-key", ""),
    }
    return any(sent[h] == value for h in key.headers)


def served(method: str, path: str, body: Any, pod_id: str) -> tuple[int, Any] | None:
    """A plausible answer of a client route whose reply shape a client reads (chat, ComfyUI's
    prompt); None: the generic answer will do."""
    bare = path.split("?", 1)[0]
    if method == "POST" and bare.endswith("/chat/completions"):
        model = body.get("model") if isinstance(body, Mapping) else None
        return 200, {
            "object": "chat.completion",
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": f"an answer from pod {pod_id}"},
                    "finish_reason": "stop",
                }
            ],
        }
    if method == "POST" and bare in ("/prompt", "/api/prompt"):
        if not isinstance(body, Mapping) or not isinstance(body.get("prompt"), Mapping):
            return 400, {"error": {"type": "no_prompt", "message": "No prompt provided"}}
        return 200, {"prompt_id": str(uuid.uuid4()), "number": 0, "node_errors": {}}
    return None
