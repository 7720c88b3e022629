"""Whether the account takes a pod create, where it lands and what it costs: RunPod's rules
that the OpenAPI schema cannot express, applied after it."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from frutebox_infra.emulator.catalog import Catalog, Stock
from frutebox_infra.emulator.cpus import admit_cpu
from frutebox_infra.emulator.errors import CAPACITY_DETAIL, ApiProblem
from frutebox_infra.emulator.realism import Realism
from frutebox_infra.emulator.records import VolumeRecord


@dataclass(frozen=True)
class Admitted:
    """A create the account took: the body it keeps (gpu.count filled in), where it runs,
    and the real seconds its server loads once RUNNING."""

    body: dict[str, Any]
    data_center: str
    usd_per_hour: float
    cuda: str | None
    load_s: float


def check_data_centers(catalog: Catalog, ids: Iterable[str]) -> None:
    unknown = [dc for dc in ids if dc not in catalog.data_centers]
    if unknown:
        raise ApiProblem(
            400,
            f"unknown data center(s) {', '.join(unknown)}; known:"
            f" {', '.join(catalog.data_centers)}",
        )


def check_image(realism: Realism, image: object) -> None:
    known = realism.known_images
    if known is not None and isinstance(image, str) and image not in known:
        # RunPod answers a create whose image no registry holds with 422 and no field errors.
        raise ApiProblem(422, f"image {image!r} could not be pulled: manifest unknown")


def take_gpus(
    stock: Stock, catalog: Catalog, gpu_id: str, count: int, data_centers: list[str]
) -> str:
    """The first of `data_centers` (any, when empty) with `count` free: taken from `stock`."""
    for dc in data_centers or list(catalog.data_centers):
        if stock.get((gpu_id, dc), 0) >= count:
            stock[(gpu_id, dc)] -= count
            return dc
    raise ApiProblem(400, CAPACITY_DETAIL)


def _load_s(body: Mapping[str, Any], volumes: Mapping[str, VolumeRecord], r: Realism) -> float:
    """Grows with the weights the server reads; knowing no model, the emulator reads them as
    the mounted volume's size."""
    network = (body.get("mounts") or {}).get("network") or []
    volume = volumes.get(network[0]["volumeId"]) if network else None
    gb = volume.size if volume is not None else 0
    return r.real_s(r.load_base_s + r.load_s_per_gb * gb)


def _data_centers(
    body: Mapping[str, Any], catalog: Catalog, volumes: Mapping[str, VolumeRecord]
) -> list[str]:
    """Where the pod may run: its dataCenterIds, narrowed to its network volume's centre."""
    cloud = body.get("cloud", "SECURE")
    mounts = body.get("mounts") or {}
    if "persistent" in mounts and "network" in mounts:
        raise ApiProblem(400, "mounts.persistent and mounts.network are mutually exclusive")
    if "cpu" in body and "persistent" in mounts:
        raise ApiProblem(400, "mounts.persistent is not allowed on CPU pods")
    data_centers = list(body.get("dataCenterIds") or [])
    check_data_centers(catalog, data_centers)
    for entry in mounts.get("network") or []:
        volume = volumes.get(entry["volumeId"])
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
    return data_centers


NETWORKING_CPU_DETAIL = "globalNetworking requires an NVIDIA GPU pod"


def check_networking(
    catalog: Catalog, body: Mapping[str, Any], data_centers: list[str]
) -> list[str]:
    """Where a pod asking for global networking may run: the data centres of `data_centers`
    (any, when empty) whose catalog entry has `globalNetwork`. RunPod enforces both rules
    upstream (CreatePodRequest `globalNetworking`): an NVIDIA GPU pod, in such a centre."""
    if not body.get("globalNetworking"):
        return data_centers
    gpu = body.get("gpu")
    if not isinstance(gpu, dict) or not str(gpu.get("id", "")).startswith("NVIDIA"):
        raise ApiProblem(400, NETWORKING_CPU_DETAIL)
    offered = [dc for dc in data_centers or list(catalog.data_centers) if dc in catalog.networked]
    if not offered:
        raise ApiProblem(
            400,
            f"globalNetworking is not supported in data center(s) {', '.join(data_centers)};"
            f" see GET /v2/catalog/datacenters (globalNetwork) for eligible data centers",
        )
    return offered


def admit_pod(
    request: Mapping[str, Any],
    *,
    catalog: Catalog,
    stock: Stock,
    volumes: Mapping[str, VolumeRecord],
    realism: Realism,
) -> Admitted:
    """Check a create the schema accepted; a GPU pod takes its GPUs from `stock`, a CPU pod
    the flavor rules of cpus.py."""
    body = copy.deepcopy(dict(request))
    if ("gpu" in body) == ("cpu" in body):
        raise ApiProblem(400, "exactly one of gpu or cpu must be set")
    if "templateId" in body:
        raise ApiProblem(404, f"template {body['templateId']} not found")
    data_centers = check_networking(catalog, body, _data_centers(body, catalog, volumes))
    check_image(realism, body.get("image"))
    load_s = _load_s(body, volumes, realism)
    if "cpu" in body:
        dc, cpu_cost, memory_gb = admit_cpu(body, catalog, data_centers)
        body["cpu"]["memory"] = memory_gb  # the API derives it from the flavor
        return Admitted(body, dc, cpu_cost, None, 0.0)
    gpu = body["gpu"]
    if gpu.get("allowedCudaVersions") and "minCudaVersion" in gpu:
        raise ApiProblem(400, "allowedCudaVersions and minCudaVersion are exclusive")
    gpu_type = catalog.gpus.get(gpu["id"])
    if gpu_type is None:
        raise ApiProblem(400, f"unknown GPU type {gpu['id']!r}")
    if realism.require_gpu_count and "count" not in gpu:
        raise ApiProblem(400, "gpu.count is required")
    count = gpu.setdefault("count", 1)
    if count > gpu_type.max_count:
        raise ApiProblem(400, f"{gpu['id']} allows at most {gpu_type.max_count} per pod")
    cuda = realism.pick_cuda(gpu_type.id, gpu)
    dc = take_gpus(stock, catalog, gpu_type.id, count, data_centers)
    cost = catalog.usd_per_hour(gpu_type.id, body.get("cloud", "SECURE")) * count
    return Admitted(body, dc, cost, cuda, load_s)
