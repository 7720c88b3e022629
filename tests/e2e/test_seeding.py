"""Seeding on the real engine against the realistic emulator: each model's weights come from a
CPU pod onto the volume before its GPU pod exists, and the GPU pod reads them from there."""

from __future__ import annotations

import dataclasses
import json
import signal
from typing import Any

import pytest

from frutebox_infra.catalog.schema import Runtime
from frutebox_infra.deploy.requests import pod_name, seed_pod_name
from frutebox_infra.emulator.transfers import Transfers
from tests.e2e.deployment import HF_TOKEN, SEEDED, TRANSFERS, Deployment
from tests.e2e.processes import gone_within, new_marker, wait_for
from tests.emulator_client import requests
from tests.factories import SECRET_SIG, SECRET_SIG_VALUE, real_registry

pytestmark = pytest.mark.engine

MODELS = ["qwen3-8b", "sdxl-1.0", "qwen-3.6-27b"]
"""Ollama, ComfyUI and SGLang: a model store, a models folder and a Hugging Face cache."""
SDXL_REPO = "stabilityai/stable-diffusion-xl-base-1.0"
SDXL_FILE = "sd_xl_base_1.0.safetensors"
_GATEWAY = real_registry().gateway
_OLLAMA = real_registry().images[Runtime.OLLAMA]
assert _GATEWAY is not None and _OLLAMA.engine_archive is not None
GATEWAY_ARCHIVE = f"frutebox/gateway/{_GATEWAY.name}-{_GATEWAY.version}.tar.gz"
OLLAMA_ARCHIVE = (
    f"frutebox/engines/ollama-{_OLLAMA.engine_version}-{_OLLAMA.engine_archive.file_name}"
)


def _pods(deployment: Deployment) -> dict[str, dict[str, Any]]:
    """Every pod of ours the account ever held, by name (the last one of each name)."""
    return {p["name"]: p for p in deployment.state()["pods"] if not p["emulator"]["foreign"]}


def test_up_seeds_from_cpu_pods_and_the_gpu_pods_find_their_weights(
    deployment: Deployment,
) -> None:
    project = deployment.project
    project.write_stack("small", {**SEEDED, "models": MODELS})
    project.up("small")

    names = [r["body"]["name"] for r in requests(deployment.emulator, "pods.create")
             if r.get("status") == 201]  # fmt: skip
    pods = _pods(deployment)
    for model in MODELS:
        seed, gpu = seed_pod_name("small", model), pod_name("small", model)
        # The CPU pod came first, mounted our volume, and is gone; the GPU pod serves.
        assert names.index(seed) < names.index(gpu), names
        assert pods[seed]["status"] == "TERMINATED" and "cpu" in pods[seed]
        assert pods[seed]["mounts"] == pods[gpu]["mounts"]
        assert pods[gpu]["status"] == "RUNNING"
        logs = _lines(pods[gpu])
        assert not any(line.startswith("downloading") for line in logs), logs
    # SGLang loads offline and gets no token; Ollama finds its tag in its store, no pull.
    sglang = pods[pod_name("small", "qwen-3.6-27b")]
    assert sglang["env"]["HF_HUB_OFFLINE"] == "1" and "HF_TOKEN" not in sglang["env"]
    assert "weights found on the volume; loading" in _lines(sglang)
    pulls = [r for r in requests(deployment.emulator, "proxy") if r["path"] == "/api/pull"]
    assert pulls == []
    # What the weights are on: the volume, which the emulator keeps across pods.
    [volume] = [v for v in deployment.state()["volumes"] if not v["foreign"]]
    assert any("models--Qwen--Qwen3.6-27B-FP8/snapshots/" in f for f in volume["files"])
    assert any(f.endswith(f"checkpoints/{SDXL_FILE}") for f in volume["files"])
    # And the releases the GPU pods' launches check, placed by the seeds: those launches only
    # check them (a missing one would be a crash loop), and every GPU pod serves.
    assert {GATEWAY_ARCHIVE, OLLAMA_ARCHIVE} <= set(volume["files"])
    # The seeding pods billed as CPU, at the flavor's price, only while they lived.
    billing = deployment.state()["pods"]
    cpu_rates = {p["emulator"]["billed"][0][2] for p in billing if "cpu" in p}
    assert cpu_rates == {0.06}
    # The plan output carries the bring-up it promised.
    bringup = {m["id"]: m["bringup"] for m in project.outputs("small")["plan"]["models"]}
    assert all(b["seeded"] for b in bringup.values())


def test_a_second_up_after_disarming_and_rearming_seeds_nothing(deployment: Deployment) -> None:
    project = deployment.project
    project.write_stack("small", {**SEEDED, "models": ["qwen3-8b", "sdxl-1.0"]})
    project.up("small")
    project.write_stack("small", {**SEEDED, "models": ["qwen3-8b"]})
    project.up("small")
    assert pod_name("small", "sdxl-1.0") not in {p["name"] for p in deployment.live_pods()}
    before = len(deployment.seed_bodies())

    project.write_stack("small", {**SEEDED, "models": ["qwen3-8b", "sdxl-1.0"]})
    project.up("small")

    seeds = deployment.seed_bodies()
    assert [b["name"] for b in seeds[before:]] == [seed_pod_name("small", "sdxl-1.0")]
    last = [p for p in deployment.state()["pods"] if p["name"] == seeds[-1]["name"]][-1]
    # Every file was already complete on the volume: nothing to fetch, nothing fetched.
    pieces = last["emulator"]["transfer"]["pieces"]
    assert pieces and all(start == size for _, size, start in pieces)
    sdxl = _pods(deployment)[pod_name("small", "sdxl-1.0")]
    assert sdxl["status"] == "RUNNING"
    assert "weights found on the volume; loading" in _lines(sdxl)


def test_a_missing_file_fails_its_model_before_any_gpu_pod_and_nothing_bills(
    deployment: Deployment,
) -> None:
    deployment.hub(repo=SDXL_REPO, removeFile=SDXL_FILE)
    deployment.project.write_stack("small", {**SEEDED, "models": ["sdxl-1.0"]})
    proc = deployment.project.up("small", check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"Seeding sdxl-1.0 failed: {SDXL_FILE} does not exist in {SDXL_REPO}" in output
    assert "Fix: correct the file in the model's source in registry/models.yaml" in output
    assert deployment.created_bodies() == []  # no GPU pod, ever
    assert [b["name"] for b in deployment.seed_bodies()] == [seed_pod_name("small", "sdxl-1.0")]
    assert deployment.live_pods() == []
    assert "Traceback" not in output


def test_a_release_that_does_not_match_its_pin_fails_the_seed_before_any_gpu_pod(
    deployment: Deployment,
) -> None:
    gateway = real_registry().gateway
    assert gateway is not None
    deployment.hub(releaseUrl=gateway.url, tamper=True)
    deployment.project.write_stack("small", {**SEEDED, "models": ["qwen3-8b"]})
    proc = deployment.project.up("small", check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert (
        f"Seeding qwen3-8b failed: the release {gateway.url} does not match its pinned sha512"
    ) in output
    assert "registry/images.yaml" in output
    assert deployment.created_bodies() == []  # no GPU pod, ever
    assert deployment.live_pods() == []
    assert "Traceback" not in output


def test_sigint_while_seeding_leaves_nothing_billing(project: Any) -> None:
    # A slow link keeps the CPU pod seeding long enough to interrupt it.
    deployment = Deployment.start(project, transfers=_slow())
    try:
        marker = new_marker()
        project.extra_env.update(marker)
        project.write_stack("small", {**SEEDED, "models": ["sdxl-1.0"]})
        project.init("small")
        up = project.start_up("small")
        try:
            wait_for("the seeder's status reads", lambda: _status_reads(deployment) > 0)
            assert [p["name"] for p in deployment.live_pods()] == [
                seed_pod_name("small", "sdxl-1.0")
            ]
            up.send_signal(signal.SIGINT)
            output, _ = up.communicate(timeout=120)
        finally:
            if up.poll() is None:
                up.kill()
        assert up.returncode != 0
        assert deployment.live_pods() == [], output[-3000:]
        assert deployment.created_bodies() == []
        assert "Traceback" not in output and "KeyboardInterrupt" not in output, output[-3000:]
        assert gone_within(marker, 20) == []
    finally:
        deployment.stop()


def test_rolling_back_a_seeded_model_by_revert(deployment: Deployment) -> None:
    project = deployment.project
    project.write_stack("small", {**SEEDED, "models": ["qwen3-8b"]})
    project.up("small")
    saved = project.stack_path("small").read_text()
    [kept] = deployment.live_pods()

    project.write_stack("small", {**SEEDED, "models": ["qwen3-8b", "sdxl-1.0"]})
    preview = project.preview("small")
    assert sorted(u.rsplit("::", 1)[1] for u in preview.urns("create")) == [
        "sdxl-1.0", "sdxl-1.0-pod", "sdxl-1.0-seed"
    ]  # fmt: skip
    project.up("small")
    seeds = len(deployment.seed_bodies())

    project.stack_path("small").write_text(saved)
    project.up("small")

    assert [p["id"] for p in deployment.live_pods()] == [kept["id"]]
    assert len(deployment.seed_bodies()) == seeds  # a revert seeds nothing
    # The weights stay on the volume: re-arming finds them.
    [volume] = [v for v in deployment.state()["volumes"] if not v["foreign"]]
    assert any(f.endswith(f"checkpoints/{SDXL_FILE}") for f in volume["files"])


def test_with_seeding_off_preview_shows_no_seed_and_gpu_pods_download(
    deployment: Deployment,
) -> None:
    project = deployment.project
    project.write_stack("small", {**SEEDED, "seeding": False, "models": ["sdxl-1.0"]})
    preview = project.preview("small")
    assert not [u for u in preview.urns("create") if u.endswith("-seed")]
    assert "seeding is off" in json.dumps(preview.outputs)
    project.up("small")
    assert deployment.seed_bodies() == []
    sdxl = _pods(deployment)[pod_name("small", "sdxl-1.0")]
    assert any(line.startswith("downloading") for line in _lines(sdxl))


def test_a_gated_model_seeds_with_the_token_that_never_reaches_state_or_logs(
    deployment: Deployment,
) -> None:
    project = deployment.project
    project.extra_env["HF_TOKEN"] = HF_TOKEN
    project.write_stack("gated", {**SEEDED, "models": ["stable-audio-open-1.0"]})
    up = project.up("gated")
    exported = project.pulumi("stack", "export", "--stack", "gated").stdout
    seen = "\n".join([up.stdout, up.stderr, exported, project.state_text()])
    assert HF_TOKEN not in seen
    [seed] = deployment.seed_bodies()
    assert seed["env"]["HF_TOKEN"] == HF_TOKEN  # filled in by the step, at the last moment
    commands = [r for r in json.loads(exported)["deployment"]["resources"]
                if r["type"] == "command:local:Command"]  # fmt: skip
    assert {c["urn"].rsplit("::", 1)[1] for c in commands} >= {"stable-audio-open-1.0-seed"}
    for command in commands:
        assert command["outputs"]["stderr"].get(SECRET_SIG) == SECRET_SIG_VALUE


def _lines(pod: dict[str, Any]) -> list[str]:
    """The pod's container log, as the emulator keeps it ([source, line] entries)."""
    return [line for source, line in pod["emulator"]["logs"] if source == "container"]


def _slow() -> Transfers:
    return dataclasses.replace(TRANSFERS, download_mb_per_s=1.0)


def _status_reads(deployment: Deployment) -> int:
    return len([r for r in requests(deployment.emulator, "proxy") if r["path"] == "/status"
                and r["status"] == 200])  # fmt: skip
