"""Armed windows on the real engine against the realistic emulator: the program run at times
inside and outside a model's window (FRUTEBOX_NOW) arms and disarms it, its weights stay on the
volume and are not fetched again, and reverting the stack file rolls back."""

from __future__ import annotations

from typing import Any

import pytest

from frutebox_infra.deploy.requests import pod_name, seed_pod_name
from tests.e2e.deployment import SEEDED, Deployment

pytestmark = pytest.mark.engine

STACK = "small"
WINDOW = "Mon-Fri 08:00-20:00 Europe/Berlin"
BASE = {**SEEDED, "models": ["qwen3-8b", "sdxl-1.0"]}
WINDOWED = {**BASE, "overrides": {"sdxl-1.0": {"armedWindow": WINDOW}}}
INSIDE = "2026-12-03T11:00:00+01:00"  # a Thursday in Berlin
OUTSIDE = "2026-12-05T11:00:00+01:00"  # a Saturday


def up_at(deployment: Deployment, when: str) -> str:
    deployment.project.extra_env["FRUTEBOX_NOW"] = when
    proc = deployment.project.up(STACK)
    return proc.stdout + proc.stderr


def live(deployment: Deployment) -> set[str]:
    return {p["name"] for p in deployment.live_pods() if "gpu" in p}


def gpu_pods_named(deployment: Deployment, name: str) -> list[dict[str, Any]]:
    return [p for p in deployment.state()["pods"]
            if p["name"] == name and "gpu" in p and not p["emulator"]["foreign"]]  # fmt: skip


def test_a_window_arms_and_disarms_without_fetching_again_and_a_revert_rolls_back(
    deployment: Deployment,
) -> None:
    project = deployment.project
    sdxl, qwen = pod_name(STACK, "sdxl-1.0"), pod_name(STACK, "qwen3-8b")
    project.write_stack(STACK, WINDOWED)
    out = up_at(deployment, INSIDE)
    assert "armed now, until Thu 2026-12-03 20:00 CET" in out
    assert live(deployment) == {sdxl, qwen}
    seeds = [b["name"] for b in deployment.seed_bodies()]
    assert seeds.count(seed_pod_name(STACK, "sdxl-1.0")) == 1

    # Saturday: sdxl has no pod; qwen3-8b, without a window, is untouched.
    out = up_at(deployment, OUTSIDE)
    assert "not armed now (no pod; its weights stay on the volume), until Mon 2026-12-07" in out
    assert live(deployment) == {qwen}
    pods = project.outputs(STACK)["pods"]
    assert pods["sdxl-1.0"]["armed"] is False and pods["sdxl-1.0"]["podId"] == ""
    assert len(gpu_pods_named(deployment, qwen)) == 1  # never replaced
    [volume] = deployment.volumes()
    files = set(volume["files"])

    # Back inside: a new pod reads the weights off the volume; nothing is seeded or fetched.
    up_at(deployment, INSIDE)
    assert live(deployment) == {sdxl, qwen}
    assert [b["name"] for b in deployment.seed_bodies()] == seeds
    rearmed = gpu_pods_named(deployment, sdxl)[-1]
    lines = [line for _, line in rearmed["emulator"]["logs"]]
    assert not any(line.startswith("downloading") for line in lines), lines
    assert set(deployment.volumes()[0]["files"]) == files

    # Reverting the stack file (no window) rolls back: armed whatever the time.
    project.write_stack(STACK, BASE)
    out = up_at(deployment, OUTSIDE)
    assert "armed windows" not in out
    assert live(deployment) == {sdxl, qwen}
    assert "armed" not in project.outputs(STACK)["pods"]["sdxl-1.0"]
