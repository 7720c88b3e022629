"""Preview's live line on the real engine: warnings from the emulator, no key, a silent RunPod."""

from __future__ import annotations

import socket

import pytest

from tests.e2e.deployment import SMALL, Deployment
from tests.e2e.project import PulumiProject
from tests.emulator_client import LOOPBACK

pytestmark = pytest.mark.engine

STACK = "small"
CONFIG = {**SMALL, "models": ["qwen3-8b"]}
A4000 = "NVIDIA RTX A4000"


def test_price_and_stock_warnings_from_a_live_catalog(project: PulumiProject) -> None:
    project.write_stack(STACK, CONFIG)
    deployment = Deployment.start(project)
    try:
        quiet = project.preview(STACK)
        assert quiet.code == 0, quiet.stderr
        assert "live: RunPod catalog read" in quiet.diagnostics
        # The account holds a foreign pod with our name (named, never touched); nothing else.
        assert "1 warning(s)" in quiet.diagnostics
        assert "foreign: qwen3-8b: 1 pod(s) named frutebox-small-qwen3-8b" in quiet.diagnostics
        control = f"{deployment.emulator.url}/_emulator"
        LOOPBACK.post(f"{control}/prices", json={"gpuId": A4000, "secure": 0.25}).raise_for_status()
        LOOPBACK.post(f"{control}/stock", json={"gpuId": A4000, "available": 0}).raise_for_status()
        loud = project.preview(STACK)
        assert loud.code == 0, loud.stderr
        assert "RTX A4000 is $0.25/h per GPU on RunPod Secure now" in loud.diagnostics
        assert "$0.17/h" in loud.diagnostics
        assert "qwen3-8b: 1x RTX A4000 is out of stock in EU-RO-1 right now" in loud.diagnostics
        assert "would take 1x RTX A5000" in loud.diagnostics
        ops = {r["op"] for r in LOOPBACK.get(f"{control}/state").json()["requests"]}
        assert ops == {
            "catalog.gpus",
            "catalog.datacenters",
            "pods.list",
            "volumes.list",
        }  # read-only, nothing created
    finally:
        deployment.stop()


def test_without_a_key_one_dated_registry_line(project: PulumiProject) -> None:
    project.write_stack(STACK, CONFIG)
    preview = project.preview(STACK)
    assert preview.code == 0, preview.stderr
    assert "live: no RunPod key, nothing live was read" in preview.diagnostics
    assert "prices dated 2026-08" in preview.diagnostics


def test_a_runpod_that_does_not_answer_still_previews(project: PulumiProject) -> None:
    project.write_stack(STACK, CONFIG)
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        project.extra_env.update(
            RUNPOD_API_KEY="rk-silent-5c2e",
            RUNPOD_API_URL=f"http://127.0.0.1:{silent.getsockname()[1]}",
        )
        preview = project.preview(STACK)
    assert preview.code == 0, preview.stderr
    assert "RunPod did not answer within 4 s" in preview.diagnostics
    assert "rk-silent-5c2e" not in preview.diagnostics + preview.stderr


def test_a_stopped_pod_of_the_stack_is_a_drift_warning(project: PulumiProject) -> None:
    project.write_stack(STACK, CONFIG)
    deployment = Deployment.start(project)
    try:
        project.up(STACK)
        [pod] = deployment.live_pods()
        control = f"{deployment.emulator.url}/_emulator"
        LOOPBACK.post(f"{control}/pods/{pod['id']}/stop").raise_for_status()
        preview = project.preview(STACK)
        assert preview.code == 0, preview.stderr
        assert f"drift: qwen3-8b: pod {pod['id']} is EXITED (stopped)" in preview.diagnostics
    finally:
        deployment.stop()


def test_a_foreign_pod_with_our_name_is_named_by_preview_and_left_alone(
    project: PulumiProject,
) -> None:
    # The realistic account already holds someone else's `frutebox-dev-<model>` pods.
    project.write_stack("dev", CONFIG)
    deployment = Deployment.start(project)
    try:
        preview = project.preview("dev")
        assert preview.code == 0, preview.stderr
        assert "foreign: qwen3-8b: 1 pod(s) named frutebox-dev-qwen3-8b" in preview.diagnostics
        control = f"{deployment.emulator.url}/_emulator"
        ops = {r["op"] for r in LOOPBACK.get(f"{control}/state").json()["requests"]}
        assert "pods.delete" not in ops and "pods.create" not in ops
    finally:
        deployment.stop()
