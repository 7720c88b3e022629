"""Every launch a pod may be created with, and whether its pinned engine would accept each."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from frutebox_infra.engine_options import EngineOptions
from frutebox_infra.launch_check import FACTS_FILE, Refusal, check_launch
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
        recipe, image = pod.resolution.recipe, pod.resolution.image
        if recipe is None or image is None:
            continue
        engine = recipe.runtime
        facts = registry.engine_options.get(engine)
        if facts is None:
            warnings.append(
                f"{pod.model_ids[0]}: no {FACTS_FILE.format(engine=engine)}: its launch is not"
                " checked (run tools/engine-options for the pinned image)"
            )
            continue
        if facts.image != image.reference:
            warnings.append(
                f"{pod.model_ids[0]}: {FACTS_FILE.format(engine=engine)} was read for"
                f" {facts.image}, but the pinned image is {image.reference}: refresh it with"
                " tools/engine-options"
            )
        specs = pod_specs(pod.candidates, pod.members)
        # A pod's candidates often launch alike (only a count or the KV precision differs
        # between GPU types, if anything): each distinct launch is checked once.
        checked: list[tuple[PodSpec, tuple[Refusal, ...]]] = []
        for placement, spec in zip(pod.candidates, specs, strict=True):
            for seen, found in checked:
                if _same_launch(seen, spec):
                    refusals = found
                    break
            else:
                refusals = check_launch(spec, facts, entrypoint=image.entrypoint)
                checked.append((spec, refusals))
            if refusals:
                _refused(
                    problems,
                    pod.model_ids,
                    placement,
                    facts,
                    where=FACTS_FILE.format(engine=engine),
                    refusals=refusals,
                )
    return list(problems.values()), warnings


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
    *,
    where: str,
    refusals: tuple[Refusal, ...],
) -> None:
    """One problem per pod and thing refused, naming the first placement that meets it."""
    who = ", ".join(model_ids)
    for refusal in refusals:
        problems.setdefault(
            (who, refusal.what),
            PlanProblem(
                "launch-rejected",
                f"{who}: {facts.image} would refuse the launch ({placement.label}):"
                f" {refusal.what}; it accepts {refusal.accepts} ({where})",
                refusal.fix,
            ),
        )
