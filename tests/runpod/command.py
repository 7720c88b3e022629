"""Driving the command entry (`python -m frutebox_infra.runpod`) against the emulator.

Its environment, a pod request with one candidate per GPU, and the result it printed; `run`
calls the entry in-process and checks that no secret reached its output.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any

import httpx

from frutebox_infra.deploy.contract import HealthSpec, PodRequest, TimeoutSpec
from frutebox_infra.emulator.server import RunningEmulator
from frutebox_infra.runpod.__main__ import main
from frutebox_infra.runpod.lifecycle import Health, Timeouts
from tests.runpod.conftest import API_KEY, HF_TOKEN, OWNER, SERVING_KEY

POD_NAME = "frutebox-dev-qwen3-8b"
DUPLICATE_CHECK_S = "0.01"
"""The window of the looks for what an ambiguous create made: the fast account's listing never
lags, so Timeouts' default (sized for the real listing's lag) would only idle the test."""
UNSEEN = "was not seen within"
"""What the step logs when the window ends with an ambiguous answer's result unseen."""


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def result(self) -> Any:
        return json.loads(self.out)


def env_for(emulator: RunningEmulator, **extra: str) -> dict[str, str]:
    env = {
        "RUNPOD_API_URL": emulator.url,
        "RUNPOD_API_KEY": API_KEY,
        "RUNPOD_PROXY_URL_TEMPLATE": emulator.app.proxy_url_template,
        "FRUTEBOX_HF_TOKEN": HF_TOKEN,
        "FRUTEBOX_STACK_SERVING_KEY": SERVING_KEY,
        "FRUTEBOX_POLL_INTERVAL_S": "0.002",
        "FRUTEBOX_DUPLICATE_CHECK_S": DUPLICATE_CHECK_S,
        "FRUTEBOX_RETRY_BACKOFF_S": "0",
        "FRUTEBOX_RUNNING_TIMEOUT_S": "5",
        "FRUTEBOX_HEALTH_TIMEOUT_S": "5",
    }
    env.update(extra)
    return {k: v for k, v in env.items() if v}


def run(
    args: str,
    request: Any = None,
    *,
    env: dict[str, str],
    previous: Any = None,
    transport: httpx.BaseTransport | None = None,
) -> Run:
    if previous is not None:
        env = {**env, "PULUMI_COMMAND_STDOUT": json.dumps(previous)}
    stdin = io.StringIO(
        "" if request is None else request if isinstance(request, str) else json.dumps(request)
    )
    out, err = io.StringIO(), io.StringIO()
    code = main(args.split(), stdin=stdin, stdout=out, stderr=err, env=env, transport=transport)
    done = Run(code, out.getvalue(), err.getvalue())
    for secret in (API_KEY, HF_TOKEN, SERVING_KEY, env.get("FRUTEBOX_STACK_SERVING_KEY", "")):
        assert not secret or secret not in done.out + done.err
    return done


def volume(emulator: RunningEmulator, dc: str = "EU-RO-1") -> str:
    return emulator.app.account.create_volume({"name": "w", "size": 50, "dataCenter": dc}).id


def candidate(
    volume_id: str, gpu: str, *, port: int = 8080, image: str = "img:1", dc: str = "EU-RO-1"
) -> dict[str, Any]:
    return {
        "name": POD_NAME,
        "image": image,
        "args": "--port 8080",
        "env": {"A": "1"},
        "ports": [f"{port}/http"],
        "disk": 20,
        "gpu": {"id": gpu, "count": 1},
        "cloud": "SECURE",
        "dataCenterIds": [dc],
        "mounts": {"network": [{"volumeId": volume_id, "path": "/workspace"}]},
    }


def pod_request(volume_id: str, *gpus: str, port: int = 8080, **overrides: Any) -> dict[str, Any]:
    """A PodRequest as the planner writes it (the one contract), as JSON-ready data."""
    request = PodRequest(
        name=POD_NAME,
        owner=OWNER,
        volumeId=volume_id,
        candidates=[candidate(volume_id, g, port=port) for g in gpus or ("NVIDIA RTX A4000",)],
        health=HealthSpec(port=port, path="/health"),
        hfTokenEnv=["HF_TOKEN"],
        timeouts=TimeoutSpec(runningSeconds=Timeouts.running_s, healthySeconds=Timeouts.healthy_s),
        meta={"model": "qwen3-8b", "stack": "dev"},
    )
    data: dict[str, Any] = json.loads(request.to_json())
    data.update(overrides)
    return data


# A pod's bring-up as the lifecycle tests script it: tiny bounds, one health port.
TIMEOUTS = Timeouts(
    running_s=30, healthy_s=60, poll_interval_s=2, api_check_s=4, duplicate_check_s=3, pull_s=5
)
HEALTH = Health(port=8080, path="/health")
HEALTH_URL = "https://pod1-8080.proxy.test/health"
PULL_URL = "https://pod1-8080.proxy.test/api/pull"
TAGS_URL = "https://pod1-8080.proxy.test/api/tags"
