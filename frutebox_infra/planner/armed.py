"""Armed windows in the plan: per model, its window, whether it is armed at the time the run
plans at and until when, and what its pod costs a month when it runs only then (its window's
hours, plus a bring-up each time the window opens: the GPU's start and the weights read off the
volume, where they stay between windows)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from frutebox_infra.planner.ranking import PlacementOption
from frutebox_infra.seeding.bringup import rearm_seconds
from frutebox_infra.stack.settings import StackSettings
from frutebox_infra.stack.windows import WEEK_HOURS, parse_window

HOURS_PER_MONTH = 730
"""A month of pods running around the clock, as RunPod bills an always-on pod."""


class Planned(Protocol):
    @property
    def model_id(self) -> str: ...
    @property
    def placement(self) -> PlacementOption | None: ...


@dataclass(frozen=True, kw_only=True)
class ModelWindow:
    """One windowed model's window, its state at the run's time, and its monthly hours."""

    model_id: str
    window: str
    armed_now: bool | None
    """None: the run was given no time (a plan made without a clock)."""
    until: datetime | None
    """The next edge after the run's time, in the window's zone."""
    hours_per_month: float
    openings_per_month: float
    rearm_s: float
    """GPU seconds billed per opening before the model serves again."""


def placement_rearm_s(placement: PlacementOption | None, volume_type: str) -> float:
    """Seconds one opening of a window bills the GPU: its start and, for an engine that loads
    at start, the weights read off the volume (they stay seeded between windows)."""
    if placement is None:
        return rearm_seconds(0.0, volume_type, loads_at_start=True)
    serving = placement.serving
    return rearm_seconds(
        serving.weights_disk_gb or serving.weights_vram_gb,
        volume_type,
        loads_at_start=placement.recipe.loads_weights_at_start,
    )


def plan_windows(
    settings: StackSettings, models: Sequence[Planned], now: datetime | None
) -> tuple[ModelWindow, ...]:
    """Every armed model's window (its override's, else the stack's); none without any."""
    found = []
    for m in models:
        override = settings.overrides.get(m.model_id)
        text = (override.armed_window if override else None) or settings.armed_window
        if not text:
            continue
        window = parse_window(text)
        scale = HOURS_PER_MONTH / WEEK_HOURS
        found.append(
            ModelWindow(
                model_id=m.model_id,
                window=window.text,
                armed_now=window.armed_at(now) if now else None,
                until=window.next_edge(now) if now else None,
                hours_per_month=window.hours_per_week * scale,
                openings_per_month=window.openings_per_week * scale,
                rearm_s=placement_rearm_s(m.placement, settings.volume_type),
            )
        )
    return tuple(found)
