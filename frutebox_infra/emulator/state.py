"""The emulated RunPod account: pods, network volumes, stock and prices, under the API's rules."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from typing import Any

from frutebox_infra.emulator import control
from frutebox_infra.emulator.billing import close_interval, open_interval
from frutebox_infra.emulator.catalog import Catalog, Stock, full_stock
from frutebox_infra.emulator.comfy import models_listing
from frutebox_infra.emulator.errors import CAPACITY_DETAIL, ApiProblem
from frutebox_infra.emulator.records import (
    ACTIONS,
    HOLDS_GPUS,
    LIVE,
    RESTART_FIELDS,
    PodRecord,
    RawBody,
    VolumeRecord,
    now,
)


class Account:
    """One emulated account. Not thread-safe by itself: the routes serialise calls."""

    def __init__(self, catalog: Catalog, stock: Stock | None = None) -> None:
        self.catalog = catalog
        self.initial_catalog = catalog
        self.volume_types: dict[str, list[str]] = {}
        self.initial_stock: Stock = dict(stock if stock is not None else full_stock(catalog))
        self.stock: Stock = {}
        self.pods: dict[str, PodRecord] = {}
        self.volumes: dict[str, VolumeRecord] = {}
        self.requests: list[dict[str, Any]] = []
        self.reset()

    def reset(self) -> None:
        self.stock = dict(self.initial_stock)
        self.catalog = self.initial_catalog
        self.volume_types = {}
        self.pods = {}
        self.volumes = {}
        self.requests = []

    # Pods

    def _check_data_centers(self, ids: Iterable[str]) -> None:
        unknown = [dc for dc in ids if dc not in self.catalog.data_centers]
        if unknown:
            raise ApiProblem(
                400,
                f"unknown data center(s) {', '.join(unknown)}; known:"
                f" {', '.join(self.catalog.data_centers)}",
            )

    def _take_gpus(self, gpu_id: str, count: int, data_centers: list[str]) -> str:
        for dc in data_centers or list(self.catalog.data_centers):
            if self.stock.get((gpu_id, dc), 0) >= count:
                self.stock[(gpu_id, dc)] -= count
                return dc
        raise ApiProblem(400, CAPACITY_DETAIL)

    def _release(self, pod: PodRecord) -> None:
        if pod.gpu and pod.status in HOLDS_GPUS:
            key = (pod.gpu[0], pod.data_center_id)
            self.stock[key] = self.stock.get(key, 0) + pod.gpu[1]
            close_interval(pod)

    def create_pod(self, request: Mapping[str, Any]) -> PodRecord:
        """Apply the handler-level rules the schema cannot express, then place the pod."""
        body = copy.deepcopy(dict(request))
        if ("gpu" in body) == ("cpu" in body):
            raise ApiProblem(400, "exactly one of gpu or cpu must be set")
        if "templateId" in body:
            raise ApiProblem(404, f"template {body['templateId']} not found")
        cloud = body.get("cloud", "SECURE")
        mounts = body.get("mounts") or {}
        if "persistent" in mounts and "network" in mounts:
            raise ApiProblem(400, "mounts.persistent and mounts.network are mutually exclusive")
        if "cpu" in body and "persistent" in mounts:
            raise ApiProblem(400, "mounts.persistent is not allowed on CPU pods")
        data_centers = list(body.get("dataCenterIds") or [])
        self._check_data_centers(data_centers)
        for entry in mounts.get("network") or []:
            volume = self.volumes.get(entry["volumeId"])
            if volume is None or volume.deleted:
                raise ApiProblem(400, f"network volume {entry['volumeId']} does not exist")
            if cloud != "SECURE":
                raise ApiProblem(400, "network volumes attach only to SECURE cloud pods")
            if volume.data_center not in data_centers:
                raise ApiProblem(
                    400,
                    f"network volume {volume.id} is in {volume.data_center};"
                    " dataCenterIds must include it",
                )
            data_centers = [volume.data_center]
        if "gpu" in body:
            gpu = body["gpu"]
            if gpu.get("allowedCudaVersions") and "minCudaVersion" in gpu:
                raise ApiProblem(400, "allowedCudaVersions and minCudaVersion are exclusive")
            gpu_type = self.catalog.gpus.get(gpu["id"])
            if gpu_type is None:
                raise ApiProblem(400, f"unknown GPU type {gpu['id']!r}")
            count = gpu.setdefault("count", 1)
            if count > gpu_type.max_count:
                raise ApiProblem(400, f"{gpu['id']} allows at most {gpu_type.max_count} per pod")
            dc = self._take_gpus(gpu_type.id, count, data_centers)
            cost = self.catalog.usd_per_hour(gpu_type.id, cloud) * count
        else:
            dc = (data_centers or list(self.catalog.data_centers))[0]
            cost = 0.03 * body["cpu"]["vcpuCount"]
        pod = PodRecord(
            id=uuid.uuid4().hex[:14],
            name=body["name"],
            body=body,
            status="PROVISIONING",
            data_center_id=dc,
            cost_per_hour=round(cost, 4),
            created_at=now(),
        )
        self.pods[pod.id] = pod
        open_interval(pod)
        return pod

    def mark(self, pod_id: str, fault: str) -> None:
        """Make a created pod misbehave: pod-error, never-healthy or pull-fails."""
        self.pods[pod_id].fault = fault

    def pod(self, pod_id: str) -> PodRecord:
        """A pod the API still shows; terminated pods are gone from it."""
        pod = self.pods.get(pod_id)
        if pod is None or pod.status == "TERMINATED":
            raise ApiProblem(404, f"pod {pod_id} not found")
        return pod

    def read_pod(self, pod_id: str) -> PodRecord:
        """GET: each read moves a starting pod one step, so polling is really exercised."""
        pod = self.pod(pod_id)
        if pod.status == "PROVISIONING":
            pod.status = "STARTING"
        elif pod.status == "STARTING":
            pod.status = "ERROR" if pod.fault == "pod-error" else "RUNNING"
            pod.started_at = now() if pod.status == "RUNNING" else None
        return pod

    def list_pods(self) -> list[PodRecord]:
        return [p for p in self.pods.values() if p.status != "TERMINATED"]

    def update_pod(self, pod_id: str, patch: Mapping[str, Any]) -> PodRecord:
        pod = self.pod(pod_id)
        mounts = patch.get("mounts") or {}
        current = pod.body.get("mounts") or {}
        if "network" in mounts:
            if not mounts["network"]:
                raise ApiProblem(400, "clearing mounts is not supported")
            if "network" not in current:
                raise ApiProblem(400, "mount kind is fixed at create")
            if mounts["network"][0]["volumeId"] != current["network"][0]["volumeId"]:
                raise ApiProblem(400, "the volumeId of a network mount is immutable")
        if "persistent" in mounts and "persistent" not in current:
            raise ApiProblem(400, "mount kind is fixed at create")
        for key, value in patch.items():
            if key == "mounts" and not value:
                continue
            pod.body[key] = copy.deepcopy(value)
        pod.name = pod.body["name"]
        if RESTART_FIELDS.intersection(patch) and pod.status in LIVE:
            pod.status, pod.started_at = "STARTING", None
        return pod

    def terminate_pod(self, pod_id: str) -> None:
        pod = self.pod(pod_id)
        self._release(pod)
        pod.status = "TERMINATED"

    def pod_action(self, pod_id: str, action: str) -> PodRecord | None:
        pod = self.pod(pod_id)
        if action not in ACTIONS[pod.status]:
            raise ApiProblem(409, f"action {action} is not valid for a pod in status {pod.status}")
        if action == "terminate":
            self.terminate_pod(pod_id)
            return None
        if action == "stop":
            self._release(pod)
            pod.status = "EXITED"
        elif action == "start":
            if pod.status == "EXITED" and pod.gpu:
                self._take_gpus(pod.gpu[0], pod.gpu[1], [pod.data_center_id])
                open_interval(pod)
            pod.status = "PROVISIONING"
        else:
            pod.status = "STARTING"
        return pod

    # Network volumes

    def create_volume(self, body: Mapping[str, Any]) -> VolumeRecord:
        self._check_data_centers([body["dataCenter"]])
        volume = VolumeRecord(
            id=uuid.uuid4().hex[:10],
            name=body["name"],
            size=body["size"],
            data_center=body["dataCenter"],
            type=body.get("type", "STANDARD"),
        )
        self.volumes[volume.id] = volume
        return volume

    def volume(self, volume_id: str) -> VolumeRecord:
        volume = self.volumes.get(volume_id)
        if volume is None or volume.deleted:
            raise ApiProblem(404, f"network volume {volume_id} not found")
        return volume

    def list_volumes(self) -> list[VolumeRecord]:
        return [v for v in self.volumes.values() if not v.deleted]

    def update_volume(self, volume_id: str, patch: Mapping[str, Any]) -> VolumeRecord:
        volume = self.volume(volume_id)
        if "size" in patch and patch["size"] < volume.size:
            raise ApiProblem(400, f"network volume size cannot be reduced (it is {volume.size} GB)")
        volume.size = patch.get("size", volume.size)
        volume.name = patch.get("name", volume.name)
        return volume

    def delete_volume(self, volume_id: str) -> None:
        volume = self.volume(volume_id)
        users = [
            p.id
            for p in self.pods.values()
            if p.status != "TERMINATED" and p.volume_id == volume_id
        ]
        if users:
            raise ApiProblem(
                400,
                f"network volume {volume_id} is mounted by pod(s)"
                f" {', '.join(users)}; terminate them first",
            )
        volume.deleted = True

    # A pod's HTTP ports, as the RunPod proxy serves them

    def proxy(self, pod_id: str, port: int, method: str, path: str, body: Any) -> tuple[int, Any]:
        pod = self.pods.get(pod_id)
        if pod is None or pod.status == "TERMINATED":
            return 404, {"error": f"no pod {pod_id}"}
        if f"{port}/http" not in (pod.body.get("ports") or []):
            return 404, {"error": f"pod {pod_id} does not expose {port}/http"}
        if pod.status != "RUNNING" or pod.fault == "never-healthy":
            return 502, {"error": "the pod's server is not answering"}
        if method == "POST" and path == "/api/pull":
            return self._pull(pod, body)
        listing = models_listing(pod.body, path) if method == "GET" else None
        if listing is not None:
            return 200, listing
        return 200, {"status": "ok", "pod": pod_id, "path": path}

    def _pull(self, pod: PodRecord, body: Any) -> tuple[int, Any]:
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
        pod.pulled.append(model)
        return 200, RawBody.ndjson(events)

    # Persistence and inspection

    def snapshot(self) -> dict[str, Any]:
        def cells(stock: Stock) -> list[dict[str, Any]]:
            return [
                {"gpuId": g, "dataCenterId": dc, "available": n} for (g, dc), n in stock.items()
            ]

        return {
            # Pods read as the API shows them (terminated ones too); "emulator" keeps the rest.
            "pods": [{**p.view(), "emulator": asdict(p)} for p in self.pods.values()],
            "volumes": [{**v.view(), "deleted": v.deleted} for v in self.volumes.values()],
            "stock": cells(self.stock),
            "initialStock": cells(self.initial_stock),
            "outOfBand": control.saved_changes(self),
            "requests": self.requests,
        }

    @classmethod
    def restore(cls, catalog: Catalog, data: Mapping[str, Any], stock: Stock | None) -> Account:
        """Rebuild from a snapshot; an explicit `stock` replaces the saved one."""

        def table(rows: list[dict[str, Any]]) -> Stock:
            return {(r["gpuId"], r["dataCenterId"]): int(r["available"]) for r in rows}

        account = cls(catalog, stock if stock is not None else table(data["initialStock"]))
        account.stock = dict(stock) if stock is not None else table(data["stock"])
        for raw in data["pods"]:
            account.pods[raw["id"]] = PodRecord(**raw["emulator"])
        for v in data["volumes"]:
            account.volumes[v["id"]] = VolumeRecord(
                v["id"], v["name"], v["size"], v["dataCenter"], v["type"], v["deleted"]
            )
        account.requests = list(data.get("requests", []))
        control.restore_changes(account, data.get("outOfBand"))
        return account
