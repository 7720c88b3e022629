"""The plan as its reports show it (pure): the planner's result, the names the deploy step
gives its pods, and what the bring-up figures assume."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from frutebox_infra.deploy.requests import pod_name
from frutebox_infra.planner import FleetPlan, PodGroup
from frutebox_infra.seeding.bringup import (
    CPU_POD_START_S,
    GPU_POD_START_S,
    VOLUME_READ_MB_PER_S,
)
from frutebox_infra.stack.settings import VolumeTier


@dataclass(frozen=True, kw_only=True)
class BringupAssumptions:
    """What the plan's bring-up seconds and dollars were worked out with, shown beside them so
    a reader can weigh them against their own link and volume."""

    gpu_start_s: int
    cpu_start_s: int
    download_mb_per_s: int
    volume_type: VolumeTier
    volume_read_mb_per_s: float


@dataclass(frozen=True, kw_only=True)
class PlanView:
    """One stack's plan, and what its reports show beside it that the planner does not decide:
    a pod's name is the deploy step's, a bring-up assumption the seeding step's."""

    plan: FleetPlan

    def pod_name(self, pod: PodGroup) -> str:
        """The RunPod name of `pod`: a shared pod's is its anchor's."""
        return pod_name(self.plan.stack, pod.anchor)

    @cached_property
    def pod_names(self) -> Mapping[str, str]:
        """Per model id, the name of the pod serving it (a shared pod's members have the
        same); a model without a pod has none."""
        return {mid: self.pod_name(p) for p in self.plan.pods for mid in p.model_ids}

    @cached_property
    def bringup_assumptions(self) -> BringupAssumptions:
        s = self.plan.settings
        return BringupAssumptions(
            gpu_start_s=GPU_POD_START_S,
            cpu_start_s=CPU_POD_START_S,
            download_mb_per_s=s.download_mb_per_s,
            volume_type=s.volume_type,
            volume_read_mb_per_s=VOLUME_READ_MB_PER_S[s.volume_type],
        )
