"""A client for a pod's HTTP ports as the RunPod proxy serves them; it never sends the API key,
and sends the stack's serving key when given one (a pod's gateway asks for it on every route).

The proxy sits behind Cloudflare, which cuts an answer that stays silent for 100 s (error
524). Long operations are therefore read as a stream (`stream_post`), never as one body
that only arrives at the end.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import httpx

from frutebox_infra.runpod.errors import HTTPX_FAILURES, ConfigurationError, TransportError
from frutebox_infra.runpod.tls import tls_context
from frutebox_infra.stack.endpoints import DEFAULT_PROXY_URL_TEMPLATE


class ProxyClient:
    """Talks to a pod's HTTP ports through the RunPod proxy; never sends the API key."""

    def __init__(
        self,
        *,
        template: str = DEFAULT_PROXY_URL_TEMPLATE,
        timeout_s: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if "{podId}" not in template or "{port}" not in template:
            raise ConfigurationError(
                f"RUNPOD_PROXY_URL_TEMPLATE {template!r} must contain {{podId}} and {{port}};"
                f" unset it to use {DEFAULT_PROXY_URL_TEMPLATE}."
            )
        self.template = template.rstrip("/")
        self._connect_timeout_s = timeout_s
        self._http = httpx.Client(timeout=timeout_s, transport=transport, verify=tls_context())

    def send_key(self, serving_key: str) -> None:
        """Send the stack's serving key from now on (a gateway pod's every route asks it)."""
        self._http.headers["Authorization"] = f"Bearer {serving_key}"

    def close(self) -> None:
        self._http.close()

    def url(self, pod_id: str, port: int) -> str:
        # str.replace rather than format: a template is data, not code.
        return self.template.replace("{podId}", pod_id).replace("{port}", str(port))

    def probe(self, url: str, *, serving_key: str = "") -> int | None:
        """Status code of GET url, or None while nothing answers at all; `serving_key`: sent
        to this URL (a gateway's) only."""
        headers = {"Authorization": f"Bearer {serving_key}"} if serving_key else None
        try:
            return self._http.get(url, headers=headers).status_code
        except HTTPX_FAILURES:
            return None

    def get_json(self, url: str) -> Any:
        """JSON body of GET url, or None unless it answered 2xx with JSON."""
        try:
            response = self._http.get(url)
        except HTTPX_FAILURES:
            return None
        if not 200 <= response.status_code < 300:
            return None
        try:
            return response.json()
        except ValueError:
            return None

    def get_text(
        self, url: str, headers: Mapping[str, str] | None = None
    ) -> tuple[int, str] | None:
        """(status, body text) of GET url with `headers` (an engine's /metrics behind the
        stack's serving key), or None while nothing answers; the body is cut at 1 MB."""
        try:
            response = self._http.get(url, headers=dict(headers or {}))
        except HTTPX_FAILURES:
            return None
        return response.status_code, response.text[:1_000_000]

    def delete_json(self, url: str, body: Mapping[str, Any]) -> int | None:
        """Status code of DELETE url with a JSON body (Ollama's /api/delete), or None while
        nothing answers."""
        try:
            return self._http.request("DELETE", url, json=dict(body)).status_code
        except HTTPX_FAILURES:
            return None

    @contextlib.contextmanager
    def stream_post(
        self, url: str, body: Mapping[str, Any], *, read_timeout_s: float
    ) -> Iterator[httpx.Response]:
        """POST JSON and hand the answer over unread, to be read line by line as it arrives.

        `read_timeout_s` bounds each wait for more bytes, not the whole answer: the caller
        keeps its own deadline. Any httpx failure, on sending or while reading inside the
        `with` block, becomes a TransportError.
        """
        timeout = httpx.Timeout(read_timeout_s, connect=self._connect_timeout_s)
        try:
            with self._http.stream("POST", url, json=dict(body), timeout=timeout) as response:
                yield response
        except HTTPX_FAILURES as exc:
            raise TransportError(f"POST {url}: no answer ({type(exc).__name__}: {exc}).") from exc
