"""Preview's live warnings: the plan checked against RunPod's catalog as it is right now.

Pure: the shell (`live.py`) fetches the catalog and hands it in as `LiveCatalog`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from frutebox_infra.catalog.schema import Registry
from frutebox_infra.deploy.requests import pod_name, volume_name
from frutebox_infra.planner import FleetPlan, ModelPlan, PlacementOption

if TYPE_CHECKING:  # drift.py is imported only when live pods were read: keyless previews skip it
    from frutebox_infra.views.status_view import LivePod, LiveVolume

PRICE_TOLERANCE = 0.05
"""A registry price more than 5% away from the live Secure price is worth a warning."""

VOLUME_TYPE = "STANDARD"
"""The network volume tier the stack's volume is created with."""

OUT_OF_STOCK = frozenset({"NONE"})

_DATE = re.compile(r"\b(20\d\d-\d\d(?:-\d\d)?)\b")


@dataclass(frozen=True, kw_only=True)
class LiveGpu:
    """One GPU type as the live catalog shows it; price in USD per GPU per hour."""

    id: str
    secure_usd_per_hour: float
    stock: Mapping[str, str] = field(default_factory=dict)
    """Data centre id -> availability level; a data centre not listed has none."""

    def in_stock(self, data_center: str) -> bool:
        return self.stock.get(data_center, "NONE") not in OUT_OF_STOCK


@dataclass(frozen=True, kw_only=True)
class LiveCatalog:
    """What RunPod says now: GPU stock and prices, volume tiers, pods and volumes."""

    gpus: Mapping[str, LiveGpu]
    volume_types: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Data centre id -> network volume tiers it hosts (empty when not read)."""
    pods: tuple[LivePod, ...] = ()
    volumes: tuple[LiveVolume, ...] = ()
    global_network: Mapping[str, bool] = field(default_factory=dict)
    """Data centre id -> whether it offers global networking now (`globalNetwork`)."""


def registry_price_date(registry: Registry) -> str:
    """The dates the GPU price sources name, oldest to newest (`2026-08 to 2026-10-07`)."""
    dates = [m for g in registry.gpus for m in _DATE.findall(g.price_usd_per_hour.source)]
    if not dates:
        return "undated"
    return min(dates) if min(dates) == max(dates) else f"{min(dates)} to {max(dates)}"


def price_drift(registry_usd: float, live_usd: float) -> float:
    """Relative difference of the live price from the registry's."""
    return (live_usd - registry_usd) / registry_usd


def _price_warnings(plan: FleetPlan, live: LiveCatalog) -> list[str]:
    used = {p.gpu.id: p.gpu for m in plan.models for p in m.candidates}
    out = []
    for gpu_id, gpu in sorted(used.items()):
        registry_usd, offer = gpu.price_usd_per_hour.secure, live.gpus.get(gpu_id)
        if registry_usd is None or offer is None or offer.secure_usd_per_hour <= 0:
            continue
        drift = price_drift(registry_usd, offer.secure_usd_per_hour)
        if abs(drift) > PRICE_TOLERANCE:
            out.append(
                f"price: {gpu.name} is ${offer.secure_usd_per_hour:.2f}/h per GPU on RunPod"
                f" Secure now, registry/gpus.yaml says ${registry_usd:.2f}/h ({drift:+.0%});"
                " run `frutebox prices --write` to update it"
            )
    return out


def _fallback(model: ModelPlan, live: LiveCatalog, dc: str) -> PlacementOption | None:
    return next(
        (p for p in model.fallbacks if (g := live.gpus.get(p.gpu.id)) and g.in_stock(dc)), None
    )


def _stock_warnings(plan: FleetPlan, live: LiveCatalog) -> list[str]:
    dc, budget = plan.settings.data_center, plan.settings.budget_usd_per_hour
    out = []
    for model in plan.models:
        chosen = model.placement
        offer = live.gpus.get(chosen.gpu.id) if chosen else None
        if chosen is None or offer is None or offer.in_stock(dc):
            continue
        head = f"stock: {model.model_id}: {chosen.label} is out of stock in {dc} right now"
        taken = _fallback(model, live, dc)
        if taken is None:
            out.append(f"{head}, and so is every allowed fallback: `pulumi up` would fail for it")
            continue
        fleet = plan.usd_per_hour_best - chosen.usd_per_hour + taken.usd_per_hour
        worst = plan.usd_per_hour_worst
        fits = "within" if worst <= budget else "OVER"
        out.append(
            f"{head}; creation would take {taken.label} at ${taken.usd_per_hour:.2f}/h"
            f" (fleet ${fleet:.2f}/h); the worst case ${worst:.2f}/h is {fits} the"
            f" ${budget:.2f}/h budget"
        )
    return out


def _volume_warnings(plan: FleetPlan, live: LiveCatalog) -> list[str]:
    dc = plan.settings.data_center
    types = live.volume_types.get(dc)
    if types is None or VOLUME_TYPE in types:
        return []
    hosted = ", ".join(types) or "no network volumes at all"
    return [f"volume: {dc} cannot host a {VOLUME_TYPE} network volume now (it offers {hosted})"]


def _network_warnings(plan: FleetPlan, live: LiveCatalog) -> list[str]:
    """A private stack: the live catalog's `globalNetwork` for its data centre against what
    registry/datacenters.yaml says (the plan refuses a centre the registry does not list)."""
    dc = plan.settings.data_center
    offered = live.global_network.get(dc)
    if not plan.private or offered is None:
        return []
    listed = not any(p.rule == "private-without-global-network" for p in plan.problems)
    if listed and not offered:
        return [
            f"global networking: RunPod's catalog says {dc} does not offer it now, though"
            " registry/datacenters.yaml `global_network` lists it: `pulumi up` would be refused"
            " for every private pod; remove it there (with the source), or set"
            " frutebox-infra:exposure to public"
        ]
    if offered and not listed:
        return [
            f"global networking: RunPod's catalog lists {dc} with it now, which"
            " registry/datacenters.yaml `global_network` does not: add it there (with the"
            " source) to deploy this stack private"
        ]
    return []


def _drift_warnings(plan: FleetPlan, live: LiveCatalog) -> list[str]:
    """Stopped or hand-changed pods of this stack, found by name and proven ours; pods that
    only share a name are named as foreign (they are never touched).

    Preview has no access to the recorded state, so a pod that is gone cannot be told from
    one never created: `frutebox status` (which reads the state) reports that.
    """
    if not live.pods:
        return []
    from frutebox_infra.views.drift import STOPPED_STATUSES, changes, is_ours

    stack, dc = plan.stack, plan.settings.data_center
    # Our volume is named `<name>-<token>`; names are not unique, so every such volume is a
    # candidate and a pod is ours only with the token its volume's name carries.
    prefix = volume_name(stack) + "-"
    volumes = {
        v.id: v.name[len(prefix) :]
        for v in live.volumes
        if v.data_center == dc and v.name.startswith(prefix)
    }
    out = []
    for model in plan.models:
        name = pod_name(stack, model.model_id)
        foreign = []
        for pod in live.pods:
            if pod.name != name:
                continue
            if not any(is_ours(pod, t, v) for v, t in volumes.items()):
                if pod.status != "TERMINATED":
                    foreign.append(pod.id)
                continue
            if pod.status in STOPPED_STATUSES:
                found = f"pod {pod.id} is {pod.status} (stopped)"
            elif details := changes(model, pod, dc, private=plan.private):
                found = f"pod {pod.id} changed: {'; '.join(details)}"
            else:
                continue
            out.append(
                f"drift: {model.model_id}: {found}; `frutebox status --stack {stack}`"
                " prints the command that heals it"
            )
        if foreign:
            # Names are not unique on RunPod: another stack's or person's pod may carry ours.
            out.append(
                f"foreign: {model.model_id}: {len(foreign)} pod(s) named {name} that are not this"
                f" stack's ({', '.join(foreign)}); up and destroy leave them alone"
            )
    return out


def live_warnings(plan: FleetPlan, live: LiveCatalog) -> list[str]:
    """Price drift, stock, the volume tier, global networking, then drift of the stack's pods,
    in that order."""
    return (
        _price_warnings(plan, live)
        + _stock_warnings(plan, live)
        + _volume_warnings(plan, live)
        + _network_warnings(plan, live)
        + _drift_warnings(plan, live)
    )


def registry_line(registry: Registry, reason: str) -> str:
    """The one line preview prints when nothing live was read."""
    return (
        f"live: {reason}; prices and stock are registry/gpus.yaml's"
        f" (prices dated {registry_price_date(registry)})"
    )
