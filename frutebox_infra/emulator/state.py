"""The emulated RunPod account: pods, network volumes, stock and prices, under the API's rules."""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from typing import Any

from frutebox_infra.emulator import control
from frutebox_infra.emulator.billing import close_interval, open_interval
from frutebox_infra.emulator.catalog import Catalog, Stock, full_stock
from frutebox_infra.emulator.errors import CAPACITY_DETAIL, ApiProblem
from frutebox_infra.emulator.ports import serve_port
from frutebox_infra.emulator.realism import STANDARD, Realism
from frutebox_infra.emulator.records import (
    ACTIONS,
    HOLDS_GPUS,
    LIVE,
    RESTART_FIELDS,
    PodRecord,
    VolumeRecord,
    now,
)


class Account:
    """One emulated account. Not thread-safe by itself: the routes serialise calls."""

    def __init__(
        self, catalog: Catalog, stock: Stock | None = None, realism: Realism | None = None
    ) -> None:
        self.catalog = catalog
        self.initial_catalog = catalog
        self.volume_types: dict[str, list[str]] = {}
        """Out-of-band overrides of the data centres' volume tiers (control.py)."""
        self.realism = realism or Realism.fast()
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
        self._seed_foreign()

    def _seed_foreign(self) -> None:
        """Someone else's pods and volumes under names we may use: RunPod names are not unique.

        They run another image in another data centre and mount nothing of ours; only the
        name collides.
        """
        dcs = list(self.catalog.data_centers)
        elsewhere = dcs[-1]
        for index, name in enumerate(self.realism.foreign_pod_names):
            gpu = next(iter(self.catalog.gpus))
            pod = PodRecord(
                id=f"foreign{index:04d}",
                name=name,
                body={
                    "name": name,
                    "image": "someone/else:1",
                    "ports": ["8888/http"],
                    "gpu": {"id": gpu, "count": 1},
                    "env": {"JUPYTER_TOKEN": "theirs"},
                },
                status="RUNNING",
                data_center_id=elsewhere,
                cost_per_hour=0.5,
                created_at=now(),
                started_at=now(),
                started_wall=time.time() - 86400,
                foreign=True,
            )
            self.pods[pod.id] = pod
        for index, name in enumerate(self.realism.foreign_volume_names):
            volume = VolumeRecord(f"forvol{index:04d}", name, 500, dcs[0], STANDARD, foreign=True)
            self.volumes[volume.id] = volume

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
        self._check_image(body.get("image"))
        cuda: str | None = None
        if "gpu" in body:
            gpu = body["gpu"]
            if gpu.get("allowedCudaVersions") and "minCudaVersion" in gpu:
                raise ApiProblem(400, "allowedCudaVersions and minCudaVersion are exclusive")
            gpu_type = self.catalog.gpus.get(gpu["id"])
            if gpu_type is None:
                raise ApiProblem(400, f"unknown GPU type {gpu['id']!r}")
            if self.realism.require_gpu_count and "count" not in gpu:
                raise ApiProblem(400, "gpu.count is required")
            count = gpu.setdefault("count", 1)
            if count > gpu_type.max_count:
                raise ApiProblem(400, f"{gpu['id']} allows at most {gpu_type.max_count} per pod")
            cuda = self.realism.pick_cuda(gpu_type.id, gpu)
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
            created_wall=time.time(),
            cuda=cuda,
            load_s=self._load_s(body),
            logs=[f"pulling image {body.get('image', '')}"],
        )
        self.pods[pod.id] = pod
        open_interval(pod)
        return pod

    def _check_image(self, image: Any) -> None:
        known = self.realism.known_images
        if known is not None and isinstance(image, str) and image not in known:
            # RunPod answers a create whose image no registry holds with 422 and no field errors.
            raise ApiProblem(422, f"image {image!r} could not be pulled: manifest unknown")

    def _load_s(self, body: Mapping[str, Any]) -> float:
        """Real seconds a server loads after RUNNING: grows with the weights it reads.

        The emulator knows no model, so the weights are read as the mounted volume's size.
        """
        network = (body.get("mounts") or {}).get("network") or []
        volume = self.volumes.get(network[0]["volumeId"]) if network else None
        gb = volume.size if volume is not None else 0
        r = self.realism
        return r.real_s(r.load_base_s + r.load_s_per_gb * gb)

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
        if pod.restart_at_wall is not None and time.time() >= pod.restart_at_wall:
            pod.restart_at_wall = None
            pod.status, pod.started_at, pod.started_wall = "STARTING", None, None
            pod.logs.append("restarting the container with the new settings")
        elif pod.status == "PROVISIONING":
            pod.status = "STARTING"
        elif pod.status == "STARTING":
            pod.status = "ERROR" if pod.fault == "pod-error" else "RUNNING"
            if pod.status == "RUNNING":
                pod.started_at, pod.started_wall = now(), time.time()
                pod.logs.append("container started; loading weights")
            else:
                pod.logs.append("container exited with code 1: RuntimeError: CUDA error")
        return pod

    def list_pods(self) -> list[PodRecord]:
        """Eventually consistent: a pod shows up only some time after its create."""
        shown_after = time.time() - self.realism.real_s(self.realism.listing_delay_s)
        return [
            p
            for p in self.pods.values()
            if p.status != "TERMINATED" and (p.foreign or p.created_wall <= shown_after)
        ]

    def logs(self, pod_id: str, tail: int) -> list[str]:
        """The container's log lines, as GET /v2/pods/{id}/logs streams them."""
        pod = self.pod(pod_id)
        if pod.status == "RUNNING" and pod.started_wall is not None:
            if pod.fault == "never-healthy":
                pod.logs.append("torch.OutOfMemoryError: CUDA out of memory")
            elif time.time() - pod.started_wall >= pod.load_s:
                pod.logs.append("server is listening")
        lines = pod.logs[-tail:] if tail else []
        return lines

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
        if "image" in patch:
            self._check_image(patch["image"])
        for key, value in patch.items():
            if key == "mounts" and not value:
                continue
            pod.body[key] = copy.deepcopy(value)
        pod.name = pod.body["name"]
        if RESTART_FIELDS.intersection(patch) and pod.status in LIVE:
            delay = self.realism.real_s(self.realism.restart_delay_s)
            if delay > 0:
                # RunPod keeps showing the old container, RUNNING with its old startedAt, for
                # a while after the PATCH; the restart shows on a read after that.
                pod.restart_at_wall = time.time() + delay
            else:
                pod.status, pod.started_at, pod.started_wall = "STARTING", None, None
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
        tiers = self.realism.tiers(body["dataCenter"])
        tier = body.get("type", tiers[0])
        if tier not in tiers:
            raise ApiProblem(
                400, f"{body['dataCenter']} offers network volume types {', '.join(tiers)} only"
            )
        volume = VolumeRecord(
            id=uuid.uuid4().hex[:10],
            name=body["name"],
            size=body["size"],
            data_center=body["dataCenter"],
            type=tier,
            created_wall=time.time(),
        )
        self.volumes[volume.id] = volume
        return volume

    def volume(self, volume_id: str) -> VolumeRecord:
        volume = self.volumes.get(volume_id)
        if volume is None or volume.deleted:
            raise ApiProblem(404, f"network volume {volume_id} not found")
        return volume

    def list_volumes(self) -> list[VolumeRecord]:
        shown_after = time.time() - self.realism.real_s(self.realism.listing_delay_s)
        return [
            v
            for v in self.volumes.values()
            if not v.deleted and (v.foreign or v.created_wall <= shown_after)
        ]

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
        return serve_port(pod, port, method, path, body)

    # Persistence and inspection

    def snapshot(self) -> dict[str, Any]:
        def cells(stock: Stock) -> list[dict[str, Any]]:
            return [
                {"gpuId": g, "dataCenterId": dc, "available": n} for (g, dc), n in stock.items()
            ]

        return {
            # Pods read as the API shows them (terminated ones too); "emulator" keeps the rest.
            "pods": [{**p.view(), "emulator": asdict(p)} for p in self.pods.values()],
            "volumes": [
                {**v.view(), "deleted": v.deleted, "foreign": v.foreign}
                for v in self.volumes.values()
            ],
            "stock": cells(self.stock),
            "initialStock": cells(self.initial_stock),
            "outOfBand": control.saved_changes(self),
            "requests": self.requests,
        }

    @classmethod
    def restore(
        cls,
        catalog: Catalog,
        data: Mapping[str, Any],
        stock: Stock | None,
        realism: Realism | None = None,
    ) -> Account:
        """Rebuild from a snapshot; an explicit `stock` replaces the saved one."""

        def table(rows: list[dict[str, Any]]) -> Stock:
            return {(r["gpuId"], r["dataCenterId"]): int(r["available"]) for r in rows}

        account = cls(catalog, stock if stock is not None else table(data["initialStock"]), realism)
        account.pods, account.volumes = {}, {}
        account.stock = dict(stock) if stock is not None else table(data["stock"])
        for raw in data["pods"]:
            account.pods[raw["id"]] = PodRecord(**raw["emulator"])
        for v in data["volumes"]:
            account.volumes[v["id"]] = VolumeRecord(
                v["id"],
                v["name"],
                v["size"],
                v["dataCenter"],
                v["type"],
                v["deleted"],
                foreign=bool(v.get("foreign", False)),
            )
        account.requests = list(data.get("requests", []))
        control.restore_changes(account, data.get("outOfBand"))
        return account
