"""The planner: a stack's settings and the catalog become a fleet plan. Per model the
resolver picks an engine and renders its pods; the count search and ranking find the cheapest
placements that fit; the floor drops those too slow per stream; co-location shares pods; every
launch is checked against its engine's options; seeding decides which weights a CPU pod puts on
the volume first. Pure: no I/O, no Pulumi.

The package is the planner's public face: the result types below are what views and reports
read, so the modules behind them can change without a report noticing. A module of the planner
imports its siblings, never this package (that would be a cycle)."""

from frutebox_infra.estimates.speed import SpeedEstimate, SpeedUnknown
from frutebox_infra.planner.armed import ModelWindow
from frutebox_infra.planner.colocate import GroupPlacement, PodGroup
from frutebox_infra.planner.floor import BelowFloor, SpeedChoice
from frutebox_infra.planner.placement_speed import Speed
from frutebox_infra.planner.plan import HOURS_PER_MONTH, FleetPlan, ModelPlan, VolumePlan
from frutebox_infra.planner.ranking import PlacementOption
from frutebox_infra.planner.resolver import Exposure, PlanProblem, Resolution
from frutebox_infra.planner.seeding_decisions import ModelSeeding, Seeding

__all__ = [
    "HOURS_PER_MONTH",
    "BelowFloor",
    "Exposure",
    "FleetPlan",
    "GroupPlacement",
    "ModelPlan",
    "ModelSeeding",
    "ModelWindow",
    "PlacementOption",
    "PlanProblem",
    "PodGroup",
    "Resolution",
    "Seeding",
    "Speed",
    "SpeedChoice",
    "SpeedEstimate",
    "SpeedUnknown",
    "VolumePlan",
]
