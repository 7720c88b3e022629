"""The catalog (`frutebox models`): every registry model as resolved and, under a stack's
default stream-rate floor, the placement a stack would take or why none (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from frutebox_infra.planner import PlacementOption, PlanProblem, Resolution, SpeedChoice
from frutebox_infra.planner.floor import cheapest_at_floor, floor_problem

FLOOR_KEY = "frutebox-infra:minDecodeTokensPerSecond"
"""The stack key a floor problem's fix names: the catalog holds models to its default."""


@dataclass(frozen=True, kw_only=True)
class CatalogView:
    """Every registry model as resolved: servable, or why not; and, under the stack default
    stream-rate floor, the placements a stack would take."""

    resolutions: tuple[Resolution, ...]
    floor: float = 0.0
    """tok/s per stream the `at_floor` choices were held to (0: no floor)."""
    at_floor: Mapping[str, SpeedChoice] = field(default_factory=dict)
    """Per model id; a model without one is shown at its cheapest placement."""

    def cheapest(self, r: Resolution) -> PlacementOption | None:
        """The cheapest placement that meets the floor (the cheapest of all without one)."""
        choice = self.at_floor.get(r.model_id)
        if choice is not None:
            return choice.taken[0] if choice.taken else None
        return r.placements[0] if r.placements else None

    def problem(self, r: Resolution) -> PlanProblem | None:
        """Why the model cannot be served: the resolver's reason, or the floor's."""
        choice = self.at_floor.get(r.model_id)
        if r.problem is None and choice is not None and not choice.taken and choice.below_floor:
            return floor_problem(r.model_id, choice, self.floor, FLOOR_KEY)
        return r.problem

    def servable(self, r: Resolution) -> bool:
        return r.servable and self.cheapest(r) is not None


def catalog_view(resolutions: tuple[Resolution, ...], floor: float) -> CatalogView:
    """The catalog with each model's cheapest placement that meets `floor`."""
    at_floor = {}
    for r in resolutions:
        choice = cheapest_at_floor(r, floor)
        if choice is not None:
            at_floor[r.model_id] = choice
    return CatalogView(resolutions=resolutions, floor=floor, at_floor=at_floor)
