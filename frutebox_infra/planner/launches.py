"""Every launch a pod may be created with, and whether its pinned engine would accept each."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

from frutebox_infra.catalog.engine_options import EngineOptions
from frutebox_infra.catalog.schema import Registry, Runtime
from frutebox_infra.planner.launch_check import FACTS_FILE, Refusal, check_launch
from frutebox_infra.planner.ranking import PlacementOption
from frutebox_infra.planner.resolver import PlanProblem, Resolution
from frutebox_infra.recipes.base import PodSpec


def pod_specs(
    candidates: Sequence[PlacementOption], members: Sequence[Sequence[PlacementOption]] = ()
) -> list[PodSpec]:
    """Per candidate placement (cheapest first), the pod that serves the anchor whose
    `candidates` these are and the other `members` of its pod, who hold their views of the
    same placements in the same order."""
    if not members:
        return [p.pod for p in candidates]
    return [
        p.recipe.shared_pod([p.pod, *(m[i].pod for m in members)]) for i, p in enumerate(candidates)
    ]


def first_pod_spec(
    candidates: Sequence[PlacementOption], members: Sequence[Sequence[PlacementOption]] = ()
) -> PodSpec:
    """`pod_specs(candidates, members)[0]`: the pod of the cheapest placement alone."""
    first = candidates[0]
    if not members:
        return first.pod
    return first.recipe.shared_pod([first.pod, *(m[0].pod for m in members)])


@dataclass(frozen=True, kw_only=True)
class PodLaunches:
    """One pod as planned: its models (anchor first), the anchor's resolution and the
    candidates of the anchor and of every other member."""

    model_ids: tuple[str, ...]
    resolution: Resolution
    candidates: tuple[PlacementOption, ...]
    members: tuple[tuple[PlacementOption, ...], ...] = ()


def launch_problems(
    registry: Registry, pods: Iterable[PodLaunches]
) -> tuple[list[PlanProblem], list[str]]:
    """Every launch the deploy step may create, checked against its engine's pinned options:
    each pod's chosen placement and fallbacks, as the deploy request renders them (a shared
    pod with all its members, speculative flags and overrides included)."""
    if not registry.engine_options:
        return [], []  # a registry from before the facts (an old git ref): nothing to check
    problems: dict[tuple[str, str], PlanProblem] = {}
    warnings: list[str] = []
    # Per engine and image (by identity: the registry's few, which the pods keep alive): the
    # engine's facts (None: there are none), where they are read from, and the warning its
    # pods get. Every planned pod is checked, so this is worked out once per plan.
    engines: dict[tuple[str, int], tuple[EngineOptions | None, str, str | None]] = {}
    for pod in pods:
        recipe, image = pod.resolution.recipe, pod.resolution.image
        if recipe is None or image is None:
            continue
        key = (recipe.runtime, id(image))
        known = engines.get(key)
        if known is None:
            known = engines[key] = _engine_facts(registry, recipe.runtime, image.reference)
        facts, where, warning = known
        if warning is not None:
            warnings.append(f"{pod.model_ids[0]}: {warning}")
        if facts is None:
            continue
        entrypoint = image.entrypoint
        candidates = pod.candidates
        if not pod.members:
            # A model's placements of one launch variant, seeded alike, launch the same pod
            # (`Recipe.pod` renders one per variant): each is checked once, and a fallback
            # whose launch is already checked is not rendered for it.
            variants: dict[tuple[Hashable, bool], tuple[Refusal, ...]] = {}
            for placement in candidates:
                launch = (recipe.launch_variant(placement.gpu, placement.count), placement.seeded)
                found = variants.get(launch)
                if found is None:
                    found = variants[launch] = check_launch(
                        placement.pod, facts, entrypoint=entrypoint, dispatch=image.dispatch
                    )
                if found:
                    _refused(problems, pod.model_ids, placement, facts, where, found)
            continue
        # A pod's candidates often launch alike (only a count or the KV precision differs
        # between GPU types, if anything): each distinct launch is checked once.
        checked: list[tuple[PodSpec, tuple[Refusal, ...]]] = []
        for placement, spec in zip(candidates, pod_specs(candidates, pod.members), strict=True):
            for seen, found in checked:
                if _same_launch(seen, spec):
                    refusals = found
                    break
            else:
                refusals = check_launch(spec, facts, entrypoint=entrypoint, dispatch=image.dispatch)
                checked.append((spec, refusals))
            if refusals:
                _refused(problems, pod.model_ids, placement, facts, where, refusals)
    return list(problems.values()), warnings


def _engine_facts(
    registry: Registry, engine: Runtime, image: str
) -> tuple[EngineOptions | None, str, str | None]:
    """The facts a launch of `engine` in `image` is checked against (None: there are none),
    the file they are read from, and the warning its pods get (None: read for that image)."""
    where = FACTS_FILE.format(engine=engine)
    facts = registry.engine_options.get(engine)
    warning = None
    if facts is None:
        warning = (
            f"no {where}: its launch is not checked (run tools/engine-options for the pinned image)"
        )
    elif facts.image != image:
        warning = (
            f"{where} was read for {facts.image}, but the pinned image is {image}: refresh it"
            " with tools/engine-options"
        )
    return facts, where, warning


def _same_launch(a: PodSpec, b: PodSpec) -> bool:
    """Whether two pods launch alike, as far as their engine's check sees."""
    return a is b or (
        a.args == b.args
        and a.env == b.env
        and a.health_path == b.health_path
        and a.secret_env == b.secret_env
    )


def _refused(
    problems: dict[tuple[str, str], PlanProblem],
    model_ids: tuple[str, ...],
    placement: PlacementOption,
    facts: EngineOptions,
    where: str,
    refusals: tuple[Refusal, ...],
) -> None:
    """One problem per pod and thing refused, naming the first placement that meets it."""
    who = ", ".join(model_ids)
    for refusal in refusals:
        problems.setdefault(
            (who, refusal.what),
            PlanProblem(
                rule="launch-rejected",
                message=f"{who}: {facts.image} would refuse the launch ({placement.label}):"
                f" {refusal.what}; it accepts {refusal.accepts} ({where})",
                fix=refusal.fix,
            ),
        )
