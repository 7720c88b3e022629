"""CPU pods: the flavors the account sells (`GET /v2/catalog/cpus`, schema `CpuType`) and the
rules a create with a `cpu` block meets that the schema cannot state: a flavor it sells, a
vCPU count that is a power of two inside the flavor's range, a container disk within the
flavor's cap per vCPU, and a data centre that offers the flavor (else no capacity)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from frutebox_infra.catalog.schema import CpuFlavor
from frutebox_infra.emulator.catalog import Catalog
from frutebox_infra.emulator.errors import CAPACITY_DETAIL, ApiProblem

PRODUCTS = frozenset({"POD", "SERVERLESS"})
DEFAULT_DISK_GB = 50
"""The container disk a create gets without `disk` (the schema's example)."""


def offered_in(catalog: Catalog, flavor: CpuFlavor) -> list[str]:
    """Where the flavor runs: its recorded data centres, else every one the account has."""
    return [dc for dc in catalog.data_centers if flavor.data_centers is None or dc in
            flavor.data_centers]  # fmt: skip


def cpu_types(catalog: Catalog, query: Mapping[str, list[str]]) -> list[dict[str, Any]]:
    """`GET /v2/catalog/cpus` for `query` (include, product, vcpuCount), as documented."""
    include = ",".join(query.get("include", [])).upper().split(",")
    with_stock = "AVAILABILITY" in include
    products = {p for v in query.get("product", []) for p in v.upper().split(",") if p}
    if with_stock != bool(products):
        raise ApiProblem(400, "product is required with include=AVAILABILITY, and only with it")
    if products - PRODUCTS:
        unknown = ", ".join(sorted(products - PRODUCTS))
        raise ApiProblem(400, f"unknown product {unknown}; one of {', '.join(sorted(PRODUCTS))}")
    vcpus = _vcpu_filter(query.get("vcpuCount"), with_stock)
    return [_cpu_type(catalog, f, with_stock, vcpus) for f in catalog.cpus.values()]


def cpu_type(catalog: Catalog, flavor_id: str, query: Mapping[str, list[str]]) -> dict[str, Any]:
    """`GET /v2/catalog/cpus/{id}`."""
    if flavor_id not in catalog.cpus:
        raise ApiProblem(404, f"cpu type {flavor_id} not found")
    return next(t for t in cpu_types(catalog, query) if t["id"] == flavor_id)


def admit_cpu(
    body: Mapping[str, Any], catalog: Catalog, data_centers: Sequence[str]
) -> tuple[str, float, int]:
    """Where a CPU pod lands, its $/h and its memory (GB, the flavor's per vCPU); raises as
    RunPod answers a create it refuses."""
    cpu = body["cpu"]
    flavor = catalog.cpus.get(cpu["id"])
    if flavor is None:
        known = ", ".join(catalog.cpus) or "none"
        raise ApiProblem(
            400, f"unknown CPU flavor {cpu['id']!r}; GET /v2/catalog/cpus lists {known}"
        )
    vcpus = cpu["vcpuCount"]
    if vcpus & (vcpus - 1):
        raise ApiProblem(400, f"vcpuCount {vcpus} must be a power of two")
    if not flavor.vcpu_min <= vcpus <= flavor.vcpu_max:
        raise ApiProblem(
            400, f"{flavor.id} takes {flavor.vcpu_min} to {flavor.vcpu_max} vCPUs, not {vcpus}"
        )
    disk = body.get("disk", DEFAULT_DISK_GB)
    if flavor.disk_gb_per_vcpu is not None and disk > flavor.disk_gb_per_vcpu * vcpus:
        cap = flavor.disk_gb_per_vcpu * vcpus
        raise ApiProblem(
            400, f"disk {disk} GB is above {cap:g} GB for {vcpus} vCPUs of {flavor.id}"
        )
    offered = offered_in(catalog, flavor)
    wanted = list(data_centers) or list(catalog.data_centers)
    placed = [dc for dc in wanted if dc in offered]
    if not placed:
        raise ApiProblem(400, CAPACITY_DETAIL)
    return placed[0], flavor.usd_per_hour(vcpus), round(flavor.ram_gb_per_vcpu * vcpus)


def _vcpu_filter(values: list[str] | None, with_stock: bool) -> int | None:
    if not values:
        return None
    if not with_stock:
        raise ApiProblem(400, "vcpuCount is valid only with include=AVAILABILITY")
    text = values[-1]
    if not text.isdigit() or int(text) < 2 or int(text) & (int(text) - 1):
        raise ApiProblem(400, f"vcpuCount must be a power of two >= 2, got {text!r}")
    return int(text)


def _cpu_type(
    catalog: Catalog, flavor: CpuFlavor, with_stock: bool, vcpus: int | None
) -> dict[str, Any]:
    found = re.fullmatch(r"(.*?)\s*\((.+)\)", flavor.name)
    name, group = (found[1], found[2]) if found else (flavor.name, "")
    item: dict[str, Any] = {
        "id": flavor.id,
        "name": name,
        "group": group,
        "vcpu": {"min": flavor.vcpu_min, "max": flavor.vcpu_max},
        "ramGbPerVcpu": flavor.ram_gb_per_vcpu,
        # The registry records the Secure price only; serverless is sold at the same here.
        "price": {
            "securePerVcpu": flavor.usd_per_vcpu_hour,
            "serverlessPerVcpu": flavor.usd_per_vcpu_hour,
        },
    }
    if with_stock:
        fits = vcpus is None or flavor.vcpu_min <= vcpus <= flavor.vcpu_max
        centres = offered_in(catalog, flavor) if fits else []
        item["availability"] = "HIGH" if centres else "NONE"
        if centres:
            item["dataCenters"] = [
                {"id": dc, "name": catalog.data_centers[dc], "availability": "HIGH"}
                for dc in centres
            ]
    return item
