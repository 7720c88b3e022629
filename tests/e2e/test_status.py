"""`frutebox status` on the real engine against the emulator: in sync, drift, heal, in sync."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.deployment import API_KEY, SMALL, Deployment
from tests.e2e.project import PulumiProject
from tests.emulator_client import LOOPBACK

pytestmark = pytest.mark.engine

STACK = "small"
CONFIG = {**SMALL, "models": ["qwen3-8b", "llama-3.2-1b"]}


def deployed(project: PulumiProject) -> Iterator[Deployment]:
    running = Deployment.start(project)
    project.write_stack(STACK, CONFIG)
    project.up(STACK)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, toolchain: Path) -> Iterator[Deployment]:
    """One `pulumi up` of the stack, shared by the tests of this module that ask for it (per
    worker): each heals what it broke and sees status in sync again, so the next one starts
    from the stack as deployed."""
    yield from deployed(PulumiProject.create(tmp_path_factory.mktemp("status")))


@pytest.fixture
def own_deployment(project: PulumiProject) -> Iterator[Deployment]:
    """The stack deployed for one test alone: for a test that rewrites the stack file."""
    yield from deployed(project)


def status(
    project: PulumiProject, *extra: str, stack: str = STACK, **env: str
) -> tuple[int, dict[str, Any], str]:
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "frutebox_infra", "status", "--stack", stack),
            *("--format", "json", "--project-dir", str(project.root), *extra),
        ],
        env={**project.env, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    data = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    return proc.returncode, data, proc.stderr


def heal(project: PulumiProject, command: str) -> None:
    proc = subprocess.run(
        ["bash", "-c", command],
        cwd=project.root,
        env={**project.env, "PATH": f"{sys.prefix}/bin:{project.env['PATH']}"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def pod_id(data: dict[str, Any], model: str) -> str:
    return str(next(m for m in data["models"] if m["model"] == model)["recordedPodId"])


def drift(data: dict[str, Any]) -> dict[str, str | None]:
    return {m["model"]: m["drift"] for m in data["models"]}


def control(deployment: Deployment, method: str, path: str, body: Any = None) -> None:
    url = f"{deployment.emulator.url}/_emulator/{path}"
    LOOPBACK.request(method, url, json=body, timeout=10).raise_for_status()


def test_terminated_out_of_band_then_healed(deployment: Deployment) -> None:
    project = deployment.project
    code, data, err = status(project)
    assert code == 0, err
    assert data["inSync"] and data["heal"] is None
    assert {m["live"]["status"] for m in data["models"]} == {"RUNNING"}
    assert all(m["healthy"] for m in data["models"])
    assert data["volume"]["sizeGb"] and not data["volume"]["missing"]

    control(deployment, "POST", f"pods/{pod_id(data, 'qwen3-8b')}/terminate")
    code, data, _ = status(project)
    assert code == 3
    assert drift(data) == {"qwen3-8b": "missing", "llama-3.2-1b": None}
    assert "qwen3-8b-pod" in data["heal"] and data["heal"].startswith("pulumi up --stack small")

    heal(project, data["heal"])
    code, data, err = status(project)
    assert code == 0, err
    assert drift(data) == {"qwen3-8b": None, "llama-3.2-1b": None}

    # RunPod unreachable: an API problem, exit 1, and no traceback.
    code, _, err = status(project, RUNPOD_API_URL="http://127.0.0.1:1")
    assert code == 1 and "Traceback" not in err


def test_edited_and_stopped_pods_then_healed(deployment: Deployment) -> None:
    project = deployment.project
    _, data, _ = status(project)
    control(deployment, "PATCH", f"pods/{pod_id(data, 'llama-3.2-1b')}", {"args": "serve -v"})
    control(deployment, "POST", f"pods/{pod_id(data, 'qwen3-8b')}/stop")

    code, data, _ = status(project)
    assert code == 3
    assert drift(data) == {"qwen3-8b": "stopped", "llama-3.2-1b": "changed"}
    # The realistic account holds someone else's pods named like ours: listed, never ours.
    assert data["untracked"] == []
    foreign = {p["id"] for p in data["foreign"]}

    heal(project, data["heal"])
    code, data, err = status(project)
    assert code == 0, err
    assert {p["id"] for p in data["foreign"]} == foreign  # the heal left them alone


def test_a_foreign_same_named_pod_is_listed_and_untouched(deployment: Deployment) -> None:
    # The realistic account holds someone else's pods named like this stack's (no token of
    # ours, not on our volume): status lists them and never touches them.
    touched = len(deployment.requests("pods.update")) + len(deployment.requests("pods.delete"))

    # The key from the stack's secret config, as `up` uses it, when none is exported.
    deployment.project.pulumi(
        "config", "set", "--secret", "frutebox-infra:runpodApiKey", API_KEY, "--stack", STACK
    )
    code, data, err = status(deployment.project, RUNPOD_API_KEY="")
    assert code == 0, err  # someone else's pod is not our drift
    foreign = {p["id"]: p["name"] for p in data["foreign"]}
    assert foreign and set(foreign.values()) <= {f"frutebox-small-{m}" for m in CONFIG["models"]}
    assert not set(foreign) & {m["recordedPodId"] for m in data["models"]}
    after = len(deployment.requests("pods.update")) + len(deployment.requests("pods.delete"))
    assert after == touched  # status itself never writes
    again = status(deployment.project)[1]
    assert {p["id"] for p in again["foreign"]} == set(foreign)


def test_status_reads_the_api_the_stack_points_at(own_deployment: Deployment) -> None:
    # Nothing exported: the stack's own runpodApiUrl is where status looks, as `up` would.
    deployment = own_deployment
    project = deployment.project
    project.write_stack(STACK, {**CONFIG, "runpodApiUrl": f"{deployment.emulator.url}/v2"})
    listed = len(deployment.requests("pods.list"))
    code, data, err = status(project, RUNPOD_API_URL="")
    assert code == 0, err
    assert data["inSync"] and {m["live"]["status"] for m in data["models"]} == {"RUNNING"}
    assert len(deployment.requests("pods.list")) > listed  # it read this emulator

    # The environment still wins over the stack: an exported URL is the one read.
    code, _, err = status(project, RUNPOD_API_URL="http://127.0.0.1:1")
    assert code == 1 and "127.0.0.1:1" in err and "Traceback" not in err


def test_a_pod_whose_host_died_is_unhealthy_and_the_printed_heal_makes_it_healthy(
    deployment: Deployment,
) -> None:
    project = deployment.project
    _, data, _ = status(project)
    dead = pod_id(data, "qwen3-8b")
    control(deployment, "POST", f"pods/{dead}/kill-host")
    # RunPod still says RUNNING, and bills: only the health probes see it serves nothing.
    code, data, _ = status(project, "--health-window", "0.5")
    assert code == 3
    assert drift(data) == {"qwen3-8b": "unhealthy", "llama-3.2-1b": None}
    qwen = next(m for m in data["models"] if m["model"] == "qwen3-8b")
    assert qwen["live"]["status"] == "RUNNING" and qwen["healthy"] is False
    assert "failed all 3 probes" in qwen["details"][0]
    assert "--replace" in data["heal"] and "qwen3-8b-pod" in data["heal"]
    heal(project, data["heal"])
    code, data, err = status(project, "--health-window", "0.5")
    assert code == 0, err
    assert pod_id(data, "qwen3-8b") != dead and all(m["healthy"] for m in data["models"])
