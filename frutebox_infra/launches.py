"""Every launch a pod may be created with, and whether its pinned engine would accept each."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from frutebox_infra.launch_check import FACTS_FILE, Launch, Refusal, check_launch
from frutebox_infra.ranking import PlacementOption
from frutebox_infra.recipes.base import PodSpec
from frutebox_infra.record import positional_record
from frutebox_infra.registry import Registry
from frutebox_infra.resolver import PlanProblem, Resolution


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


@positional_record
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
    for pod in pods:
        anchor = pod.model_ids[0]
        recipe, image = pod.resolution.recipe, pod.resolution.image
        if recipe is None or image is None:
            continue
        engine = recipe.runtime
        facts = registry.engine_options.get(engine)
        where = FACTS_FILE.format(engine=engine)
        if facts is None:
            warnings.append(
                f"{anchor}: no {where}: its launch is not checked (run tools/engine-options for"
                " the pinned image)"
            )
            continue
        if facts.image != image.reference:
            warnings.append(
                f"{anchor}: {where} was read for {facts.image}, but the pinned image is"
                f" {image.reference}: refresh it with tools/engine-options"
            )
        who = ", ".join(pod.model_ids)
        specs = pod_specs(pod.candidates, pod.members)
        # A pod's candidates often launch alike (only a count or the KV precision differs
        # between GPU types, if anything): each distinct launch is checked once.
        checked: dict[tuple[object, ...], tuple[Refusal, ...]] = {}
        for placement, spec in zip(pod.candidates, specs, strict=True):
            key = (spec.args, tuple(spec.env.items()), spec.health_path, spec.secret_env)
            if key not in checked:
                launch = Launch(spec.args, spec.env, spec.health_path, spec.secret_env)
                checked[key] = check_launch(launch, facts, entrypoint=image.entrypoint)
            for refusal in checked[key]:
                problems.setdefault(
                    (who, refusal.what),
                    PlanProblem(
                        "launch-rejected",
                        f"{who}: {facts.image} would refuse the launch ({placement.label}):"
                        f" {refusal.what}; it accepts {refusal.accepts} ({where})",
                        refusal.fix,
                    ),
                )
    return list(problems.values()), warnings
