"""The catalog view: per model the cheapest placement a stack with the default floor would
take, or why none, worked out once so the report only renders it."""

from __future__ import annotations

import pytest

from frutebox_infra.planner.resolver import resolve
from frutebox_infra.views.catalog import FLOOR_KEY, CatalogView, catalog_view
from tests.factories import real_registry


def view(floor: float, *models: str) -> CatalogView:
    registry = real_registry()
    return catalog_view(tuple(resolve(registry, m) for m in models), floor)


@pytest.mark.parametrize(
    ("floor", "taken"),
    [
        # 4x RTX PRO 6000 decodes 18.5 tok/s per stream at 16 streams, 2x H200 26.8.
        pytest.param(0.0, "4x RTX PRO 6000", id="no-floor-cheapest"),
        pytest.param(18.6, "2x H200 SXM", id="the-cheapest-over-the-floor"),
    ],
)
def test_the_cheapest_is_the_cheapest_that_meets_the_floor(floor: float, taken: str) -> None:
    v = view(floor, "qwen3-235b-a22b")
    (r,) = v.resolutions
    cheapest = v.cheapest(r)
    assert cheapest is not None and cheapest.label == taken
    assert v.servable(r) and v.problem(r) is None


def test_below_the_floor_everywhere_is_a_problem_naming_the_stack_key() -> None:
    v = view(200.0, "kimi-k2.6")
    (r,) = v.resolutions
    problem = v.problem(r)
    assert r.problem is None and v.cheapest(r) is None and not v.servable(r)
    assert problem is not None and problem.rule == "below-speed-floor"
    assert FLOOR_KEY in problem.fix


def test_without_a_floor_choice_a_model_shows_its_cheapest_and_the_resolvers_reason() -> None:
    registry = real_registry()
    r = resolve(registry, "stable-audio-open-1.0")
    v = CatalogView(resolutions=(r,))
    assert v.cheapest(r) is None and v.problem(r) is r.problem is not None
