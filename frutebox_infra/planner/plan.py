"""The planner: a stack's settings + the registry -> the fleet plan preview shows and deploys."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from frutebox_infra.catalog.schema import Cloud, NetworkVolumeFacts, Registry
from frutebox_infra.planner.armed import HOURS_PER_MONTH as HOURS_PER_MONTH
from frutebox_infra.planner.armed import ModelWindow, plan_windows
from frutebox_infra.planner.colocate import PodGroup, group_pods
from frutebox_infra.planner.floor import BelowFloor, choose, floor_key, floor_of, floor_problem
from frutebox_infra.planner.launches import PodLaunches, launch_problems
from frutebox_infra.planner.ranking import PlacementOption
from frutebox_infra.planner.resolver import Exposure, PlanProblem, Resolution, resolve
from frutebox_infra.planner.seeding_decisions import Seeding, plan_seeding, reading_seeded
from frutebox_infra.recipes.base import ServeOptions
from frutebox_infra.stack.environment import NO_ENVIRONMENT, Environment
from frutebox_infra.stack.settings import ModelOverride, StackSettings


@dataclass(frozen=True, kw_only=True)
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
    min_decode_tok_s: float = 0.0
    """The stream-rate floor its placements were held to (0: none)."""
    below_floor: tuple[BelowFloor, ...] = ()
    """Placements refused for decoding below the floor, cheapest first."""

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


@dataclass(frozen=True, kw_only=True)
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


@dataclass(frozen=True, kw_only=True)
class FleetPlan:
    """A stack's whole plan: every armed model, its pod, the volume, seeding and cost."""

    stack: str
    settings: StackSettings
    models: tuple[ModelPlan, ...]
    volume: VolumePlan
    problems: tuple[PlanProblem, ...]
    warnings: tuple[str, ...]
    pods: tuple[PodGroup, ...] = ()
    """Every pod, in the order of its first member in `models`; a model in none has no pod."""
    seeding: Seeding | None = None
    """Which models a CPU pod seeds first, and the bring-up; None in a plan made without."""
    windows: tuple[ModelWindow, ...] = ()
    """The armed windows of the models that have one (none: every model always armed)."""

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def private(self) -> bool:
        """No port published: global networking only (the stack's `exposure: private`)."""
        return self.settings.exposure == "private"

    def exposure_of(self, model: ModelPlan) -> Exposure | None:
        """Who can reach `model` on this stack: its engine's gateway or none, and, on a private
        stack, only the account's own pods at its pod's internal address."""
        exposure = model.resolution.exposure
        if exposure is None or not self.private or model.placement is None:
            return exposure
        return replace(exposure, private_port=model.placement.pod.port)

    def window_of(self, model_id: str) -> ModelWindow | None:
        return self._window_by_model.get(model_id)

    @cached_property
    def _window_by_model(self) -> dict[str, ModelWindow]:
        return {w.model_id: w for w in self.windows}

    @cached_property
    def dormant(self) -> frozenset[str]:
        """Models outside their window at the run's time: no pod, their weights kept."""
        return frozenset(w.model_id for w in self.windows if w.armed_now is False)

    def pod_dormant(self, pod: PodGroup) -> bool:
        return all(m in self.dormant for m in pod.model_ids)

    def pods_usd_per_month(self, *, worst: bool) -> float:
        """The pods' month: around the clock, or, for a pod whose every model has a window,
        the widest window's hours plus a bring-up each time it opens."""
        if not self.windows:
            rate = self.usd_per_hour_worst if worst else self.usd_per_hour_best
            return rate * HOURS_PER_MONTH
        total = 0.0
        for pod in self.pods:
            rate = pod.usd_per_hour_worst if worst else pod.usd_per_hour_best
            found = [self.window_of(m) for m in pod.model_ids]
            windows = [w for w in found if w is not None]
            if windows and len(windows) == len(found):
                w = max(windows, key=lambda w: w.hours_per_month)
                hours = w.hours_per_month + w.openings_per_month * w.rearm_s / 3600
                total += rate * hours
            else:
                total += rate * HOURS_PER_MONTH
        return total

    def pod_of(self, model_id: str) -> PodGroup | None:
        return self._pod_by_model.get(model_id)

    @cached_property
    def _pod_by_model(self) -> dict[str, PodGroup]:
        # Indexed once: reports and the program ask per model, which a scan would make
        # quadratic in the fleet.
        return {mid: p for p in self.pods for mid in p.model_ids}

    def members(self, pod: PodGroup) -> tuple[ModelPlan, tuple[ModelPlan, ...]]:
        """A pod's anchor's plan and the other members' plans, as `pod_request` takes them."""
        plans = [self.model(mid) for mid in pod.model_ids]
        assert all(p is not None for p in plans)
        anchor, *rest = (p for p in plans if p is not None)
        return anchor, tuple(rest)

    @property
    def colocation_saving_usd_per_hour(self) -> float:
        """Best case, against one pod per model."""
        return round(sum(p.saving_usd_per_hour for p in self.pods), 2)

    @cached_property
    def usd_per_hour_best(self) -> float:
        return round(sum([p.usd_per_hour_best for p in self.pods]), 2)

    @cached_property
    def usd_per_hour_worst(self) -> float:
        """Worked out once per plan (as the best case): the planner checks the budget with
        it and the reports ask again, each a pass over every pod."""
        # Per pod: members' shares of each placement are rounded to cents separately, so the
        # sum of their own worst cases can exceed what the pod can cost by a cent.
        return round(sum([p.usd_per_hour_worst for p in self.pods]), 2)

    @property
    def usd_per_month_best(self) -> float:
        return round(self.pods_usd_per_month(worst=False) + self.volume.usd_per_month, 2)

    @property
    def usd_per_month_worst(self) -> float:
        return round(self.pods_usd_per_month(worst=True) + self.volume.usd_per_month, 2)

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
        return self._model_by_id.get(model_id)

    @cached_property
    def _model_by_id(self) -> dict[str, ModelPlan]:
        return {m.model_id: m for m in self.models}


def plan_fleet(
    registry: Registry,
    settings: StackSettings,
    *,
    stack: str,
    environment: Environment = NO_ENVIRONMENT,
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
                rule="unknown-data-centre",
                message=f"data centre '{settings.data_center}' is not a RunPod data centre we know",
                fix=f"set frutebox-infra:dataCenter to one of {known}",
            )
        )
    problems += exposure_problems(registry, settings)
    if settings.cloud is Cloud.COMMUNITY:
        problems.append(
            PlanProblem(
                rule="community-with-volume",
                message="cloud COMMUNITY cannot mount the stack's network volume (Secure "
                "Cloud only)",
                fix="set frutebox-infra:cloud to SECURE",
            )
        )
    if settings.overrides:
        for model_id in sorted(set(settings.overrides) - set(settings.models)):
            warnings.append(
                f"overrides.{model_id} is set but {model_id} is not armed; it is ignored"
            )
    # Without EAGLE-3 heads a model's id changes nothing in the options it is served with.
    shared = None if environment.eagle3_heads else _options(settings, environment, "", None)
    models = tuple(_plan_model(registry, settings, environment, m, shared) for m in settings.models)
    models, pods = _pods(registry, settings, models)
    models, seeding = _seeding(registry, settings, models, pods)
    launch_refused, launch_warnings = launch_problems(registry, _launches(models, pods))
    problems.extend(seeding.problems)
    problems.extend(_unhooked(models, seeding))
    warnings.extend(seeding.warnings)
    problems += [problem for plan in models if plan.problems for problem in plan.problems]
    problems.extend(launch_refused)
    warnings.extend(launch_warnings)
    volume = _volume(registry, settings, models, current_volume_gb)
    largest = registry.network_volume.max_gb
    if volume.contents_gb * (1 + settings.volume_headroom) > largest:
        problems.append(
            PlanProblem(
                rule="volume-too-small",
                message=f"the armed weights need {volume.contents_gb:g} GB plus"
                f" {settings.volume_headroom:.0%} headroom, more than the largest RunPod network"
                f" volume ({largest} GB)",
                fix="disarm a model, lower frutebox-infra:volumeHeadroom, or split the fleet"
                " across stacks",
            )
        )
    # Priced once: the final plan is this one with its problems and warnings, which change
    # nothing its costs are worked out from, so it carries them over (`amended`).
    fleet = FleetPlan(
        stack=stack,
        settings=settings,
        models=models,
        volume=volume,
        problems=(),
        warnings=(),
        pods=pods,
        seeding=seeding,
        windows=plan_windows(settings, models, environment.now),
    )
    if not fleet.within_budget:
        problems.append(
            PlanProblem(
                rule="over-budget",
                message=f"stack {stack} may cost ${fleet.usd_per_hour_worst:.2f}/h in the "
                "worst allowed"
                f" placement (best ${fleet.usd_per_hour_best:.2f}/h), over its budget of"
                f" ${settings.budget_usd_per_hour:.2f}/h",
                fix="raise frutebox-infra:budgetUsdPerHour, lower maxFallbackPremium,"
                " or disarm a model",
            )
        )
    warnings += [f"{m.model_id}: {w}" for m in models if m.warnings for w in m.warnings]
    warnings += [
        f"{m.model_id}: any of the account's own pods can use it without a key (no gateway"
        f" yet: {e.reason})"
        if fleet.private
        else f"{m.model_id}: anyone who has its URL can use it, on the stack's GPU time (no"
        f" gateway yet: {e.reason})"
        for m in models
        if m.placement is not None and (e := m.resolution.exposure) and not e.keyed
    ]
    if fleet.private:
        problems += _private_pulls(models)
    return replace(fleet, problems=tuple(problems), warnings=tuple(warnings))


def exposure_problems(registry: Registry, settings: StackSettings) -> list[PlanProblem]:
    """A private stack needs a data centre that offers global networking (datacenters.yaml
    `global_network`, as the live catalog's `globalNetwork` says)."""
    dc = settings.data_center
    if settings.exposure != "private" or registry.data_center(dc) is None:
        return []  # an unknown data centre is its own problem
    offered = registry.networked_data_centers
    if dc in offered:
        return []
    where = f"one of {', '.join(offered)}" if offered else "one that offers it"
    return [
        PlanProblem(
            rule="private-without-global-network",
            message=f"exposure private needs RunPod's global networking, which {dc} does not"
            " offer (registry/datacenters.yaml `global_network`): RunPod refuses a pod that"
            " asks for it there",
            fix=f"set frutebox-infra:dataCenter to {where} (the weights volume is made anew"
            " there), or set frutebox-infra:exposure to public",
        )
    ]


def _private_pulls(models: tuple[ModelPlan, ...]) -> list[PlanProblem]:
    """An Ollama pod's tags are checked through its published port before it counts as
    serving (the pod pulls them itself), and a private pod publishes none."""
    return [
        PlanProblem(
            rule="private-ollama-pull",
            message=f"{m.model_id} is served by Ollama, whose tags the deploy step checks through"
            " the pod's published port before it counts as serving; a private pod publishes"
            " none",
            fix="set frutebox-infra:exposure to public, or pin another of the model's engines"
            f" (overrides.{m.model_id}.engine)",
        )
        for m in models
        if m.placement is not None and m.placement.pod.ollama_pulls
    ]


def _launches(models: tuple[ModelPlan, ...], pods: tuple[PodGroup, ...]) -> list[PodLaunches]:
    by_id = {m.model_id: m for m in models}
    out = []
    for pod in pods:
        ids = pod.model_ids
        plan = by_id[ids[0]]
        others = tuple([by_id[i].candidates for i in ids[1:]]) if len(ids) > 1 else ()
        out.append(
            PodLaunches(
                model_ids=ids,
                resolution=plan.resolution,
                candidates=plan.candidates,
                members=others,
            )
        )
    return out


def _pods(
    registry: Registry, settings: StackSettings, models: tuple[ModelPlan, ...]
) -> tuple[tuple[ModelPlan, ...], tuple[PodGroup, ...]]:
    """The planned models in pods; a shared member's placements become its view of the pod:
    the pod's GPU, its own fit there, and its share of the price."""
    planned = [
        (m.model_id, m.candidates) for m in models if m.placement is not None and not m.problems
    ]
    pods, views = group_pods(registry, settings, planned)
    if not settings.colocate:
        return models, pods  # a pod per model, whose placements are its own
    shared = {mid: p.model_ids for p in pods if p.shared for mid in p.model_ids}
    if not shared:
        return models, pods
    replanned = tuple(
        replace(
            m,
            placement=views[m.model_id][0],
            fallbacks=views[m.model_id][1:],
            shared_with=tuple(i for i in shared[m.model_id] if i != m.model_id),
        )
        if m.model_id in shared
        else m
        for m in models
    )
    return replanned, pods


def _seeding(
    registry: Registry,
    settings: StackSettings,
    models: tuple[ModelPlan, ...],
    pods: tuple[PodGroup, ...],
) -> tuple[tuple[ModelPlan, ...], Seeding]:
    """Which models seed first; theirs then launch pods that read the volume only, and are
    checked against their engine as such."""
    placed = {m.model_id: m.placement for m in models if m.placement and not m.problems}
    seeding, seeded = plan_seeding(registry, settings, pods, placed)
    if not seeded:
        return models, seeding
    return tuple(
        _reading_seeded(m, seeded[m.model_id]) if m.model_id in seeded else m for m in models
    ), seeding


def _unhooked(models: Sequence[ModelPlan], seeding: Seeding) -> list[PlanProblem]:
    """A model whose gateway starts from a hook the seeding CPU pod puts on the volume (an
    image whose ENTRYPOINT runs the engine or a dispatcher, not our command) cannot be planned
    unseeded: its pod would start no gateway, and its engine, which needs the hook (its
    config file, or its exec of the server), would exit at every start."""
    problems = []
    for m in models:
        recipe, image, serving = m.resolution.recipe, m.resolution.image, m.resolution.serving
        if m.placement is None or recipe is None or image is None or serving is None:
            continue
        if not recipe.gateway_needs_seeding or serving.gateway is None:
            continue
        if seeding.seeds(m.model_id):
            continue
        decision = seeding.of(m.model_id)
        why = decision.why_not if decision is not None and decision.why_not else "not seeded"
        problems.append(
            PlanProblem(
                rule="gateway-needs-seeding",
                message=f"{m.model_id}: {image.reference} runs its own ENTRYPOINT, so its"
                " gateway starts from a hook that only the seeding CPU pod can put on the"
                f" volume, and this model is not seeded ({why})",
                fix="set frutebox-infra:seeding to true in a data centre where a CPU flavor of"
                " registry/gpus.yaml is offered (or serve the model with another engine)",
            )
        )
    return problems


def _reading_seeded(plan: ModelPlan, placement: PlacementOption) -> ModelPlan:
    """`plan` with its placements reading seeded weights (`placement`, its chosen one's, as
    seeding made it): a copy of its instance dict with those two fields changed, the others
    not set again; a ModelPlan caches nothing that they would make stale."""
    fallbacks = tuple([reading_seeded(p) for p in plan.fallbacks]) if plan.fallbacks else ()
    return replace(plan, placement=placement, fallbacks=fallbacks)


def _plan_model(
    registry: Registry,
    settings: StackSettings,
    environment: Environment,
    model_id: str,
    shared: ServeOptions | None = None,
) -> ModelPlan:
    """One model's plan; `shared` is the options of every model without an override, where
    the environment names no EAGLE-3 head (made once per plan)."""
    override = settings.overrides.get(model_id)
    gpu_id = None
    if override is not None and override.gpu is not None:
        gpu = registry.gpu(override.gpu)
        if gpu is None:
            known = ", ".join(g.id for g in registry.gpus)
            unknown = PlanProblem(
                rule="unknown-gpu",
                message=f"{model_id}: overrides.{model_id}.gpu '{override.gpu}' is not a GPU "
                "type we know",
                fix=f"use one of: {known}",
            )
            return ModelPlan(
                model_id=model_id,
                resolution=Resolution(model_id=model_id),
                placement=None,
                fallbacks=(),
                problems=(unknown,),
                warnings=(),
            )
        gpu_id = gpu.id
    if override is None and shared is not None:
        options = shared
    else:
        options = _options(settings, environment, model_id, override)
    gpu_count = override.gpu_count if override else None
    resolution = resolve(
        registry,
        model_id,
        options,
        cloud=settings.cloud,
        gpu_id=gpu_id,
        gpu_count=gpu_count,
        engine=override.engine if override else None,
    )
    found: tuple[PlanProblem, ...] = () if resolution.problem is None else (resolution.problem,)
    ranking = resolution.ranking
    if ranking is None or not ranking.ranked:
        return ModelPlan(
            model_id=model_id,
            resolution=resolution,
            placement=None,
            fallbacks=(),
            problems=found,
            warnings=resolution.warnings,
        )
    floor = floor_of(settings, override)
    if resolution.serving is None or not resolution.serving.token_context:
        floor = 0.0  # a diffusion pipeline has no token rate
    choice = choose(
        ranking, floor=floor, rank_by=settings.rank_by, premium=settings.max_fallback_premium
    )
    warnings = resolution.warnings
    if choice.unchecked and (floor > 0 or settings.rank_by != "usdPerHour"):
        warnings += (_unchecked(choice.unchecked, floor),)
    taken = choice.taken
    if not taken:
        found += (floor_problem(model_id, choice, floor, floor_key(override, model_id)),)
        return ModelPlan(
            model_id=model_id,
            resolution=resolution,
            placement=None,
            fallbacks=(),
            problems=found,
            warnings=warnings,
            shared_with=(),
            min_decode_tok_s=floor,
            below_floor=choice.below_floor,
        )
    chosen = taken[0]
    warnings += chosen.recipe.pod_notes(chosen.model)  # the pod's own, not rendered for them
    return ModelPlan(
        model_id=model_id,
        resolution=resolution,
        placement=chosen,
        fallbacks=taken[1:],
        problems=found,
        warnings=warnings,
        shared_with=(),
        min_decode_tok_s=floor,
        below_floor=choice.below_floor,
    )


def _options(
    settings: StackSettings,
    environment: Environment,
    model_id: str,
    override: ModelOverride | None,
) -> ServeOptions:
    """A model's serving targets: its override's, else the stack's."""
    return environment.serve_options(
        model_id,
        context_tokens=override.context if override else None,
        concurrency=override.concurrency if override else None,
        min_sequences=(override.min_concurrent_sequences if override else None)
        or settings.min_concurrent_sequences,
        min_sequences_pinned=override is not None and override.min_concurrent_sequences is not None,
        hf_token=settings.hf_token_configured,
        spec_decode=settings.spec_decode,
        prompt_tokens=settings.prompt_tokens,
        output_tokens=settings.output_tokens,
        metrics=settings.measure_usage,
    )


def _unchecked(placements: tuple[PlacementOption, ...], floor: float) -> str:
    speed = placements[0].speed
    reason = getattr(speed, "reason", "no estimate")
    labels = ", ".join(p.label for p in placements)
    checked = f"the floor of {floor:g} tok/s per stream is not checked" if floor > 0 else ""
    return f"no speed estimate for {labels} ({reason}): {checked or 'ranked by $/h'}"


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
        size_gb=size,
        weights_gb=round(weights, 2),
        data_center=settings.data_center,
        facts=facts,
        tier=settings.volume_type,
        engines_gb=engines,
    )
    return volume if current_gb is None else volume.at_least(current_gb)
