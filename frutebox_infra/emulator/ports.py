"""A pod's HTTP ports as the RunPod proxy serves them: each engine's routes (engines.py),
Ollama's pull, ComfyUI's lists."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from frutebox_infra.catalog.engine_routes import EngineRoutes
from frutebox_infra.emulator import counters
from frutebox_infra.emulator.comfy import models_listing
from frutebox_infra.emulator.engines import refusal, served
from frutebox_infra.emulator.gateway import (
    counted_paths,
    engine_on_loopback,
    forwarded_headers,
    gateway_answer,
    runs_gateway,
)
from frutebox_infra.emulator.records import PodRecord, RawBody, VolumeRecord
from frutebox_infra.recipes.counts import KEEPER_PATH


def serve_port(
    pod: PodRecord,
    port: int,
    method: str,
    path: str,
    body: Any,
    *,
    now: float,
    engine: EngineRoutes | None = None,
    headers: Mapping[str, str] | None = None,
    volume: VolumeRecord | None = None,
) -> tuple[int, Any]:
    """The answer of `pod`'s server on `port` at `now`; a server still loading does not answer.
    `engine`: the routes and own auth of the engine the pod's image runs (None: any path
    answers, as an unknown image's server would be guessed to); `volume`: the pod's network
    volume, where an engine may keep its counters."""
    if f"{port}/http" not in (pod.body.get("ports") or []):
        return 404, {"error": f"pod {pod.id} does not expose {port}/http"}
    if pod.host_dead or pod.crash_looping:
        # The proxy finds no server behind the port: the host is gone, or the process exits.
        return 502, {"error": "the pod's server is not answering"}
    loading = pod.loading(now)
    if pod.status == "RUNNING" and loading and "comfyui" in str(pod.body.get("image")):
        # ComfyUI-like images put a placeholder page on the port while the server starts.
        return 200, RawBody("text/html", b"<html>Loading, please wait</html>")
    if pod.status != "RUNNING" or pod.fault == "never-healthy" or loading:
        return 502, {"error": "the pod's server is not answering"}
    headers = headers or {}
    if runs_gateway(pod.body) or pod.hooked:
        # The published port is the gateway's; the engine behind it sees only what it forwards.
        gated = gateway_answer(pod.body, method, path, headers)
        if gated is not None:
            return gated
        headers = forwarded_headers(headers)
        if path in counted_paths(pod.body):
            # Forwarded to the counts keeper: Caddy's 502 when no keeper listens, else its
            # counters, or (Ollama) an answer it passes on from the engine and counts.
            if counters.keeper_dir(pod.body, volume) is None:
                return 502, RawBody("text/plain; charset=utf-8", b"")
            if method == "GET" and path == KEEPER_PATH:
                return counters.kept_answer(pod, volume)
    elif engine_on_loopback(pod.body):
        # An engine on loopback with no gateway in front: nothing listens on the port.
        return 502, {"error": "the pod's server is not answering"}
    if engine is not None:
        refused = refusal(engine, pod.body, method, path, headers)
        if refused is not None:
            return refused
    if method == "POST" and path == "/api/pull":
        return _pull(pod, body)
    stamp = datetime.fromtimestamp(now, UTC).isoformat()
    counted = counters.answer(pod, method, path, body, now_stamp=stamp, volume=volume)
    if counted is not None:
        return counted
    ollama = _ollama(pod, method, path, body)
    if ollama is not None and ollama[0] == 200 and path in ("/api/generate", "/api/chat"):
        return 200, ollama[1] | counters.ollama_counts(pod, body, now_stamp=stamp, volume=volume)
    if ollama is not None:
        return ollama
    listing = models_listing(pod.body, path) if method == "GET" else None
    if listing is not None:
        return 200, listing
    answer = served(method, path, body, pod.id) if engine is not None else None
    if answer is not None:
        return answer
    return 200, {"status": "ok", "pod": pod.id, "path": path}


def _ollama(pod: PodRecord, method: str, path: str, body: Any) -> tuple[int, Any] | None:
    """Ollama's model routes: what is pulled is listed, deleted, and answers; anything else
    is refused as Ollama refuses it (404 naming the model), so a client cannot assume a model
    it never pulled."""
    if method == "GET" and path == "/api/tags":
        return 200, {"models": [{"name": m, "model": m} for m in pod.pulled]}
    if path not in ("/api/delete", "/api/generate", "/api/chat"):
        return None
    model = body.get("model") if isinstance(body, dict) else None
    if not isinstance(model, str) or not model:
        return 400, {"error": "model is required"}
    known = model if ":" in model else f"{model}:latest"
    if known not in pod.pulled:
        return 404, {"error": f"model '{model}' not found"}
    if method == "DELETE" and path == "/api/delete":
        pod.pulled.remove(known)
        return 200, RawBody("text/plain; charset=utf-8", b"")
    if method == "POST":
        reply = f"{known} on pod {pod.id}"
        if path == "/api/chat":
            return 200, {"model": known, "message": {"role": "assistant", "content": reply},
                         "done": True}  # fmt: skip
        return 200, {"model": known, "response": reply, "done": True}
    return 405, {"error": "method not allowed"}


def _pull(pod: PodRecord, body: Any) -> tuple[int, Any]:
    """Ollama's `POST /api/pull` as seen through the RunPod proxy.

    Streamed (Ollama's default) it answers NDJSON progress ending in success, or an error
    line under the pull-fails fault. Not streamed, the server stays silent until the pull
    ends and the proxy (Cloudflare) cuts it at 100 s: every such pull is treated as that
    slow and answers 524, so a client that stops streaming fails here as it would there.
    """
    model = body.get("model") if isinstance(body, dict) else None
    if not isinstance(model, str) or not model:
        return 400, {"error": "model is required"}
    if body.get("stream", True) is False:
        return 524, RawBody("text/plain; charset=UTF-8", b"error code: 524")
    events: list[dict[str, Any]] = [{"status": "pulling manifest"}]
    if pod.fault == "pull-fails":
        events.append({"error": f"pull model manifest: file does not exist ({model})"})
        return 200, RawBody.ndjson(events)
    digest, total = "sha256:" + uuid.uuid5(uuid.NAMESPACE_URL, model).hex * 2, 4_900_000_000
    events += [
        {"status": f"pulling {digest[7:19]}", "digest": digest, "total": total, "completed": n}
        for n in (0, total // 2, total)
    ]
    events += [{"status": "verifying sha256 digest"}, {"status": "writing manifest"}]
    events.append({"status": "success"})
    tag = model if ":" in model else f"{model}:latest"
    if tag not in pod.pulled:
        pod.pulled.append(tag)
    return 200, RawBody.ndjson(events)
