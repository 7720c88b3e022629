"""Which armed models a CPU pod seeds before their GPU pod starts, the job each gets, and the
bring-up that buys (pure): one decision per model, made once for the plan."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import cached_property

from frutebox_infra.colocate import PodGroup
from frutebox_infra.launches import first_pod_spec
from frutebox_infra.ranking import PlacementOption
from frutebox_infra.recipes.base import PodSpec
from frutebox_infra.record import positional_record
from frutebox_infra.registry import Registry, ToolImage
from frutebox_infra.resolver import PlanProblem
from frutebox_infra.seeding.bringup import (
    Bringup,
    CpuChoice,
    FirstDeploy,
    NoCpu,
    bringup,
    cpu_candidates,
    first_deploy,
    seed_timeout_s,
)
from frutebox_infra.seeding.manifest import Unseedable, seed_job
from frutebox_infra.seeding.protocol import SeedJob
from frutebox_infra.settings import StackSettings

DOWNLOADS = "its GPU pod downloads the weights itself"


@positional_record
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


@positional_record
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
        found = self.of(model_id)
        return found is not None and found.seeded

    @property
    def cpu(self) -> CpuChoice | None:
        return self.cpus[0] if self.cpus else None


def plan_seeding(
    registry: Registry,
    settings: StackSettings,
    pods: Sequence[PodGroup],
    candidates: Mapping[str, tuple[PlacementOption, ...]],
) -> Seeding:
    """`candidates`: every placed model's placements, cheapest first (a shared member's are its
    view of its pod); `pods` groups them. A model seeds when seeding is on, a CPU flavor can
    run in the stack's data centre, and its weights have a seeding rule."""
    problems: list[PlanProblem] = []
    warnings: list[str] = []
    cpus, no_cpu = _cpus(registry, settings, problems)
    if settings.seeding and no_cpu is not None and not problems:
        warnings.append(f"seeding: {no_cpu}; every GPU pod downloads its own weights")
    why_not = _why_not(settings, no_cpu)
    downloads = NoCpu(why_not or "")  # every model's when the stack seeds none
    decisions = []
    for pod in pods:
        ids = [mid for mid in pod.model_ids if mid in candidates]
        if len(ids) != len(pod.model_ids):
            continue
        spec: PodSpec | None = None
        for model_id in ids:
            placement = candidates[model_id][0]
            if why_not is not None:
                decisions.append(_decision(model_id, placement, None, downloads, settings))
                continue
            if spec is None:
                # The pod's own launch (a shared pod's merged env): where its engine reads
                # weights.
                anchor, *members = (candidates[mid] for mid in ids)
                spec = first_pod_spec(anchor, members)
            found = seed_job(placement.model, placement.recipe.runtime, spec)
            if isinstance(found, Unseedable):
                cpu = NoCpu(f"{found.reason}: {DOWNLOADS}")
                decisions.append(_decision(model_id, placement, None, cpu, settings))
            else:
                decisions.append(_decision(model_id, placement, found, cpus[0], settings))
    by_id = {d.model_id: d for d in decisions}
    ordered = tuple([by_id[mid] for mid in candidates if mid in by_id])
    return Seeding(
        on=settings.seeding,
        image=registry.seeder_image,
        cpus=cpus,
        no_cpu=no_cpu,
        models=ordered,
        first_deploy=first_deploy([d.bringup for d in ordered]),
        problems=tuple(problems),
        warnings=tuple(warnings),
    )


def reading_seeded(placements: Sequence[PlacementOption]) -> tuple[PlacementOption, ...]:
    """The same placements launching pods that read the seeded weights offline."""
    return tuple([p if p.seeded else _seeded(p) for p in placements])


def _seeded(p: PlacementOption) -> PlacementOption:
    """`p` reading seeded weights, with what `p` already worked out carried over (into the
    slots of its cached properties): its speed, and its pod made to read offline."""
    seeded = replace(p, seeded=True)
    made, slots = vars(p), vars(seeded)
    if "pod" in made:
        slots["pod"] = p.recipe.seeded_pod(made["pod"])
    if "speed" in made:
        slots["speed"] = made["speed"]
    return seeded


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
                    "unknown-cpu-flavor",
                    f"seedCpuFlavor '{flavor}' is not a CPU flavor in registry/gpus.yaml"
                    f" cpu_flavors ({known})",
                    "set frutebox-infra:seedCpuFlavor to one of those, or unset it to take"
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
    job: SeedJob | None,
    cpu: CpuChoice | NoCpu,
    settings: StackSettings,
) -> ModelSeeding:
    """`cpu`: the pod that seeds the model's `job`, or why none does."""
    weights_gb = placement.serving.weights_disk_gb or 0.0
    return ModelSeeding(
        model_id,
        job,
        cpu.reason if isinstance(cpu, NoCpu) else None,
        bringup(
            model_id,
            weights_gb,
            placement.usd_per_hour,
            cpu=cpu,
            download_mb_per_s=settings.download_mb_per_s,
            volume_type=settings.volume_type,
            loads_at_start=placement.recipe.loads_weights_at_start,
        ),
        seed_timeout_s(weights_gb, settings.download_mb_per_s, settings.seed_timeout_seconds),
    )
