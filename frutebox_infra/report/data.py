"""The plan and catalog as plain data with stable camelCase keys (JSON, outputs, diffs)."""

from __future__ import annotations

from typing import Any

from frutebox_infra.colocate import PodGroup
from frutebox_infra.deploy_requests import pod_name, pod_name_of
from frutebox_infra.plan import FleetPlan, ModelPlan
from frutebox_infra.ranking import PlacementOption
from frutebox_infra.resolver import PlanProblem, Resolution

SCHEMA_VERSION = 1


def placement_data(p: PlacementOption) -> dict[str, Any]:
    return {
        "gpuId": p.gpu.id,
        "gpuType": p.gpu.name,
        "count": p.count,
        "vramGb": p.total_vram_gb,
        "usdPerHour": p.usd_per_hour,
    }


def fit_data(p: PlacementOption) -> dict[str, Any]:
    f = p.fit
    seqs = f.full_context_sequences
    return {
        "fits": f.fits,
        "exact": f.exact,
        "weightsGbPerGpu": round(f.weights_gb_per_gpu, 2),
        "memoryBudgetGbPerGpu": round(f.memory_budget_gb_per_gpu, 2),
        "kvBytesPerToken": f.kv_bytes_per_token,
        "kvTokens": f.kv_tokens,
        "fullContextSequences": None if seqs is None else round(seqs, 2),
        "configuredSequences": f.configured_sequences,
        "layersOnWorstGpu": f.layers_on_worst_gpu,
    }


def launch_data(p: PlacementOption) -> dict[str, Any]:
    """What the pod will run, exactly as the deploy step sends it; env by name only, since
    values may be long scripts and secrets are filled in at deploy time."""
    pod = p.pod
    return {
        "image": pod.image,
        "args": pod.args,
        "envNames": sorted({*pod.env, *pod.secret_env}),
        "secretEnvNames": sorted(pod.secret_env),
        "ports": pod.ports,
        "healthPath": pod.health_path,
        "expectedFiles": list(pod.expected_files),
    }


def problem_data(p: PlanProblem, model: str | None = None) -> dict[str, Any]:
    return {"model": model, "rule": p.rule, "message": p.message, "fix": p.fix, "text": str(p)}


def model_plan_data(m: ModelPlan, pod: str | None = None) -> dict[str, Any]:
    """`pod`: the name of the pod serving it (members of a shared pod have the same)."""
    r = m.resolution
    serving = r.serving
    return {
        "id": m.model_id,
        "podName": pod,
        "engine": r.engine,
        "image": r.image.reference if r.image else None,
        "imagePinned": r.image.pinned if r.image else None,
        "contextTokens": serving.context_tokens if serving and serving.token_context else None,
        "placement": placement_data(m.placement) if m.placement else None,
        "fallbacks": [placement_data(p) for p in m.fallbacks],
        "fit": fit_data(m.placement) if m.placement else None,
        "launch": launch_data(m.placement) if m.placement else None,
        "usdPerHourBest": round(m.usd_per_hour_best, 2),
        "usdPerHourWorst": round(m.usd_per_hour_worst, 2),
        "problems": [problem_data(p, m.model_id) for p in m.problems],
        "warnings": list(m.warnings),
    }


def plan_data(plan: FleetPlan) -> dict[str, Any]:
    s = plan.settings
    return {
        "version": SCHEMA_VERSION,
        "stack": plan.stack,
        "dataCenter": s.data_center,
        "cloud": str(s.cloud),
        "models": [model_plan_data(m, pod_name_of(plan, m.model_id)) for m in plan.models],
        "pods": [pod_data(p, plan.stack) for p in plan.pods],
        "volume": {
            "sizeGb": plan.volume.size_gb,
            "weightsGb": plan.volume.weights_gb,
            "engineInstallsGb": plan.volume.engines_gb,
            "usdPerMonth": plan.volume.usd_per_month,
            "dataCenter": plan.volume.data_center,
            "type": plan.volume.tier,
        },
        "cost": {
            "usdPerHourBest": plan.usd_per_hour_best,
            "usdPerHourWorst": plan.usd_per_hour_worst,
            "usdPerMonthBest": plan.usd_per_month_best,
            "usdPerMonthWorst": plan.usd_per_month_worst,
            "colocationSavingUsdPerHour": plan.colocation_saving_usd_per_hour,
        },
        "budget": {
            "maxUsdPerHour": s.budget_usd_per_hour,
            "withinBudget": plan.within_budget,
            "headroomUsdPerHour": plan.budget_headroom_usd_per_hour,
        },
        "problems": [problem_data(p) for p in plan.problems],
        "warnings": list(plan.warnings),
    }


def pod_data(pod: PodGroup, stack: str) -> dict[str, Any]:
    """One pod: its members (the anchor first), its fit as their sum, and what sharing saves."""
    chosen = pod.placement
    return {
        "name": pod_name(stack, pod.anchor),
        "engine": pod.engine,
        "models": list(pod.model_ids),
        "shared": pod.shared,
        "gpuId": chosen.gpu.id,
        "count": chosen.count,
        "neededGbPerGpu": chosen.needed_gb,
        "availableGbPerGpu": chosen.available_gb,
        "memberNeededGbPerGpu": {
            mid: round(f.needed_gb, 2)
            for mid, f in zip(pod.model_ids, chosen.member_fits, strict=True)
        },
        "sharing": str(pod.sharing) if pod.shared and pod.sharing else None,
        "usdPerHourBest": pod.usd_per_hour_best,
        "usdPerHourWorst": pod.usd_per_hour_worst,
        "usdPerHourApart": pod.alone_usd_per_hour,
        "savingUsdPerHour": pod.saving_usd_per_hour,
    }


def catalog_entry(r: Resolution) -> dict[str, Any]:
    m = r.model
    return {
        "id": r.model_id,
        "name": m.name if m else None,
        "capability": m.capability if m else None,
        "engine": r.engine,
        "servable": r.servable,
        "problem": str(r.problem) if r.problem else None,
        "problemRule": r.problem.rule if r.problem else None,
        "cheapest": placement_data(r.placements[0]) if r.placements else None,
        "placements": [placement_data(p) for p in r.placements],
        "warnings": list(r.warnings),
    }
