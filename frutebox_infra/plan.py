"""The planner: a stack's settings + the registry -> the fleet plan preview shows and deploys."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from frutebox_infra.deploy_contract import (
    OWNER_ENV,
    HealthSpec,
    PodRequest,
    TimeoutSpec,
    VolumeRequest,
)
from frutebox_infra.recipes.base import VOLUME_PATH, ServeOptions
from frutebox_infra.recipes.speculative import eagle3_env_name
from frutebox_infra.registry import Cloud, NetworkVolumeFacts, Registry
from frutebox_infra.resolver import PlacementOption, PlanProblem, Resolution, resolve
from frutebox_infra.settings import StackSettings

HOURS_PER_MONTH = 730
"""A month of pods running around the clock, as RunPod bills an always-on pod."""


@dataclass(frozen=True)
class Environment:
    """What the shell learned from the process environment, handed in so planning stays pure."""

    hf_token: bool = False
    spec_decode: bool = True
    eagle3_heads: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Environment:
        return cls(
            hf_token=bool(env.get("HF_TOKEN") or env.get("FRUTEBOX_HF_TOKEN")),
            spec_decode=env.get("FRUTEBOX_SPEC_DECODE", "true").strip().lower() != "false",
            eagle3_heads={
                k: v.strip()
                for k, v in env.items()
                if k.startswith("FRUTEBOX_EAGLE3_HEAD_") and v.strip()
            },
        )

    def serve_options(
        self,
        model_id: str,
        *,
        context_tokens: int | None = None,
        concurrency: int | None = None,
        min_sequences: int = 1,
        hf_token: bool = False,
        spec_decode: bool = True,
    ) -> ServeOptions:
        """A model's serving targets; secrets and switches from the stack or the environment."""
        return ServeOptions(
            context_tokens=context_tokens,
            concurrency=concurrency,
            min_sequences=min_sequences,
            hf_token_configured=hf_token or self.hf_token,
            spec_decode_enabled=spec_decode and self.spec_decode,
            eagle3_head=self.eagle3_heads.get(eagle3_env_name(model_id)),
        )


@dataclass(frozen=True)
class ModelPlan:
    """One armed model: its resolution, the placement taken, and the allowed fallbacks."""

    model_id: str
    resolution: Resolution
    placement: PlacementOption | None
    fallbacks: tuple[PlacementOption, ...]
    problems: tuple[PlanProblem, ...]
    warnings: tuple[str, ...]

    @property
    def candidates(self) -> tuple[PlacementOption, ...]:
        """Cheapest first: what pod creation walks until one is in stock."""
        return ((self.placement,) if self.placement else ()) + self.fallbacks

    @property
    def usd_per_hour_best(self) -> float:
        return self.placement.usd_per_hour if self.placement else 0.0

    @property
    def usd_per_hour_worst(self) -> float:
        return max((p.usd_per_hour for p in self.candidates), default=0.0)


@dataclass(frozen=True)
class VolumePlan:
    """The stack's weights volume: armed weights plus headroom, never below its current size."""

    size_gb: int
    weights_gb: float
    data_center: str
    facts: NetworkVolumeFacts = field(repr=False, compare=False)
    current_gb: int | None = None
    """The size the volume has today, when known: it never shrinks below it."""

    tier: str = "STANDARD"

    @property
    def usd_per_month(self) -> float:
        return self.facts.usd_per_month(self.size_gb, self.tier)

    def at_least(self, current_gb: int) -> VolumePlan:
        """The volume as it will be when it already has `current_gb`: it never shrinks."""
        return replace(self, size_gb=max(self.size_gb, current_gb), current_gb=current_gb)

    @property
    def kept_larger(self) -> bool:
        """True when the plan asks for less than exists: the volume keeps (and bills) its size."""
        return self.current_gb is not None and self.current_gb >= self.size_gb


@dataclass(frozen=True)
class FleetPlan:
    stack: str
    settings: StackSettings
    models: tuple[ModelPlan, ...]
    volume: VolumePlan
    problems: tuple[PlanProblem, ...]
    warnings: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def usd_per_hour_best(self) -> float:
        return round(sum(m.usd_per_hour_best for m in self.models), 2)

    @property
    def usd_per_hour_worst(self) -> float:
        return round(sum(m.usd_per_hour_worst for m in self.models), 2)

    @property
    def usd_per_month_best(self) -> float:
        return round(self.usd_per_hour_best * HOURS_PER_MONTH + self.volume.usd_per_month, 2)

    @property
    def usd_per_month_worst(self) -> float:
        return round(self.usd_per_hour_worst * HOURS_PER_MONTH + self.volume.usd_per_month, 2)

    @property
    def within_budget(self) -> bool:
        return self.usd_per_hour_worst <= self.settings.budget_usd_per_hour + 1e-9

    @property
    def budget_headroom_usd_per_hour(self) -> float:
        return round(self.settings.budget_usd_per_hour - self.usd_per_hour_worst, 2)

    def with_volume_at_least(self, current_gb: int) -> FleetPlan:
        """This plan priced with the volume that really exists when it is `current_gb` today."""
        return replace(self, volume=self.volume.at_least(current_gb))

    def model(self, model_id: str) -> ModelPlan | None:
        return next((m for m in self.models if m.model_id == model_id), None)


def plan_fleet(
    registry: Registry,
    settings: StackSettings,
    *,
    stack: str,
    environment: Environment = Environment(),
    current_volume_gb: int | None = None,
) -> FleetPlan:
    """Plan every armed model; never raises for a bad plan, it lists problems instead.

    `current_volume_gb` is the weights volume's size today, where the caller knows it: the
    volume never shrinks, so it is sized and priced at no less than that.
    """
    problems: list[PlanProblem] = []
    warnings: list[str] = []
    if registry.data_center(settings.data_center) is None:
        known = ", ".join(d.id for d in registry.data_centers)
        problems.append(
            PlanProblem(
                "unknown-data-centre",
                f"data centre '{settings.data_center}' is not a RunPod data centre we know",
                f"set frutebox-infra:dataCenter to one of {known}",
            )
        )
    if settings.cloud is Cloud.COMMUNITY:
        problems.append(
            PlanProblem(
                "community-with-volume",
                "cloud COMMUNITY cannot mount the stack's network volume (Secure Cloud only)",
                "set frutebox-infra:cloud to SECURE",
            )
        )
    for model_id in sorted(set(settings.overrides) - set(settings.models)):
        warnings.append(f"overrides.{model_id} is set but {model_id} is not armed; it is ignored")
    models = tuple(_plan_model(registry, settings, environment, m) for m in settings.models)
    for plan in models:
        problems.extend(plan.problems)
    volume = _volume(registry, settings, models, current_volume_gb)
    largest = registry.network_volume.max_gb
    if volume.weights_gb * (1 + settings.volume_headroom) > largest:
        problems.append(
            PlanProblem(
                "volume-too-small",
                f"the armed weights need {volume.weights_gb:g} GB plus"
                f" {settings.volume_headroom:.0%} headroom, more than the largest RunPod network"
                f" volume ({largest} GB)",
                "disarm a model, lower frutebox-infra:volumeHeadroom, or split the fleet"
                " across stacks",
            )
        )
    fleet = FleetPlan(stack, settings, models, volume, (), tuple(warnings))
    if not fleet.within_budget:
        problems.append(
            PlanProblem(
                "over-budget",
                f"stack {stack} may cost ${fleet.usd_per_hour_worst:.2f}/h in the worst allowed"
                f" placement (best ${fleet.usd_per_hour_best:.2f}/h), over its budget of"
                f" ${settings.budget_usd_per_hour:.2f}/h",
                "raise frutebox-infra:budgetUsdPerHour, lower maxFallbackPremium,"
                " or disarm a model",
            )
        )
    all_warnings = list(warnings) + [f"{m.model_id}: {w}" for m in models for w in m.warnings]
    return FleetPlan(stack, settings, models, volume, tuple(problems), tuple(all_warnings))


def _plan_model(
    registry: Registry, settings: StackSettings, environment: Environment, model_id: str
) -> ModelPlan:
    override = settings.overrides.get(model_id)
    gpu_id = None
    problems: list[PlanProblem] = []
    if override is not None and override.gpu is not None:
        gpu = registry.gpu(override.gpu)
        if gpu is None:
            known = ", ".join(g.id for g in registry.gpus)
            problems.append(
                PlanProblem(
                    "unknown-gpu",
                    f"{model_id}: overrides.{model_id}.gpu '{override.gpu}' is not a GPU type"
                    " we know",
                    f"use one of: {known}",
                )
            )
            return ModelPlan(model_id, Resolution(model_id), None, (), tuple(problems), ())
        gpu_id = gpu.id
    options = environment.serve_options(
        model_id,
        context_tokens=override.context if override else None,
        concurrency=override.concurrency if override else None,
        min_sequences=(override.min_concurrent_sequences if override else None)
        or settings.min_concurrent_sequences,
        hf_token=settings.hf_token_configured,
        spec_decode=settings.spec_decode,
    )
    resolution = resolve(registry, model_id, options, cloud=settings.cloud, gpu_id=gpu_id)
    if resolution.problem is not None:
        problems.append(resolution.problem)
    if not resolution.placements:
        return ModelPlan(model_id, resolution, None, (), tuple(problems), resolution.warnings)
    chosen, *rest = resolution.placements
    ceiling = chosen.usd_per_hour * settings.max_fallback_premium + 1e-9
    fallbacks = tuple(p for p in rest if p.usd_per_hour <= ceiling)
    return ModelPlan(model_id, resolution, chosen, fallbacks, tuple(problems), resolution.warnings)


def _volume(
    registry: Registry,
    settings: StackSettings,
    models: tuple[ModelPlan, ...],
    current_gb: int | None,
) -> VolumePlan:
    weights = 0.0
    for plan in models:
        serving = plan.resolution.serving
        if serving is not None and serving.weights_disk_gb is not None:
            weights += serving.weights_disk_gb
    # Rounded first so that 100 GB x 1.1 asks for 110 GB, not 111 by a float's last bit.
    wanted = math.ceil(round(weights * (1 + settings.volume_headroom), 6))
    facts = registry.network_volume
    size = min(facts.max_gb, max(facts.min_gb, settings.min_volume_gb, wanted))
    volume = VolumePlan(
        size, round(weights, 2), settings.data_center, facts, tier=settings.volume_type
    )
    return volume if current_gb is None else volume.at_least(current_gb)


HEALTH_BASE_S = 900
"""Seconds a server needs besides downloading: image start, loading onto the GPUs, warm-up."""


def health_deadline_s(plan: ModelPlan, settings: StackSettings) -> int:
    """How long a new pod may take to answer health: a first bring-up downloads the model's
    weights onto the volume before the server can answer, so the deadline grows with them
    at the assumed `downloadMBps`; the stack's `healthTimeoutSeconds` overrides it."""
    if settings.health_timeout_seconds is not None:
        return settings.health_timeout_seconds
    serving = plan.resolution.serving
    weights_gb = serving.weights_disk_gb if serving and serving.weights_disk_gb else 0.0
    return HEALTH_BASE_S + math.ceil(weights_gb * 1000 / settings.download_mb_per_s)


def volume_name(stack: str) -> str:
    """The stack's weights volume; the deploy step appends the stack's ownership token."""
    return f"frutebox-{stack}-weights"


def pod_name(stack: str, model_id: str) -> str:
    """Per stack and model; not unique on RunPod, so ownership is proven by the token."""
    return f"frutebox-{stack}-{model_id}"


def pod_body(
    plan: ModelPlan,
    placement: PlacementOption,
    settings: StackSettings,
    *,
    stack: str,
    volume_id: str,
    owner: str,
) -> dict[str, Any]:
    """The exact RunPod v2 `POST /v2/pods` body for one placement."""
    pod = placement.pod
    return {
        "name": pod_name(stack, plan.model_id),
        "image": pod.image,
        "args": pod.args,
        "env": {**pod.env, OWNER_ENV: owner},
        "ports": pod.ports,
        "disk": settings.container_disk_gb,
        # The image's CUDA floor: a host with an older driver is a capacity answer, so the
        # walk moves on instead of starting a pod that can never serve.
        "gpu": {
            "id": placement.gpu.id,
            "count": placement.count,
            "minCudaVersion": placement.image.min_cuda_version,
        },
        "cloud": str(settings.cloud),
        "dataCenterIds": [settings.data_center],
        "mounts": {"network": [{"volumeId": volume_id, "path": VOLUME_PATH}]},
    }


def pod_request(
    plan: ModelPlan, settings: StackSettings, *, stack: str, volume_id: str, owner: str
) -> PodRequest:
    """What the deploy step reads on stdin: candidates cheapest-first plus how to check health."""
    assert plan.placement is not None
    pod = plan.placement.pod
    return PodRequest(
        name=pod_name(stack, plan.model_id),
        owner=owner,
        volumeId=volume_id,
        candidates=[
            pod_body(plan, p, settings, stack=stack, volume_id=volume_id, owner=owner)
            for p in plan.candidates
        ],
        health=HealthSpec(
            port=pod.port, path=pod.health_path, expectedFiles=list(pod.expected_files)
        ),
        ollamaPull=pod.ollama_pull,
        hfTokenEnv=list(pod.secret_env),
        timeouts=TimeoutSpec(healthySeconds=health_deadline_s(plan, settings)),
        meta={"model": plan.model_id, "stack": stack},
    )


def volume_request(plan: FleetPlan) -> VolumeRequest:
    """What the volume's deploy step reads on stdin."""
    return VolumeRequest(
        name=volume_name(plan.stack),
        size=plan.volume.size_gb,
        dataCenter=plan.settings.data_center,
        type=plan.volume.tier,
    )
