"""Pull a model into a pod's Ollama server, reading the pull's NDJSON progress as it comes.

Why a stream: a non-streaming `POST /api/pull` says nothing until the whole model is on
disk, and the RunPod proxy (behind Cloudflare) cuts an answer that is silent for 100 s with
a 524. With `"stream": true` Ollama writes one JSON line per progress step, which keeps the
connection alive; the last line is `{"status": "success"}` or `{"error": ...}`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import httpx

from frutebox_infra.runpod.errors import TransportError
from frutebox_infra.runpod.proxy import ProxyClient

# The longest silence tolerated between two lines: Ollama reports progress every few
# hundred milliseconds, and the proxy itself gives up on silence long before this.
READ_TIMEOUT_S = 300.0
# Progress goes to stderr when the step changes, else at most this often.
PROGRESS_EVERY_S = 30.0

Log = Callable[[str], None]
Clock = Callable[[], float]


def pull(
    proxy: ProxyClient,
    url: str,
    tag: str,
    *,
    timeout_s: float,
    clock: Clock,
    log: Log,
) -> str | None:
    """Pull `tag` through `url`; None once Ollama says success, else why it did not.

    The caller decides what a failure means for the pod, so nothing here raises for one.
    """
    deadline = clock() + timeout_s
    body = {"model": tag, "stream": True}
    try:
        with proxy.stream_post(
            url, body, read_timeout_s=min(timeout_s, READ_TIMEOUT_S)
        ) as response:
            if not response.is_success:
                response.read()
                return _http_failure(response)
            return _follow(response.iter_lines(), tag, deadline, timeout_s, clock, log)
    except TransportError as exc:
        return str(exc)


def full_tag(tag: str) -> str:
    """Ollama's own spelling of a tag: `name:latest` when no tag is given."""
    return tag if ":" in tag.rsplit("/", 1)[-1] else f"{tag}:latest"


def missing(proxy: ProxyClient, base_url: str, tags: Iterable[str]) -> list[str] | None:
    """Which of `tags` the server does not list at GET /api/tags; None when it does not answer
    with a listing. Every member of a shared pod must be there for the pod to serve."""
    listing = proxy.get_json(base_url + "/api/tags")
    models = listing.get("models") if isinstance(listing, dict) else None
    if not isinstance(models, list):
        return None
    names = {
        full_tag(str(m.get("name") or m.get("model")))
        for m in models
        if isinstance(m, dict) and (m.get("name") or m.get("model"))
    }
    return [t for t in tags if full_tag(t) not in names]


def delete(proxy: ProxyClient, base_url: str, tag: str) -> str | None:
    """Remove `tag` from the server (DELETE /api/delete); None when it is gone (a 404 means it
    already was), else why not."""
    status = proxy.delete_json(base_url + "/api/delete", {"model": tag})
    if status is None:
        return "the server did not answer"
    if 200 <= status < 300 or status == 404:
        return None
    return f"HTTP {status}"


def _follow(
    lines: Iterable[str], tag: str, deadline: float, timeout_s: float, clock: Clock, log: Log
) -> str | None:
    last_step, last_said = "", clock()
    for line in lines:
        if not line.strip():
            continue
        event = _json_or_none(line)
        if not isinstance(event, dict):
            return f"the pull answered a line that is not a JSON object: {line[:120]!r}"
        if "error" in event:
            return f"ollama: {event['error']}"
        step = str(event.get("status", ""))
        if step == "success":
            return None
        now = clock()
        if now >= deadline:
            return (
                f"still {step or 'pulling'} after {timeout_s:g}s; set FRUTEBOX_PULL_TIMEOUT_S"
                " (seconds) in the environment of `pulumi up` to allow longer"
            )
        if step != last_step or now - last_said >= PROGRESS_EVERY_S:
            log(f"pulling {tag}: {step}{_percent(event)}")
            last_step, last_said = step, now
    return 'the pull\'s answer ended without {"status": "success"}'


def _percent(event: dict[str, Any]) -> str:
    total, done = event.get("total"), event.get("completed")
    if isinstance(total, int) and isinstance(done, int) and total > 0:
        return f" {100 * done // total}% of {total / 1e9:.1f} GB"
    return ""


def _http_failure(response: httpx.Response) -> str:
    body = _json_or_none(response.text)
    if isinstance(body, dict) and body.get("error"):
        return f"HTTP {response.status_code}: {body['error']}"
    text = " ".join(response.text.split())[:200]
    return f"HTTP {response.status_code}" + (f": {text}" if text else "")


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
