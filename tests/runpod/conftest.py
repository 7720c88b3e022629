"""Fixtures for the RunPod client: a scripted fake API on httpx.MockTransport, and the emulator."""

from __future__ import annotations

import json
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from frutebox_infra.runpod.client import RunPodClient
from frutebox_infra.runpod.lifecycle import Provisioner
from frutebox_infra.runpod.proxy import ProxyClient
from frutebox_infra.runpod.retrying import RetryPolicy
from frutebox_infra.runpod.volumes import Volumes
from frutebox_infra.runpod.waits import Waits

API = "https://api.test"
PROXY = "https://{podId}-{port}.proxy.test"
API_KEY = "rpa_TESTKEY_0123456789abcdef"
HF_TOKEN = "hf_TESTTOKEN_abcdef0123456789"
SERVING_KEY = "sk_TESTSERVINGKEY_0123456789abcdefghij"
"""The stack's serving key the step is given (a gateway pod is never started without one)."""
OWNER = "feedc0de12345678"
VOLUME_ID = "vol1"

Answer = httpx.Response | Callable[[httpx.Request], httpx.Response]


def problem(
    status: int,
    detail: str,
    *,
    errors: list[str] | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    body: dict[str, Any] = {"title": "Error", "status": status, "detail": detail}
    if errors is not None:
        body["errors"] = errors
    return httpx.Response(status, json=body, headers=headers)


def pod(
    pod_id: str = "pod1",
    *,
    name: str = "frutebox-dev-m",
    status: str = "PROVISIONING",
    gpu: str = "NVIDIA A40",
    count: int = 1,
    cost: float = 0.4,
    owner: str | None = OWNER,
) -> dict[str, Any]:
    """A v2 Pod; ours (our token in its env, our volume mounted) unless `owner` says not."""
    return {
        "id": pod_id,
        "name": name,
        "status": status,
        "image": "img:1",
        "args": "",
        "env": {"FRUTEBOX_OWNER": owner} if owner else {},
        "ports": ["8080/http"],
        "disk": 20,
        "gpu": {"id": gpu, "count": count},
        "cloud": "SECURE",
        "dataCenterId": "EU-RO-1",
        "cost": cost,
        "mounts": {"network": [{"volumeId": VOLUME_ID, "path": "/workspace"}]},
    }


def ok(status: int = 200, body: Any = None) -> httpx.Response:
    return httpx.Response(status, json=body) if body is not None else httpx.Response(status)


def states(*statuses: str) -> list[httpx.Response]:
    """Reads of pod1 that find it in each of `statuses` in turn."""
    return [ok(200, pod(status=s)) for s in statuses]


def ndjson(*events: dict[str, Any]) -> httpx.Response:
    return httpx.Response(200, content="".join(json.dumps(e) + "\n" for e in events).encode())


def pulled(request: httpx.Request) -> httpx.Response:
    """A pull that succeeds; a fresh answer per call, because a streamed body is read once."""
    return ndjson({"status": "pulling manifest"}, {"status": "success"})


@dataclass
class FakeApi:
    """Answers queued per (method, path); the last queued answer repeats. Records requests."""

    queues: dict[tuple[str, str], deque[Answer]] = field(default_factory=lambda: defaultdict(deque))
    requests: list[httpx.Request] = field(default_factory=list)

    def on(self, method: str, path: str, *answers: Answer) -> FakeApi:
        self.queues[(method, path)].extend(answers)
        return self

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path if request.url.host.startswith("api.") else str(request.url)
        queue = self.queues.get((request.method, path))
        if not queue:
            return problem(404, f"no fake answer for {request.method} {path}")
        answer = queue.popleft() if len(queue) > 1 else queue[0]
        return answer(request) if callable(answer) else answer

    def calls(self, method: str | None = None, path: str | None = None) -> list[httpx.Request]:
        return [
            r
            for r in self.requests
            if (method is None or r.method == method) and (path is None or r.url.path == path)
        ]

    def bodies(self, method: str, path: str) -> list[Any]:
        return [json.loads(r.content) for r in self.calls(method, path)]

    def trail(self) -> list[str]:
        return [f"{r.method} {r.url.path}" for r in self.requests]


@dataclass
class Clock:
    """Fake time: sleeping advances it, and every sleep is recorded."""

    now: float = 0.0
    sleeps: list[float] = field(default_factory=list)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += max(seconds, 0.001)

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fake() -> FakeApi:
    return FakeApi()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def client(fake: FakeApi, clock: Clock) -> Iterator[RunPodClient]:
    api = RunPodClient(
        api_key=API_KEY,
        base_url=API,
        transport=httpx.MockTransport(fake),
        retry=RetryPolicy(max_attempts=3, backoff_s=0.5),
        sleep=clock.sleep,
    )
    yield api
    api.close()


@pytest.fixture
def logs() -> list[str]:
    return []


@pytest.fixture
def provisioner(client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]) -> Provisioner:
    proxy = ProxyClient(template=PROXY, transport=httpx.MockTransport(fake))
    return Provisioner(client, proxy, log=logs.append, sleep=clock.sleep, clock=clock)


@pytest.fixture
def waits(client: RunPodClient, fake: FakeApi, clock: Clock, logs: list[str]) -> Waits:
    proxy = ProxyClient(template=PROXY, transport=httpx.MockTransport(fake))
    return Waits(client, proxy, log=logs.append, sleep=clock.sleep, clock=clock)


@pytest.fixture
def volumes(client: RunPodClient, clock: Clock, logs: list[str]) -> Volumes:
    return Volumes(client, log=logs.append, sleep=clock.sleep, clock=clock)
