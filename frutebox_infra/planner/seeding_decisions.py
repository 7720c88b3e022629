"""Which armed models a CPU pod seeds before their GPU pod starts, the job each gets, and the
bring-up that buys (pure): one decision per model, made once for the plan."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property

from frutebox_infra.catalog.schema import Registry, ToolImage
from frutebox_infra.planner.colocate import PodGroup
from frutebox_infra.planner.launches import first_pod_spec
from frutebox_infra.planner.ranking import PlacementOption
from frutebox_infra.planner.resolver import PlanProblem
from frutebox_infra.recipes.base import PodSpec
from frutebox_infra.seeding.bringup import (
    Bringup,
    BringupRates,
    CpuChoice,
    FirstDeploy,
    NoCpu,
    cpu_candidates,
    first_deploy,
)
from frutebox_infra.seeding.manifest import Unseedable, seed_job
from frutebox_infra.seeding.protocol import SeedJob
from frutebox_infra.stack.settings import StackSettings

DOWNLOADS = "its GPU pod downloads the weights itself"


@dataclass(frozen=True, kw_only=True)
class ModelSeeding:
    """One model's seed: the job its CPU pod runs, or why its GPU pod downloads instead."""

    model_id: str
    job: SeedJob | None
    why_not: str | None
    bringup: Bringup
    timeout_s: int
    """How long its seeding may take (the stack's `seedTimeoutSeconds`, else scaled)."""

    @property
    def seeded(self) -> bool:
        return self.job is not None


@dataclass(frozen=True, kw_only=True)
class Seeding:
    """The stack's seeding: the CPU flavors a seeding pod may take (cheapest first) and
    every placed model's decision, with the first deploy they add up to."""

    on: bool
    image: ToolImage | None
    """The seeder's image (registry/images.yaml `seeder`)."""
    cpus: tuple[CpuChoice, ...]
    no_cpu: str | None
    """Why no CPU pod can seed here (seeding is on but nothing can run it), else None."""
    models: tuple[ModelSeeding, ...]
    first_deploy: FirstDeploy
    problems: tuple[PlanProblem, ...] = ()
    warnings: tuple[str, ...] = ()

    def of(self, model_id: str) -> ModelSeeding | None:
        return self._by_model.get(model_id)

    @cached_property
    def _by_model(self) -> dict[str, ModelSeeding]:
        # Indexed once: the program, reports and deploy requests ask per model.
        found: dict[str, ModelSeeding] = {}
        for m in self.models:
            found.setdefault(m.model_id, m)
        return found

    def seeds(self, model_id: str) -> bool:
        return model_id in self.seeded_ids

    @cached_property
    def seeded_ids(self) -> frozenset[str]:
        """The models a CPU pod seeds."""
        return frozenset([m.model_id for m in self.models if m.seeded])

    @property
    def cpu(self) -> CpuChoice | None:
        return self.cpus[0] if self.cpus else None


def plan_seeding(
    registry: Registry,
    settings: StackSettings,
    pods: Sequence[PodGroup],
    placements: Mapping[str, PlacementOption],
) -> tuple[Seeding, dict[str, PlacementOption]]:
    """`placements`: every placed model's chosen placement, in the plan's order (a shared
    member's is its view of its pod); `pods` groups them. A model seeds when seeding is on, a
    CPU flavor can run in the stack's data centre, and its weights have a seeding rule.

    Also each seeded model's placement reading the seeded weights: its job is read off that
    placement's pod, so the pod is rendered once, as it launches."""
    problems: list[PlanProblem] = []
    warnings: list[str] = []
    cpus, no_cpu = _cpus(registry, settings, problems)
    if settings.seeding and no_cpu is not None and not problems:
        warnings.append(f"seeding: {no_cpu}; every GPU pod downloads its own weights")
    why_not = _why_not(settings, no_cpu)  # every model's when the stack seeds none
    rates = BringupRates(
        cpu=cpus[0] if cpus else None,
        download_mb_per_s=settings.download_mb_per_s,
        volume_type=settings.volume_type,
        fixed_timeout_s=settings.seed_timeout_seconds,
    )
    decisions: dict[str, ModelSeeding] = {}
    seeded: dict[str, PlacementOption] = {}
    for pod in pods:
        ids = pod.model_ids
        if len(ids) == 1:  # most pods: one model, launched as its own placement renders it
            placement = placements.get(ids[0])
            if placement is None:
                continue
            reading = placement if why_not is not None else reading_seeded(placement)
            spec = None if why_not is not None else reading.pod
            decision = decisions[ids[0]] = _decision(ids[0], placement, spec, why_not, rates)
            if decision.seeded:
                seeded[ids[0]] = reading
            continue
        chosen = [placements[mid] for mid in ids if mid in placements]
        if len(chosen) != len(ids):
            continue
        readings = chosen if why_not is not None else [reading_seeded(p) for p in chosen]
        spec = None
        if why_not is None:
            # The pod's own launch (a shared pod's merged env): where its engine reads weights.
            spec = first_pod_spec(readings[:1], [(p,) for p in readings[1:]])
        for model_id, placement, reading in zip(ids, chosen, readings, strict=True):
            decision = decisions[model_id] = _decision(model_id, placement, spec, why_not, rates)
            if decision.seeded:
                seeded[model_id] = reading
    if list(decisions) != list(placements):  # pods in another order than their models
        decisions = {mid: decisions[mid] for mid in placements if mid in decisions}
    models = tuple(decisions.values())
    seeding = Seeding(
        on=settings.seeding,
        image=registry.seeder_image,
        cpus=cpus,
        no_cpu=no_cpu,
        models=models,
        first_deploy=first_deploy([d.bringup for d in models]),
        problems=tuple(problems),
        warnings=tuple(warnings),
    )
    return seeding, seeded


def reading_seeded(p: PlacementOption) -> PlacementOption:
    """`p` launching a pod that reads the seeded weights offline: seeding changes where its
    pod reads weights and nothing else."""
    return p if p.seeded else replace(p, seeded=True)


def _cpus(
    registry: Registry, settings: StackSettings, problems: list[PlanProblem]
) -> tuple[tuple[CpuChoice, ...], str | None]:
    if not settings.seeding:
        return (), None
    if registry.seeder_image is None:
        return (), "registry/images.yaml names no seeder image"
    flavor = settings.seed_cpu_flavor or None
    found = cpu_candidates(
        registry.cpu_flavors, settings.data_center, vcpus=settings.seed_vcpus, flavor_id=flavor
    )
    if isinstance(found, NoCpu):
        if flavor is not None and all(f.id != flavor for f in registry.cpu_flavors):
            known = ", ".join(f.id for f in registry.cpu_flavors) or "none"
            problems.append(
                PlanProblem(
                    rule="unknown-cpu-flavor",
                    message=f"seedCpuFlavor '{flavor}' is not a CPU flavor in registry/gpus.yaml"
                    f" cpu_flavors ({known})",
                    fix="set frutebox-infra:seedCpuFlavor to one of those, or unset it to take"
                    " the cheapest offered in the data centre",
                )
            )
        return (), found.reason
    return found, None


def _why_not(settings: StackSettings, no_cpu: str | None) -> str | None:
    if not settings.seeding:
        return f"seeding is off (frutebox-infra:seeding: false): {DOWNLOADS}"
    if no_cpu is not None:
        return f"{no_cpu}: {DOWNLOADS}"
    return None


def _decision(
    model_id: str,
    placement: PlacementOption,
    spec: PodSpec | None,
    why_not: str | None,
    rates: BringupRates,
) -> ModelSeeding:
    """`spec`: the pod that reads the model's weights, None when the stack seeds nothing
    (`why_not` says why)."""
    weights_gb = placement.serving.weights_disk_gb or 0.0
    # The release archives its pod's launch checks: fetched by the seed, else by the GPU pod.
    releases_gb = sum([kept.size_gb for kept in (spec or placement.pod).archives])
    job = None
    if spec is not None:
        found = seed_job(placement.model, placement.recipe.runtime, spec)
        if isinstance(found, Unseedable):
            why_not = f"{found.reason}: {DOWNLOADS}"
        else:
            job = found
    bringup = rates.of(model_id, weights_gb, placement.usd_per_hour, job is not None,
                       placement.recipe.loads_weights_at_start, releases_gb)  # fmt: skip
    return ModelSeeding(
        model_id=model_id,
        job=job,
        why_not=why_not,
        bringup=bringup,
        timeout_s=rates.timeout_s(weights_gb, releases_gb),
    )
