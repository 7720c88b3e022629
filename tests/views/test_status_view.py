"""The status view: when it has drifted, and the one heal line for each kind of drift."""

from __future__ import annotations

import pytest

from frutebox_infra.views.status_view import (
    DriftKind,
    LivePod,
    LiveVolume,
    ModelStatus,
    StatusView,
    VolumeStatus,
    heal_command,
)

URN = "urn:pulumi:s::frutebox-infra::frutebox:index:ModelServer$command:local:Command::m-pod"
UNTRACKED_POD = LivePod("p9", "frutebox-s-m", "RUNNING")
UNTRACKED_VOLUME = LiveVolume("v9", "frutebox-s-weights-tok", 100, "EU-RO-1")


def view(
    drift: DriftKind | None = None,
    *,
    pods: tuple[LivePod, ...] = (),
    volumes: tuple[LiveVolume, ...] = (),
    volume_missing: bool = False,
) -> StatusView:
    model = ModelStatus("m", "frutebox-s-m", "p1", None, None, drift, (), URN)
    # A real plan's placement is not needed for the heal line of a model without one.
    volume = VolumeStatus("v1" if volume_missing else None, None, 20, "EU-RO-1")
    return StatusView("s", (model,), pods, (), volume, (), untracked_volumes=volumes)


@pytest.mark.parametrize(
    ("made", "drifted", "heal"),
    [
        pytest.param(view(), False, None, id="in-sync"),
        pytest.param(view(pods=(UNTRACKED_POD,)), True,
                     "frutebox status --stack s --terminate-untracked", id="untracked-pod"),
        pytest.param(view(volumes=(UNTRACKED_VOLUME,)), True,
                     "frutebox status --stack s --terminate-untracked", id="untracked-volume"),
        pytest.param(view(volume_missing=True), True, None, id="a-missing-volume-has-no-line"),
        # Without a planned placement, the drifted model gets a plain up (nothing to replace).
        pytest.param(view(DriftKind.UNHEALTHY), True, "pulumi up --stack s --yes",
                     id="unhealthy-without-a-plan"),
    ],
)  # fmt: skip
def test_drifted_and_its_heal(made: StatusView, drifted: bool, heal: str | None) -> None:
    assert made.drifted is drifted
    assert heal_command(made) == made.heal == heal
