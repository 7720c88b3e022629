"""Typed RunPod REST v2 client on httpx (its payloads: `wire.py`; a pod's ports: `proxy.py`)."""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from frutebox_infra.runpod.access import KeyUse, refusal_hint
from frutebox_infra.runpod.errors import (
    HTTPX_FAILURES,
    ConfigurationError,
    Problem,
    ProtocolError,
    TransportError,
    api_error,
    is_key_scope,
)
from frutebox_infra.runpod.quota import Quota
from frutebox_infra.runpod.retrying import RetryPolicy
from frutebox_infra.runpod.tls import tls_context
from frutebox_infra.runpod.wire import (
    DataCenterInfo,
    DataCenterList,
    GpuList,
    GpuOffer,
    NetworkVolume,
    Pod,
    PodBilling,
    PodBillingList,
    PodList,
    VolumeList,
)
from frutebox_infra.stack.endpoints import DEFAULT_API_URL

CREATE_TIMEOUT_S = 130.0
"""Above the 100 s after which RunPod's proxy (Cloudflare) cuts a silent answer: a create that
takes long is then answered by the proxy (a 524 we treat as ambiguous), never cut by us."""
LOG_READ_TIMEOUT_S = 3.0
"""GET /v2/pods/{id}/logs streams; after the backfill we stop at the first silence this long."""


def normalise_base_url(url: str) -> str:
    """The API root without a trailing slash or `/v2` (RunPod's docs give the base with it)."""
    base = url.strip().rstrip("/")
    return base[: -len("/v2")] if base.endswith("/v2") else base


Sleep = Callable[[float], None]
_M = TypeVar("_M", bound=BaseModel)


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def problem_of(response: httpx.Response) -> Problem:
    """Read an RFC 9457 problem; a non-problem body still yields a usable description."""
    try:
        body = response.json()
    except ValueError:
        body = None
    retry_after = _retry_after(response.headers.get("Retry-After"))
    if isinstance(body, dict) and "detail" in body:
        errors = body.get("errors") or []
        return Problem(
            status=response.status_code,
            title=str(body.get("title") or response.reason_phrase),
            detail=str(body["detail"]),
            errors=tuple(str(e) for e in errors) if isinstance(errors, list) else (),
            retry_after_s=retry_after,
        )
    text = response.text.strip().replace("\n", " ")[:300]
    return Problem(
        status=response.status_code,
        title=response.reason_phrase or "HTTP error",
        detail=text or "(empty body)",
        retry_after_s=retry_after,
    )


def _parse(model: type[_M], response: httpx.Response, operation: str) -> _M:
    try:
        return model.model_validate(response.json())
    except (ValueError, ValidationError) as exc:
        raise ProtocolError(
            f"{operation} answered {response.status_code} with a body that is not a valid"
            f" {model.__name__}: {str(exc).splitlines()[0]}. Check RUNPOD_API_URL"
            " points at the RunPod v2 API."
        ) from exc


def _log_line(data: str) -> str:
    try:
        event = json.loads(data)
    except ValueError:
        return data
    return str(event.get("line", data)) if isinstance(event, dict) else data


class RunPodClient:
    """RunPod REST v2 over httpx. Idempotent calls retry 429/5xx; creates never do here.

    Every answer's RateLimit header is kept (`quota`), so callers can pace their polling. A 401,
    or a 403 about the key's scope, names the key's source and what `key_use`'s command needs.
    """

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str = DEFAULT_API_URL,
        timeout_s: float = 60.0,
        connect_timeout_s: float = 10.0,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Sleep = time.sleep,
        key_use: KeyUse | None = None,
    ) -> None:
        self.key_use = key_use
        if not api_key:
            raise ConfigurationError(
                "No RunPod API key. Set the stack secret frutebox-infra:runpodApiKey"
                " (pulumi config set --secret frutebox-infra:runpodApiKey ...) or export"
                " RUNPOD_API_KEY."
            )
        self.retry = retry or RetryPolicy()
        self.quota = Quota()
        self._sleep = sleep
        try:
            self._http = httpx.Client(
                base_url=normalise_base_url(base_url),
                headers={
                    "Authorization": f"Bearer {api_key}",
                    "Accept": "application/json",
                    "User-Agent": "frutebox-infra",
                },
                timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
                transport=transport,
                verify=tls_context(),
            )
        except HTTPX_FAILURES as exc:
            raise ConfigurationError(
                f"RUNPOD_API_URL {base_url!r} is not a usable URL ({exc}); unset it to use"
                f" {DEFAULT_API_URL}."
            ) from exc

    def close(self) -> None:
        self._http.close()

    def _send_once(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        timeout_s: float | None = None,
    ) -> httpx.Response:
        """One exchange, no retry; only transport failures raise."""
        operation = f"{method} {path}"
        extra: dict[str, Any] = {} if timeout_s is None else {"timeout": timeout_s}
        try:
            response = self._http.request(
                method, path, json=dict(body) if body is not None else None, **extra
            )
            self.quota = self.quota.updated(response.headers)
            return response
        except HTTPX_FAILURES as exc:
            raise TransportError(
                f"{operation}: no answer from the RunPod API at {self._http.base_url}"
                f" ({type(exc).__name__}: {exc})."
                " Check the network and RUNPOD_API_URL, then run the command again."
            ) from exc

    def _call(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        retry: bool = True,
        timeout_s: float | None = None,
    ) -> httpx.Response:
        operation = f"{method} {path}"

        def once() -> httpx.Response:
            response = self._send_once(method, path, body, timeout_s=timeout_s)
            if response.is_success:
                return response
            problem = problem_of(response)
            raise api_error(problem, operation=operation, hint=self._refusal(problem, method))

        return self.retry.run(once, sleep=self._sleep) if retry else once()

    def _json(
        self,
        model: type[_M],
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        retry: bool = True,
        timeout_s: float | None = None,
    ) -> _M:
        """One call whose JSON answer is parsed as `model`, errors naming `METHOD path`."""
        response = self._call(method, path, body, retry=retry, timeout_s=timeout_s)
        return _parse(model, response, f"{method} {path}")

    def _refusal(self, problem: Problem, method: str) -> str:
        if self.key_use is None or not (problem.status == 401 or is_key_scope(problem)):
            return ""
        return refusal_hint(problem.status, method, self.key_use)

    # Pods

    def create_pod_once(self, body: Mapping[str, Any]) -> Pod:
        """POST /v2/pods once: a 5xx may still have created a pod, so the caller decides."""
        return self._json(Pod, "POST", "/v2/pods", body, retry=False, timeout_s=CREATE_TIMEOUT_S)

    def list_pods(self) -> list[Pod]:
        return self._json(PodList, "GET", "/v2/pods").pods

    def get_pod(self, pod_id: str, *, retry: bool = True) -> Pod:
        """`retry=False` inside waits: they treat a transient failure as "unknown, poll on"."""
        return self._json(Pod, "GET", f"/v2/pods/{pod_id}", retry=retry)

    def pod_logs(self, pod_id: str, *, tail: int = 20, source: str = "container") -> list[str]:
        """The last `tail` lines of the pod's `container` (or `system`) log, best effort: an
        error explains itself better with them, but never fails for want of them."""
        return self.read_pod_logs(pod_id, tail=tail, source=source) or []

    def read_pod_logs(self, pod_id: str, *, tail: int, source: str) -> list[str] | None:
        """The last `tail` lines of one log source, read as Server-Sent Events; None when the
        log could not be read at all (what arrived before a silence is kept)."""
        lines: list[str] = []
        path = f"/v2/pods/{pod_id}/logs"
        params = {"tail": str(tail), "source": source}
        timeout = httpx.Timeout(LOG_READ_TIMEOUT_S, connect=LOG_READ_TIMEOUT_S)
        try:
            with self._http.stream("GET", path, params=params, timeout=timeout) as response:
                self.quota = self.quota.updated(response.headers)
                if not response.is_success:
                    return None
                for raw in response.iter_lines():
                    if raw.startswith("data:"):
                        lines.append(_log_line(raw[5:].strip()))
                    if len(lines) >= tail:
                        break
        except HTTPX_FAILURES:
            if not lines:
                return None  # nothing arrived: no answer, not an empty log
        return lines[-tail:]

    def update_pod(self, pod_id: str, body: Mapping[str, Any]) -> Pod:
        return self._json(Pod, "PATCH", f"/v2/pods/{pod_id}", body)

    def restart_pod(self, pod_id: str) -> None:
        """POST /v2/pods/{id}/action `restart`; not retried: a second restart is not free."""
        self._call("POST", f"/v2/pods/{pod_id}/action", {"action": "restart"}, retry=False)

    def delete_pod(self, pod_id: str) -> None:
        self._call("DELETE", f"/v2/pods/{pod_id}")

    # Network volumes

    def create_volume_once(self, body: Mapping[str, Any]) -> NetworkVolume:
        return self._json(
            NetworkVolume,
            "POST",
            "/v2/network-volumes",
            body,
            retry=False,
            timeout_s=CREATE_TIMEOUT_S,
        )

    def list_volumes(self) -> list[NetworkVolume]:
        return self._json(VolumeList, "GET", "/v2/network-volumes").network_volumes

    def get_volume(self, volume_id: str) -> NetworkVolume:
        return self._json(NetworkVolume, "GET", f"/v2/network-volumes/{volume_id}")

    def update_volume(self, volume_id: str, body: Mapping[str, Any]) -> NetworkVolume:
        return self._json(NetworkVolume, "PATCH", f"/v2/network-volumes/{volume_id}", body)

    def delete_volume(self, volume_id: str) -> None:
        self._call("DELETE", f"/v2/network-volumes/{volume_id}")

    # Read-only views: catalog, data centres, billing (status, preview warnings, prices)

    def gpu_catalog(self) -> list[GpuOffer]:
        """GET /v2/catalog/gpus with pod availability: Secure prices, stock per DC, CUDA."""
        path = "/v2/catalog/gpus?include=AVAILABILITY&product=POD"
        return self._json(GpuList, "GET", path).gpus

    def data_centers(self) -> list[DataCenterInfo]:
        return self._json(DataCenterList, "GET", "/v2/catalog/datacenters").data_centers

    def pod_billing(self, *, bucket: str, last: int) -> list[PodBilling]:
        """GET /v2/billing/pods: one record per pod per bucket over the last `last` buckets."""
        path = f"/v2/billing/pods?bucketSize={bucket}&lastN={last}"
        return self._json(PodBillingList, "GET", path).records
