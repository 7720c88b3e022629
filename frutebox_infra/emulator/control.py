"""Out-of-band changes, as a person in the RunPod console or RunPod itself would make them.

`POST /_emulator/pods/{id}/terminate|stop`, `PATCH /_emulator/pods/{id}` (a hand edit),
`POST /_emulator/prices {gpuId, secure}`, `POST /_emulator/stock {gpuId, available,
dataCenterId?}` and `POST /_emulator/volume-types {dataCenterId, types}`. None of them is
part of the RunPod API: tests use them to make the live account drift from the state.
"""

from __future__ import annotations

import re
from typing import Any

from frutebox_infra.emulator.errors import ApiProblem

Account = Any
"""state.Account; not imported, because state.py imports this module (no import cycle)."""

POD = re.compile(r"^/_emulator/pods/(?P<id>[^/]+)(?:/(?P<verb>terminate|stop))?$")
EDITABLE = frozenset({"image", "args", "env", "ports", "disk", "name"})


def _require(body: Any, key: str) -> Any:
    if not isinstance(body, dict) or key not in body:
        raise ApiProblem(400, f"control body needs {key!r}")
    return body[key]


def _gpu(account: Account, body: Any) -> str:
    gpu_id = str(_require(body, "gpuId"))
    if gpu_id not in account.catalog.gpus:
        raise ApiProblem(400, f"unknown GPU type {gpu_id!r}")
    return gpu_id


def _data_centers(account: Account, body: Any) -> list[str]:
    dc = body.get("dataCenterId") if isinstance(body, dict) else None
    if dc is None:
        return list(account.catalog.data_centers)
    if dc not in account.catalog.data_centers:
        raise ApiProblem(400, f"unknown data center {dc!r}")
    return [str(dc)]


def out_of_band(account: Account, method: str, path: str, body: Any) -> tuple[int, Any] | None:
    """Apply one out-of-band change; None when `path` is not one of these controls."""
    if match := POD.match(path):
        pod_id, verb = match["id"], match["verb"]
        if method == "POST" and verb == "terminate":
            account.terminate_pod(pod_id)
            return 200, {}
        if method == "POST" and verb == "stop":
            pod = account.pod_action(pod_id, "stop")
            return 200, pod.view() if pod else {}
        if method == "PATCH" and verb is None:
            patch = body if isinstance(body, dict) else {}
            unknown = sorted(set(patch) - EDITABLE)
            if unknown:
                raise ApiProblem(400, f"cannot edit {', '.join(unknown)} out of band")
            return 200, account.update_pod(pod_id, patch).view()
        return None
    if (method, path) == ("POST", "/_emulator/prices"):
        gpu_id, secure = _gpu(account, body), _require(body, "secure")
        if not isinstance(secure, int | float) or secure < 0:
            raise ApiProblem(400, "secure must be a price in USD per GPU per hour >= 0")
        account.catalog = account.catalog.with_price(gpu_id, float(secure))
        return 200, {"gpuId": gpu_id, "secure": float(secure)}
    if (method, path) == ("POST", "/_emulator/stock"):
        gpu_id, available = _gpu(account, body), _require(body, "available")
        if not isinstance(available, int) or available < 0:
            raise ApiProblem(400, "available must be a count of GPUs >= 0")
        for dc in _data_centers(account, body):
            account.stock[(gpu_id, dc)] = available
        return 200, {"gpuId": gpu_id, "available": available}
    if (method, path) == ("POST", "/_emulator/volume-types"):
        [dc] = _data_centers(account, {"dataCenterId": _require(body, "dataCenterId")})
        types = _require(body, "types")
        if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
            raise ApiProblem(400, "types must be a list of volume types")
        account.volume_types[dc] = list(types)
        return 200, {"dataCenterId": dc, "types": types}
    return None


def saved_changes(account: Account) -> dict[str, Any]:
    """The out-of-band changes a state file keeps: repriced GPUs and volume tiers."""
    initial = account.initial_catalog
    prices = {
        gpu_id: account.catalog.usd_per_hour(gpu_id, "SECURE")
        for gpu_id in account.catalog.gpus
        if account.catalog.usd_per_hour(gpu_id, "SECURE") != initial.usd_per_hour(gpu_id, "SECURE")
    }
    return {"prices": prices, "volumeTypes": dict(account.volume_types)}


def restore_changes(account: Account, saved: Any) -> None:
    if not isinstance(saved, dict):
        return
    for gpu_id, secure in (saved.get("prices") or {}).items():
        if gpu_id in account.catalog.gpus:
            account.catalog = account.catalog.with_price(gpu_id, float(secure))
    account.volume_types = {k: list(v) for k, v in (saved.get("volumeTypes") or {}).items()}
