"""The planner: a stack's settings + the registry -> the fleet plan preview shows and deploys."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from frutebox_infra.colocate import Member, PodGroup, build_pod, choose_groups, members_of
from frutebox_infra.deploy_contract import (
    OWNER_ENV,
    HealthSpec,
    PodRequest,
    TimeoutSpec,
    VolumeRequest,
)
from frutebox_infra.launch_check import FACTS_FILE, Launch, check_launch
from frutebox_infra.recipes.base import VOLUME_PATH, PodSpec, ServeOptions
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
        min_sequences_pinned: bool = False,
        hf_token: bool = False,
        spec_decode: bool = True,
    ) -> ServeOptions:
        """A model's serving targets; secrets and switches from the stack or the environment."""
        return ServeOptions(
            context_tokens=context_tokens,
            concurrency=concurrency,
            min_sequences=min_sequences,
            min_sequences_pinned=min_sequences_pinned,
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
    shared_with: tuple[str, ...] = ()
    """The other models on its pod (co-location); its placements are then its view of that
    pod: the pod's GPU, its own fit there, and its share of the price."""

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
    engines_gb: float = 0.0
    """Engines installed onto the volume (e.g. a ComfyUI release), sized like weights."""

    @property
    def contents_gb(self) -> float:
        return round(self.weights_gb + self.engines_gb, 2)

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
    pods: tuple[PodGroup, ...] = ()
    """Every pod, in the order of its first member in `models`; a model in none has no pod."""

    @property
    def ok(self) -> bool:
        return not self.problems

    def pod_of(self, model_id: str) -> PodGroup | None:
        return next((p for p in self.pods if model_id in p.model_ids), None)

    def members(self, pod: PodGroup) -> tuple[ModelPlan, tuple[ModelPlan, ...]]:
        """A pod's anchor's plan and the other members' plans, as `pod_request` takes them."""
        plans = [self.model(mid) for mid in pod.model_ids]
        assert all(p is not None for p in plans)
        anchor, *rest = (p for p in plans if p is not None)
        return anchor, tuple(rest)

    def pod_name_of(self, model_id: str) -> str | None:
        """The RunPod name of the pod serving `model_id` (shared by a pod's members)."""
        pod = self.pod_of(model_id)
        return pod_name(self.stack, pod.anchor) if pod else None

    @property
    def colocation_saving_usd_per_hour(self) -> float:
        """Best case, against one pod per model."""
        return round(sum(p.saving_usd_per_hour for p in self.pods), 2)

    @property
    def usd_per_hour_best(self) -> float:
        return round(sum(p.usd_per_hour_best for p in self.pods), 2)

    @property
    def usd_per_hour_worst(self) -> float:
        # Per pod: members' shares of each placement are rounded to cents separately, so the
        # sum of their own worst cases can exceed what the pod can cost by a cent.
        return round(sum(p.usd_per_hour_worst for p in self.pods), 2)

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
    models, pods = _pods(registry, settings, models)
    for plan in models:
        problems.extend(plan.problems)
    launch_refused, launch_warnings = launch_problems(registry, models, pods)
    problems.extend(launch_refused)
    warnings.extend(launch_warnings)
    volume = _volume(registry, settings, models, current_volume_gb)
    largest = registry.network_volume.max_gb
    if volume.contents_gb * (1 + settings.volume_headroom) > largest:
        problems.append(
            PlanProblem(
                "volume-too-small",
                f"the armed weights need {volume.contents_gb:g} GB plus"
                f" {settings.volume_headroom:.0%} headroom, more than the largest RunPod network"
                f" volume ({largest} GB)",
                "disarm a model, lower frutebox-infra:volumeHeadroom, or split the fleet"
                " across stacks",
            )
        )
    fleet = FleetPlan(stack, settings, models, volume, (), tuple(warnings), pods)
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
    return FleetPlan(
        stack, settings, models, volume, tuple(problems), tuple(all_warnings), pods
    )


def launch_problems(
    registry: Registry, models: Sequence[ModelPlan], pods: Sequence[PodGroup]
) -> tuple[list[PlanProblem], list[str]]:
    """Every launch the deploy step may create, checked against its engine's pinned options:
    each pod's chosen placement and fallbacks, rendered as `pod_request` renders them (a
    shared pod with all its members, speculative flags and overrides included)."""
    if not registry.engine_options:
        return [], []  # a registry from before the facts (an old git ref): nothing to check
    by_id = {m.model_id: m for m in models}
    problems: dict[tuple[str, str], PlanProblem] = {}
    warnings: list[str] = []
    for pod in pods:
        anchor, *members = (by_id[i] for i in pod.model_ids)
        engine = anchor.resolution.recipe.runtime if anchor.resolution.recipe else None
        image = anchor.resolution.image
        facts = registry.engine_options.get(engine) if engine else None
        if engine is None or image is None:
            continue
        if facts is None:
            warnings.append(
                f"{anchor.model_id}: no {FACTS_FILE.format(engine=engine)}: its launch is not"
                " checked (run tools/engine-options for the pinned image)"
            )
            continue
        if facts.image != image.reference:
            warnings.append(
                f"{anchor.model_id}: {FACTS_FILE.format(engine=engine)} was read for"
                f" {facts.image}, but the pinned image is {image.reference}: refresh it with"
                " tools/engine-options"
            )
        who = ", ".join(pod.model_ids) if members else anchor.model_id
        for placement, spec in zip(anchor.candidates, shared_specs(anchor, members), strict=True):
            launch = Launch(spec.args, spec.env, spec.health_path, spec.secret_env)
            for refusal in check_launch(launch, facts, entrypoint=image.entrypoint):
                problems.setdefault(
                    (who, refusal.what),
                    PlanProblem(
                        "launch-rejected",
                        f"{who}: {facts.image} would refuse the launch ({placement.label}):"
                        f" {refusal.what}; it accepts {refusal.accepts}"
                        f" ({FACTS_FILE.format(engine=engine)})",
                        refusal.fix,
                    ),
                )
    return list(problems.values()), warnings


def _pods(
    registry: Registry, settings: StackSettings, models: tuple[ModelPlan, ...]
) -> tuple[tuple[ModelPlan, ...], tuple[PodGroup, ...]]:
    """Group the planned models into pods (one each unless `colocate` finds sharing cheaper);
    a shared member's placements become its view of the pod: its share of the price."""
    planned = [m for m in models if m.placement is not None and not m.problems]
    members = members_of(
        (
            (m.model_id, m.candidates, settings.colocate and not _own_pod(settings, m.model_id))
            for m in planned
        ),
        settings,
    )
    by_id = {m.model_id: m for m in members}
    if settings.colocate:
        groups = choose_groups(registry, settings, members)
    else:
        groups = tuple((m.model_id,) for m in members)
    pods, views = _build(registry, settings, groups, by_id)
    worst = sum(p.usd_per_hour_worst for p in pods)
    if settings.colocate and worst > settings.budget_usd_per_hour + 1e-9:
        # The cheapest grouping breaks the budget in the worst case: take the grouping with
        # the least worst case, which is within budget whenever any grouping is.
        groups = choose_groups(registry, settings, members, worst_first=True)
        pods, views = _build(registry, settings, groups, by_id)
    order = {m.model_id: i for i, m in enumerate(models)}
    pods.sort(key=lambda p: min(order[i] for i in p.model_ids))
    pod_of = {mid: p for p in pods for mid in p.model_ids}
    replanned = tuple(
        replace(
            m,
            placement=views[m.model_id][0],
            fallbacks=views[m.model_id][1:],
            shared_with=tuple(i for i in pod_of[m.model_id].model_ids if i != m.model_id),
        )
        if m.model_id in views
        else m
        for m in models
    )
    return replanned, tuple(pods)


def _build(
    registry: Registry,
    settings: StackSettings,
    groups: Sequence[tuple[str, ...]],
    by_id: Mapping[str, Member],
) -> tuple[list[PodGroup], dict[str, tuple[PlacementOption, ...]]]:
    views: dict[str, tuple[PlacementOption, ...]] = {}
    pods = []
    for ids in groups:
        pod, seen = build_pod(registry, settings, [by_id[i] for i in ids])
        pods.append(pod)
        views.update(seen)
    return pods, views


def _own_pod(settings: StackSettings, model_id: str) -> bool:
    override = settings.overrides.get(model_id)
    return override is not None and (override.own_pod or override.gpu is not None)


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
        min_sequences_pinned=override is not None and override.min_concurrent_sequences is not None,
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
    installs: dict[str, float] = {}
    for plan in models:
        serving = plan.resolution.serving
        if serving is not None and serving.weights_disk_gb is not None:
            weights += serving.weights_disk_gb
        image = plan.resolution.image
        if serving is not None and image is not None:
            installs[image.reference] = image.volume_install_gb
    # An engine installed onto the volume (once, shared by its pods) takes room like weights.
    # Rounded first so that 100 GB x 1.1 asks for 110 GB, not 111 by a float's last bit.
    engines = round(sum(installs.values()), 2)
    wanted = math.ceil(round((weights + engines) * (1 + settings.volume_headroom), 6))
    facts = registry.network_volume
    size = min(facts.max_gb, max(facts.min_gb, settings.min_volume_gb, wanted))
    volume = VolumePlan(
        size,
        round(weights, 2),
        settings.data_center,
        facts,
        tier=settings.volume_type,
        engines_gb=engines,
    )
    return volume if current_gb is None else volume.at_least(current_gb)


HEALTH_BASE_S = 900
"""Seconds a server needs besides downloading: image start, loading onto the GPUs, warm-up."""


def health_deadline_s(
    plan: ModelPlan, settings: StackSettings, members: Sequence[ModelPlan] = ()
) -> int:
    """How long a new pod may take to answer health: a first bring-up downloads the model's
    weights (every member's, on a shared pod) onto the volume before the server can answer,
    so the deadline grows with them at the assumed `downloadMBps`; the stack's
    `healthTimeoutSeconds` overrides it."""
    if settings.health_timeout_seconds is not None:
        return settings.health_timeout_seconds
    weights_gb = 0.0
    for m in (plan, *members):
        serving = m.resolution.serving
        weights_gb += serving.weights_disk_gb if serving and serving.weights_disk_gb else 0.0
    return HEALTH_BASE_S + math.ceil(weights_gb * 1000 / settings.download_mb_per_s)


def volume_name(stack: str) -> str:
    """The stack's weights volume; the deploy step appends the stack's ownership token."""
    return f"frutebox-{stack}-weights"


def pod_name(stack: str, model_id: str) -> str:
    """Per stack and pod; not unique on RunPod, so ownership is proven by the token. A shared
    pod is named after its anchor (largest member), so the name survives smaller members
    coming and going."""
    return f"frutebox-{stack}-{model_id}"


def pod_body(
    plan: ModelPlan,
    placement: PlacementOption,
    settings: StackSettings,
    *,
    stack: str,
    volume_id: str,
    owner: str,
    spec: PodSpec | None = None,
) -> dict[str, Any]:
    """The exact RunPod v2 `POST /v2/pods` body for one placement; `spec` is the shared pod
    when `plan` anchors one (else the model's own pod)."""
    pod = spec or placement.pod
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


def shared_specs(plan: ModelPlan, members: Sequence[ModelPlan]) -> list[PodSpec]:
    """Per candidate placement, the pod that serves `plan` and the other `members` of its
    pod (they hold their views of the same placements, in the same order)."""
    if not members:
        return [p.pod for p in plan.candidates]
    return [
        p.recipe.shared_pod([p.pod, *(m.candidates[i].pod for m in members)])
        for i, p in enumerate(plan.candidates)
    ]


def pod_request(
    plan: ModelPlan,
    settings: StackSettings,
    *,
    stack: str,
    volume_id: str,
    owner: str,
    members: Sequence[ModelPlan] = (),
) -> PodRequest:
    """What the deploy step reads on stdin: candidates cheapest-first plus how to check health.

    `plan` is the pod's anchor; `members` the other models sharing its pod, if any.
    """
    assert plan.placement is not None
    specs = shared_specs(plan, members)
    pod = specs[0]
    return PodRequest(
        name=pod_name(stack, plan.model_id),
        owner=owner,
        volumeId=volume_id,
        candidates=[
            pod_body(plan, p, settings, stack=stack, volume_id=volume_id, owner=owner, spec=spec)
            for p, spec in zip(plan.candidates, specs, strict=True)
        ],
        health=HealthSpec(
            port=pod.port, path=pod.health_path, expectedFiles=list(pod.expected_files)
        ),
        ollamaPull=list(pod.ollama_pulls),
        hfTokenEnv=list(pod.secret_env),
        timeouts=TimeoutSpec(healthySeconds=health_deadline_s(plan, settings, members)),
        meta={"models": [plan.model_id, *(m.model_id for m in members)], "stack": stack}
        if members
        else {"model": plan.model_id, "stack": stack},
    )


def volume_request(plan: FleetPlan) -> VolumeRequest:
    """What the volume's deploy step reads on stdin."""
    return VolumeRequest(
        name=volume_name(plan.stack),
        size=plan.volume.size_gb,
        dataCenter=plan.settings.data_center,
        type=plan.volume.tier,
    )
