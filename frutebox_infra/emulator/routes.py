"""Thin HTTP routes: auth, the OpenAPI contract, faults, then the account; errors as RFC 9457."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from frutebox_infra.emulator.billing import pod_billing
from frutebox_infra.emulator.catalog import gpu_types
from frutebox_infra.emulator.control import out_of_band
from frutebox_infra.emulator.cpus import cpu_type, cpu_types
from frutebox_infra.emulator.datacenters import data_centers
from frutebox_infra.emulator.errors import CAPACITY_DETAIL, ApiProblem
from frutebox_infra.emulator.faults import (
    CREATES,
    FaultAction,
    FaultError,
    FaultQueue,
    parse_faults,
)
from frutebox_infra.emulator.keys import authenticate, permit
from frutebox_infra.emulator.openapi import OpenApi
from frutebox_infra.emulator.realism import RateLimiter, number
from frutebox_infra.emulator.records import RawBody
from frutebox_infra.emulator.snapshot import snapshot
from frutebox_infra.emulator.state import Account

PROXY = re.compile(r"^/proxy/(?P<pod>[A-Za-z0-9]+)-(?P<port>\d{1,5})(?P<rest>/.*)?$")
FAULT_DETAIL = {
    400: CAPACITY_DETAIL,
    402: "Insufficient balance to create this pod. Add funds and try again.",
    # The createPod table of the OpenAPI document: "Your account cannot access the requested
    # pool"; a key without access to the action answers keys.NO_ACCESS_DETAIL instead.
    403: "your account cannot access the requested pool",
    404: "resource not found",
    429: "rate limit exceeded for the minute window",
    500: "internal server error",
    503: "upstream temporarily unavailable",
}


@dataclass(frozen=True)
class Response:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def problem(cls, problem: ApiProblem) -> Response:
        headers = {"Content-Type": "application/problem+json", **problem.headers}
        return cls(problem.status, problem.body(), headers)

    @classmethod
    def of(cls, status: int, body: Any) -> Response:
        """A RawBody goes out as is, under its own content type; anything else as JSON."""
        if isinstance(body, RawBody):
            return cls(status, body, {"Content-Type": body.content_type})
        return cls(status, body)

    def payload(self) -> bytes:
        if isinstance(self.body, RawBody):
            return self.body.data
        return b"" if self.body is None else json.dumps(self.body).encode()


Params = dict[str, str]
Handler = Callable[["App", Params, Any, dict[str, list[str]]], Response]


@dataclass(frozen=True)
class Route:
    method: str
    pattern: re.Pattern[str]
    op: str
    schema: str | None
    handler: Handler


class App:
    """Every request goes through `handle`, one at a time, whatever thread serves it; quotas
    and fault periods run on the account's clock."""

    def __init__(
        self,
        account: Account,
        *,
        proxy_base: str = "",
        on_change: Callable[[], None] | None = None,
        openapi: OpenApi | None = None,
    ) -> None:
        self.account = account
        self.limiter = RateLimiter(account.realism, account.clock)
        self.faults = FaultQueue(time_scale=account.realism.time_scale, clock=account.clock)
        self.openapi = openapi or OpenApi()
        self.proxy_base = proxy_base
        self._on_change = on_change or (lambda: None)
        self._lock = threading.RLock()

    @property
    def proxy_url_template(self) -> str:
        return f"{self.proxy_base}/proxy/{{podId}}-{{port}}"

    def state(self) -> dict[str, Any]:
        """What `GET /_emulator/state` answers: the account, pending faults, the proxy URL."""
        with self._lock:
            state = snapshot(self.account)
            state.update(faults=self.faults.pending(), proxyUrlTemplate=self.proxy_url_template)
            return state

    def handle(self, method: str, target: str, headers: Mapping[str, str], raw: bytes) -> Response:
        """`headers` keys in lower case."""
        url = urlsplit(target)
        with self._lock:
            if url.path.startswith("/_emulator/"):
                response = self._control(method, url.path, raw)
            elif match := PROXY.match(url.path):
                response = self._proxy(match, method, headers, raw)
            else:
                response = self._api(method, url.path, parse_qs(url.query), headers, raw)
            self._on_change()
            return response

    def _api(
        self,
        method: str,
        path: str,
        query: dict[str, list[str]],
        headers: Mapping[str, str],
        raw: bytes,
    ) -> Response:
        matches = [(r, m) for r in ROUTES if (m := r.pattern.fullmatch(path))]
        chosen = next(((r, m) for r, m in matches if r.method == method), None)
        if chosen is None:
            if matches:
                allow = ", ".join(r.method for r, _ in matches)
                problem = ApiProblem(
                    405,
                    "The requested method is not allowed for this path.",
                    headers={"Allow": allow},
                )
                return Response.problem(problem)
            return Response.problem(ApiProblem(404, f"no route for {path}"))
        route, match = chosen
        entry: dict[str, Any] = {"op": route.op, "method": method, "path": path, "body": None}
        entry["at"] = self.account.clock.now()  # what a quota window counts
        quota: dict[str, str] = {}
        try:
            # A key RunPod does not accept is refused before the quota counts; a valid key
            # without access to the action is answered within it.
            account = self.account
            scope = authenticate(
                account.keys, headers.get("authorization", ""), any_key=account.realism.any_key
            )
            quota, limited = self.limiter.admit()
            if limited is not None:
                raise limited
            permit(scope, method)
            response = self._run(route, match.groupdict(), query, headers, raw, entry)
        except ApiProblem as problem:
            response = Response.problem(problem)
        except Exception as exc:  # an emulator bug should read as a 500, not a dropped socket
            response = Response.problem(ApiProblem(500, f"emulator error: {exc!r}"))
        entry["status"] = response.status
        self.account.requests.append(entry)
        # Authenticated answers carry the quota state, successes as well as 429s.
        return Response(response.status, response.body, {**quota, **response.headers})

    def _run(
        self,
        route: Route,
        params: Params,
        query: dict[str, list[str]],
        headers: Mapping[str, str],
        raw: bytes,
        entry: dict[str, Any],
    ) -> Response:
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                entry["body"] = raw.decode("utf-8", "replace")
                raise ApiProblem(400, "request body is not valid JSON") from None
        entry["body"] = body
        if route.schema is not None:
            errors = self.openapi.errors(route.schema, body)
            if errors:
                raise ApiProblem(422, "Request validation failed.", errors=errors)
        fault = self.faults.take_response(route.op)
        if fault is not None and fault.action not in CREATES:
            wait = number(self.account.realism.real_s(fault.retry_after_s))
            extra = {"Retry-After": wait} if fault.status == 429 else None
            raise ApiProblem(fault.status, FAULT_DETAIL[fault.status], headers=extra)
        response = route.handler(self, params, body, query)
        if route.op in ("pods.create", "pods.update") and response.status in (200, 201):
            pod_fault = self.faults.take_pod_fault(route.op)
            if pod_fault is not None:
                self.account.mark(response.body["id"], pod_fault.action.value)
        if fault is not None and fault.list_after_s is not None:
            self.account.list_late(route.op, response.body["id"], fault.list_after_s)
        if fault is not None and fault.action is FaultAction.RETURN_201_MALFORMED:
            # A gateway page instead of the pod: the create happened, the answer is unreadable.
            return Response.of(201, RawBody("text/html", b"<html>upstream hiccup</html>"))
        if fault is not None and fault.action is FaultAction.RETURN_503_AFTER_CREATE:
            raise ApiProblem(503, FAULT_DETAIL[503])
        return response

    def _control(self, method: str, path: str, raw: bytes) -> Response:
        if (method, path) == ("POST", "/_emulator/faults"):
            try:
                faults = parse_faults(json.loads(raw or b"null"))
            except (ValueError, FaultError) as exc:
                return Response.problem(ApiProblem(400, f"bad fault instruction: {exc}"))
            self.faults.add(faults)
            return Response(200, {"pending": self.faults.pending()})
        if (method, path) == ("POST", "/_emulator/reset"):
            self.account.reset()
            self.faults.clear()
            self.limiter.reset()
            return Response(200, {})
        if (method, path) == ("GET", "/_emulator/state"):
            return Response(200, self.state())
        try:
            changed = out_of_band(self.account, method, path, json.loads(raw or b"null"))
        except ValueError:
            return Response.problem(ApiProblem(400, "control body is not valid JSON"))
        except ApiProblem as problem:
            return Response.problem(problem)
        if changed is not None:
            return Response(*changed)
        return Response.problem(ApiProblem(404, f"no emulator control at {method} {path}"))

    def _proxy(
        self, match: re.Match[str], method: str, headers: Mapping[str, str], raw: bytes
    ) -> Response:
        path = match["rest"] or "/"
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        status, payload = self.account.proxy(
            match["pod"], int(match["port"]), method, path, body, headers
        )
        pod = self.account.pods.get(match["pod"])
        # Whether a credential reached the pod is recorded, never the credential itself.
        self.account.requests.append(
            {
                "op": "proxy",
                "method": method,
                "path": path,
                "pod": match["pod"],
                "port": int(match["port"]),
                "body": body,
                "status": status,
                "authorization": "authorization" in headers,
                # Which container answered: a probe of the old one after a PATCH shows here.
                "startedWall": pod.started_wall if pod is not None else None,
            }
        )
        return Response.of(status, payload)

    # Handlers

    def _now(self) -> float:
        return self.account.clock.now()

    def create_pod(self, params: Params, body: Any, query: dict[str, list[str]]) -> Response:
        return Response(201, self.account.create_pod(body).view(self._now()))

    def list_pods(self, params: Params, body: Any, query: dict[str, list[str]]) -> Response:
        now = self._now()
        return Response(200, {"pods": [p.view(now) for p in self.account.list_pods()]})

    def get_pod(self, params: Params, body: Any, query: dict[str, list[str]]) -> Response:
        return Response(200, self.account.read_pod(params["id"]).view(self._now()))

    def update_pod(self, params: Params, body: Any, query: dict[str, list[str]]) -> Response:
        return Response(200, self.account.update_pod(params["id"], body).view(self._now()))

    def pod_logs(self, params: Params, body: Any, query: dict[str, list[str]]) -> Response:
        """Server-Sent Events, one `data:` per line; this emulator ends the stream at once."""
        tail = int((query.get("tail") or ["100"])[0])
        source = query["source"][-1] if query.get("source") else None
        if source not in (None, "container", "system"):
            raise ApiProblem(400, f"source must be container or system, got {source!r}")
        events = []
        entries = self.account.logs(params["id"], min(max(tail, 0), 5000), source)
        for index, (origin, line) in enumerate(entries):
            ts = f"2026-01-01T00:00:00Z/{index:012d}"
            data = json.dumps({"ts": ts, "source": origin, "line": line})
            events.append(f"id: {ts}\ndata: {data}\n\n")
        return Response.of(200, RawBody("text/event-stream", "".join(events).encode()))

    def delete_pod(self, params: Params, body: Any, query: dict[str, list[str]]) -> Response:
        self.account.terminate_pod(params["id"])
        return Response(204)

    def pod_action(self, params: Params, body: Any, query: dict[str, list[str]]) -> Response:
        pod = self.account.pod_action(params["id"], body["action"])
        return Response(204) if pod is None else Response(200, pod.view(self._now()))

    def create_volume(self, params: Params, body: Any, query: dict[str, list[str]]) -> Response:
        return Response(201, self.account.create_volume(body).view())

    def list_volumes(self, params: Params, body: Any, query: dict[str, list[str]]) -> Response:
        volumes = [v.view() for v in self.account.list_volumes()]
        return Response(200, {"networkVolumes": volumes})

    def get_volume(self, params: Params, body: Any, query: dict[str, list[str]]) -> Response:
        return Response(200, self.account.volume(params["id"]).view())

    def update_volume(self, params: Params, body: Any, query: dict[str, list[str]]) -> Response:
        return Response(200, self.account.update_volume(params["id"], body).view())

    def delete_volume(self, params: Params, body: Any, query: dict[str, list[str]]) -> Response:
        self.account.delete_volume(params["id"])
        return Response(204)


PRODUCTS = frozenset({"POD", "CLUSTER", "SERVERLESS"})


def _includes(query: dict[str, list[str]], name: str) -> bool:
    return name in ",".join(query.get("include", [])).upper().split(",")


def _list_gpus(app: App, params: Params, body: Any, query: dict[str, list[str]]) -> Response:
    with_stock = _includes(query, "AVAILABILITY")
    # As documented: `product` is required with include=AVAILABILITY and valid only with it.
    if with_stock != bool(query.get("product")):
        raise ApiProblem(400, "product is required with include=AVAILABILITY, and only with it")
    products = {p for v in query.get("product", []) for p in v.upper().split(",")}
    if products - PRODUCTS:
        unknown = ", ".join(sorted(products - PRODUCTS))
        raise ApiProblem(400, f"unknown product {unknown}; one of {', '.join(sorted(PRODUCTS))}")
    gpus = gpu_types(app.account.catalog, app.account.stock, availability=with_stock)
    if with_stock:
        for gpu in gpus:
            # What hosts of this type report; `available` follows the type's overall stock.
            free = gpu.get("availability", "NONE") != "NONE"
            gpu["cudaVersions"] = [
                {"version": v, "available": free} for v in app.account.realism.host_cuda(gpu["id"])
            ]
    return Response(200, {"gpus": gpus})


def _list_cpus(app: App, params: Params, body: Any, query: dict[str, list[str]]) -> Response:
    return Response(200, {"cpus": cpu_types(app.account.catalog, query)})


def _get_cpu(app: App, params: Params, body: Any, query: dict[str, list[str]]) -> Response:
    return Response(200, cpu_type(app.account.catalog, params["id"], query))


def _list_data_centers(
    app: App, params: Params, body: Any, query: dict[str, list[str]]
) -> Response:
    account = app.account
    tiers = {
        dc: account.volume_types.get(dc, list(account.realism.tiers(dc)))
        for dc in account.catalog.data_centers
    }
    centres = data_centers(
        account.catalog,
        account.stock,
        tiers,
        gpu_availability=_includes(query, "GPU_AVAILABILITY"),
        global_network=_flag(query, "globalNetwork"),
    )
    return Response(200, {"dataCenters": centres})


def _flag(query: dict[str, list[str]], name: str) -> bool | None:
    """A boolean query filter: None when not given (the schema has checked its spelling)."""
    values = query.get(name)
    return None if not values else values[-1].lower() == "true"


def _list_pod_billing(app: App, params: Params, body: Any, query: dict[str, list[str]]) -> Response:
    account = app.account
    return Response(200, pod_billing(account.pods.values(), query, account.clock.utc()))


def _route(method: str, path: str, op: str, schema: str | None, handler: Handler) -> Route:
    pattern = re.compile(path.replace("{id}", "(?P<id>[^/]+)"))
    return Route(method, pattern, op, schema, handler)


ROUTES = (
    _route("GET", "/v2/pods", "pods.list", None, App.list_pods),
    _route("POST", "/v2/pods", "pods.create", "CreatePodRequest", App.create_pod),
    _route("GET", "/v2/pods/{id}", "pods.get", None, App.get_pod),
    _route("PATCH", "/v2/pods/{id}", "pods.update", "UpdatePodRequest", App.update_pod),
    _route("DELETE", "/v2/pods/{id}", "pods.delete", None, App.delete_pod),
    _route("GET", "/v2/pods/{id}/logs", "pods.logs", None, App.pod_logs),
    _route("POST", "/v2/pods/{id}/action", "pods.action", "PodActionRequest", App.pod_action),
    _route("GET", "/v2/network-volumes", "volumes.list", None, App.list_volumes),
    _route(
        "POST",
        "/v2/network-volumes",
        "volumes.create",
        "CreateNetworkVolumeRequest",
        App.create_volume,
    ),
    _route("GET", "/v2/network-volumes/{id}", "volumes.get", None, App.get_volume),
    _route(
        "PATCH",
        "/v2/network-volumes/{id}",
        "volumes.update",
        "UpdateNetworkVolumeRequest",
        App.update_volume,
    ),
    _route("DELETE", "/v2/network-volumes/{id}", "volumes.delete", None, App.delete_volume),
    _route("GET", "/v2/catalog/gpus", "catalog.gpus", None, _list_gpus),
    _route("GET", "/v2/catalog/cpus", "catalog.cpus", None, _list_cpus),
    _route("GET", "/v2/catalog/cpus/{id}", "catalog.cpu", None, _get_cpu),
    _route("GET", "/v2/catalog/datacenters", "catalog.datacenters", None, _list_data_centers),
    _route("GET", "/v2/billing/pods", "billing.pods", None, _list_pod_billing),
)
