"""`frutebox status`'s shell: reads the stack's outputs and RunPod, then has them compared.

The comparison is `drift.py` (pure), the rendering `report/status_report.py`; this module only
does I/O: `pulumi stack output` in the project's environment, read-only RunPod calls, health
probes through the RunPod proxy (plus removing untracked pods and volumes on request).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from frutebox_infra.commands.toolchain import hermetic_env
from frutebox_infra.deploy.requests import gated_models
from frutebox_infra.planner.plan import FleetPlan
from frutebox_infra.plumbing.errors import FruteboxError, UsageError
from frutebox_infra.plumbing.times import time_or_none
from frutebox_infra.stack.endpoints import API_KEY_ENV, STACK_API_KEY, Endpoint, resolve_endpoint
from frutebox_infra.stack.serving_key import OUTPUT_NAME
from frutebox_infra.stack.settings import PROJECT
from frutebox_infra.stack.stack_file import read_stack_config, stack_file
from frutebox_infra.views.drift import HEALTH_PROBES, HEALTH_WINDOW_S, compute_status, with_health
from frutebox_infra.views.status_view import (
    LivePod,
    LiveVolume,
    ModelStatus,
    Probe,
    Recorded,
    RecordedPod,
    StatusView,
)

if TYPE_CHECKING:
    from frutebox_infra.runpod.client import RunPodClient
    from frutebox_infra.runpod.proxy import ProxyClient
    from frutebox_infra.runpod.wire import NetworkVolume, Pod

SPEND_WINDOWS = {24: ("hour", 24), 168: ("day", 7)}
"""Window in hours -> the billing query (bucket size, last N buckets) that covers it."""

PROBE_TIMEOUT_S = 5.0
"""Each probe's bound: pods are probed in parallel, so `status` waits at most about
HEALTH_WINDOW_S + PROBE_TIMEOUT_S for them, and a healthy fleet answers the first probe."""
MAX_PROBING_PODS = 16
"""Pods probed at once; the proxy is not the API, so no quota is spent."""


class StatusError(FruteboxError):
    """RunPod or the Pulumi backend could not be read: exit 1."""


def _pulumi(args: list[str], project_dir: Path, env: Mapping[str, str]) -> str:
    """stdout of `pulumi ARGS` in the project's environment; a failure as a FruteboxError."""
    try:
        proc = subprocess.run(
            ["pulumi", *args, "--non-interactive"],
            cwd=project_dir,
            env=hermetic_env(env),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise StatusError(f"cannot run `pulumi {args[0]} {args[1]}`: {exc}") from exc
    if proc.returncode != 0:
        message = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        if "no stack named" in message.lower():
            raise UsageError(f"{message} (create the stack with `pulumi up`).")
        raise StatusError(f"`pulumi {args[0]} {args[1]}` failed: {message}")
    return proc.stdout


def read_recorded(stack: str, project_dir: Path, env: Mapping[str, str]) -> Recorded:
    """The stack's `pods` and `volume` outputs, read with the pulumi CLI in the project's env."""
    text = _pulumi(["stack", "output", "--stack", stack, "--json"], project_dir, env)
    return recorded_from_outputs(json.loads(text or "{}"))


def stack_serving_key(stack: str, project_dir: Path, env: Mapping[str, str]) -> str:
    """The stack's serving key (its secret output), which its gateway pods' health paths ask
    for; "" when it cannot be read (those pods then answer the probe 401). Never printed."""
    try:
        text = _pulumi(["stack", "output", OUTPUT_NAME, "--show-secrets", "--stack", stack],
                       project_dir, env)  # fmt: skip
    except StatusError:
        return ""
    return text.strip()


def gateway_serving_key(plan: FleetPlan, project_dir: Path, env: Mapping[str, str]) -> str:
    """The stack's serving key where a pod of `plan` runs the gateway, else "" without asking
    Pulumi: an open pod is never sent it."""
    if not gated_models(plan):
        return ""
    return stack_serving_key(plan.stack, project_dir, env)


def stack_api_key(stack: str, project_dir: Path, env: Mapping[str, str]) -> str | None:
    """The stack's secret `runpodApiKey`, when set: the key `up` deploys with. A stack the
    backend does not have is a UsageError."""
    try:
        text = _pulumi(
            ["config", "get", f"{PROJECT}:{STACK_API_KEY}", "--stack", stack], project_dir, env
        )
    except StatusError:
        return None  # not set (or unreadable): the endpoint then has no key
    return text.strip() or None


def stack_file_sets_key(stack: str, project_dir: Path) -> bool:
    """Whether the stack file holds the secret `runpodApiKey` (Pulumi keeps a stack's config,
    its secrets encrypted, in that file)."""
    return STACK_API_KEY in read_stack_config(stack_file(stack, project_dir / "stacks"))


def stack_endpoint(
    stack: str, project_dir: Path, env: Mapping[str, str], stack_url: str | None
) -> Endpoint:
    """The stack's endpoint by the one precedence (endpoints.py); the stack's secret is read
    (a `pulumi config get`) only when the environment has no key and the stack file holds
    one. No key at all: exit 2, before any pulumi command runs."""
    endpoint = resolve_endpoint(env, stack_url=stack_url)
    if not endpoint.has_key and stack_file_sets_key(stack, project_dir):
        endpoint = resolve_endpoint(
            env, stack_key=stack_api_key(stack, project_dir, env), stack_url=stack_url
        )
    if not endpoint.has_key:
        raise UsageError(
            f"reading RunPod needs a key: export {API_KEY_ENV} (a read-only key is enough) or"
            f" set the stack secret {PROJECT}:{STACK_API_KEY}."
        )
    return endpoint


def recorded_from_outputs(outputs: Mapping[str, Any]) -> Recorded:
    pods = {}
    for model_id, out in (outputs.get("pods") or {}).items():
        if not isinstance(out, dict) or out.get("armed") is False:
            continue  # outside its armed window: no pod, by plan
        pods[model_id] = RecordedPod(
            model_id=model_id,
            name=str(out.get("name", "")),
            pod_id=str(out.get("podId") or ""),
            gpu_id=str(out.get("gpuId") or ""),
            gpu_count=int(out.get("gpuCount") or 0),
            usd_per_hour=float(out.get("usdPerHour") or 0.0),
        )
    volume = outputs.get("volume") or {}
    return Recorded(
        pods=pods,
        volume_id=str(volume.get("id")) if volume.get("id") else None,
        volume_size_gb=int(volume["sizeGb"]) if volume.get("sizeGb") else None,
        owner=str(volume["owner"]) if volume.get("owner") else None,
    )


def live_pod(pod: Pod) -> LivePod:
    return LivePod(
        id=pod.id,
        name=pod.name,
        status=pod.status,
        image=pod.image or "",
        args=pod.args or "",
        env=dict(pod.env),
        gpu_id=pod.gpu.id if pod.gpu else None,
        gpu_count=pod.gpu.count if pod.gpu else 0,
        usd_per_hour=pod.cost,
        data_center_id=pod.data_center_id,
        volume_id=pod.volume_id,
        started_at=time_or_none(pod.started_at),
        ports=tuple(pod.ports),
        networked=pod.networked,
    )


def live_volume(volume: NetworkVolume) -> LiveVolume:
    return LiveVolume(volume.id, volume.name, volume.size, volume.data_center, volume.type)


def runpod_client(
    endpoint: Endpoint, *, command: str = "frutebox status", writes: bool = False
) -> RunPodClient:
    """A client whose refusals name the key's source and what `command` needs of it; it
    retries a RunPod hiccup as the deploy step does, paced by the same variables."""
    from frutebox_infra.runpod.access import KeyUse, Need
    from frutebox_infra.runpod.client import RunPodClient
    from frutebox_infra.runpod.command_io import Settings

    use = (
        KeyUse(endpoint.key_source, f"`{command} --terminate-untracked`", Need.WRITE)
        if writes
        else KeyUse(endpoint.key_source, f"`{command}`", Need.READ)
    )
    return RunPodClient(
        api_key=endpoint.api_key or "",
        base_url=endpoint.api_url,
        timeout_s=30.0,
        key_use=use,
        retry=Settings.from_env(os.environ).retry,
    )


def collect(
    plan: FleetPlan,
    recorded: Recorded,
    endpoint: Endpoint,
    *,
    probe: bool = True,
    health_window_s: float = HEALTH_WINDOW_S,
    serving_key: str = "",
) -> StatusView:
    """Read RunPod (pods, volumes, billing), compare, then probe each running pod's health."""
    from frutebox_infra.runpod.errors import RunPodError

    try:
        with contextlib.closing(runpod_client(endpoint)) as client:
            pods = [live_pod(p) for p in client.list_pods()]
            pods += _listed_late(client, recorded, {p.id for p in pods})
            volumes = [live_volume(v) for v in client.list_volumes()]
            ours = {r.pod_id for r in recorded.pods.values()}
            billed = {}
            for hours, (bucket, last) in SPEND_WINDOWS.items():
                records = client.pod_billing(bucket=bucket, last=last)
                billed[hours] = sum(r.total_amount for r in records if r.pod_id in ours)
    except RunPodError as exc:
        raise StatusError(str(exc)) from exc
    view = compute_status(plan, recorded, pods, volumes, now=datetime.now(UTC), billed_usd=billed)
    if not probe:
        return view
    probes = probe_health(view, endpoint, window_s=health_window_s, serving_key=serving_key)
    return with_health(view, probes)


def _listed_late(client: RunPodClient, recorded: Recorded, listed: set[str]) -> list[LivePod]:
    """Recorded pods the list left out, read one by one: a listing may lag, a 404 may not."""
    from frutebox_infra.runpod.errors import NotFoundError

    found = []
    for pod in recorded.pods.values():
        if pod.pod_id and pod.pod_id not in listed:
            try:
                found.append(live_pod(client.get_pod(pod.pod_id)))
            except NotFoundError:
                continue
    return found


def probe_health(
    view: StatusView,
    endpoint: Endpoint,
    *,
    window_s: float = HEALTH_WINDOW_S,
    probes: int = HEALTH_PROBES,
    sleep: Callable[[float], None] = time.sleep,
    serving_key: str = "",
) -> dict[str, Probe]:
    """Each RUNNING pod's health path through the RunPod proxy (never with the API key), up to
    `probes` times over `window_s` until one answers 2xx; the pods in parallel. A gateway
    pod's probe carries the stack's `serving_key`; an open pod's never does."""
    from frutebox_infra.runpod.proxy import ProxyClient

    # A private pod publishes no port: there is nothing on the proxy to ask.
    targets = [m for m in view.models if m.live is not None and m.live.status == "RUNNING"
               and m.planned is not None and m.private_address is None]  # fmt: skip
    if not targets:
        return {}
    proxy = ProxyClient(template=endpoint.proxy_template, timeout_s=PROBE_TIMEOUT_S)
    try:
        with ThreadPoolExecutor(max_workers=min(MAX_PROBING_PODS, len(targets))) as pool:
            found = pool.map(
                lambda m: _probe(proxy, m, window_s, probes, sleep, serving_key), targets
            )
            return {m.model_id: result for m, result in zip(targets, found, strict=True)}
    finally:
        proxy.close()


def _probe(
    proxy: ProxyClient,
    model: ModelStatus,
    window_s: float,
    probes: int,
    sleep: Callable[[float], None],
    serving_key: str = "",
) -> Probe:
    assert model.live is not None and model.planned is not None
    spec = model.planned.pod
    key = serving_key if spec.serving_key_env else ""
    url = proxy.url(model.live.id, spec.port) + spec.health_path
    pause = window_s / (probes - 1) if probes > 1 else 0.0
    last: int | None = None
    for attempt in range(probes):
        if attempt:
            sleep(pause)
        last = proxy.probe(url, serving_key=key)
        if last is not None and 200 <= last < 300:
            return Probe(True, attempt + 1, window_s, last, spec.health_path)
    return Probe(False, probes, window_s, last, spec.health_path)


def terminate_untracked(view: StatusView, endpoint: Endpoint) -> list[str]:
    """Terminate the pods and delete the volumes that carry this stack's mark but no state
    records; their ids. Foreign ones (named like ours, without our token) are never touched."""
    from frutebox_infra.runpod.errors import NotFoundError, RunPodError

    removed = []
    try:
        with contextlib.closing(runpod_client(endpoint, writes=True)) as client:
            for pod in view.untracked:
                with contextlib.suppress(NotFoundError):
                    client.delete_pod(pod.id)
                removed.append(pod.id)
            for volume in view.untracked_volumes:
                with contextlib.suppress(NotFoundError):
                    client.delete_volume(volume.id)
                removed.append(volume.id)
    except RunPodError as exc:
        raise StatusError(str(exc)) from exc
    return removed
