"""The account as JSON: what `GET /_emulator/state` shows and a state file keeps, read back."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from frutebox_infra.emulator.catalog import Catalog, Stock
from frutebox_infra.emulator.clock import Clock
from frutebox_infra.emulator.realism import Realism
from frutebox_infra.emulator.records import PodRecord, VolumeRecord
from frutebox_infra.emulator.state import Account
from frutebox_infra.emulator.storage import Storage


def _cells(stock: Stock) -> list[dict[str, Any]]:
    return [{"gpuId": g, "dataCenterId": dc, "available": n} for (g, dc), n in stock.items()]


def _table(rows: list[dict[str, Any]]) -> Stock:
    return {(r["gpuId"], r["dataCenterId"]): int(r["available"]) for r in rows}


def snapshot(account: Account) -> dict[str, Any]:
    """Pods as the API shows them (terminated ones too), with what the account keeps besides
    under "emulator"; volumes, stock, out-of-band changes and every request answered."""
    now = account.clock.now()
    return {
        "pods": [{**p.view(now), "emulator": asdict(p)} for p in account.pods.values()],
        "volumes": [
            {
                **v.view(),
                "deleted": v.deleted,
                "foreign": v.foreign,
                "createdWall": v.created_wall,
                "listedWall": v.listed_wall,
                "files": v.files,
                "refs": v.refs,
                "counterDirs": v.counter_dirs,
            }
            for v in account.volumes.values()
        ],
        "stock": _cells(account.stock),
        "initialStock": _cells(account.initial_stock),
        "outOfBand": account.saved_changes(),
        "requests": account.requests,
    }


def restore(
    catalog: Catalog,
    data: Mapping[str, Any],
    stock: Stock | None,
    realism: Realism | None = None,
    clock: Clock | None = None,
    storage: Storage | None = None,
) -> Account:
    """The account `snapshot` saved; an explicit `stock` replaces the saved one. Its times
    are the clock's epoch seconds, so lags and loads carry on across a restart."""
    initial = stock if stock is not None else _table(data["initialStock"])
    account = Account(catalog, initial, realism, clock, storage)
    account.pods, account.volumes = {}, {}
    account.stock = dict(stock) if stock is not None else _table(data["stock"])
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
            created_wall=float(v.get("createdWall", 0.0)),
            listed_wall=None if v.get("listedWall") is None else float(v["listedWall"]),
            foreign=bool(v.get("foreign", False)),
            files={k: list(f) for k, f in (v.get("files") or {}).items()},
            refs=dict(v.get("refs") or {}),
            counter_dirs={k: dict(c) for k, c in (v.get("counterDirs") or {}).items()},
        )
    account.requests = list(data.get("requests", []))
    account.restore_changes(data.get("outOfBand"))
    return account
