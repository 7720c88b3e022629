"""A ComfyUI pod is healthy only when it lists every weights file it needs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from frutebox_infra.deploy.requests import pod_request
from frutebox_infra.emulator.server import RunningEmulator
from frutebox_infra.planner.plan import plan_fleet
from frutebox_infra.runpod.listing import missing_files
from tests.emulator_client import live_pods, place_releases
from tests.factories import real_registry, settings
from tests.runpod.command import env_for, run, volume
from tests.runpod.conftest import OWNER

BASE = "https://pod-8188.proxy.test"
EXPECTED = ("checkpoints/a.safetensors", "text_encoders/t5.safetensors")


def answers(listing: dict[str, Any]) -> Any:
    def get_json(url: str) -> Any:
        return listing.get(url.removeprefix(BASE))

    return get_json


@pytest.mark.parametrize(
    ("listing", "missing"),
    [
        pytest.param(
            {"/models/checkpoints": ["a.safetensors"], "/models/text_encoders": ["t5.safetensors"]},
            [],
            id="all-listed",
        ),
        pytest.param(
            {"/models/checkpoints": ["a.safetensors"], "/models/text_encoders": []},
            ["text_encoders/t5.safetensors"],
            id="one-missing",
        ),
        pytest.param(
            # ai-dock's placeholder answers every GET with 200 and a page, not a listing.
            {"/models/checkpoints": {"status": "ok"}, "/models/text_encoders": "<html>"},
            list(EXPECTED),
            id="placeholder-lists-nothing",
        ),
        pytest.param({}, list(EXPECTED), id="no-answer"),
    ],
)
def test_missing_files(listing: dict[str, Any], missing: list[str]) -> None:
    assert missing_files(answers(listing), BASE, EXPECTED) == missing


def comfy_request(emulator: RunningEmulator, model_id: str) -> dict[str, Any]:
    plan = plan_fleet(
        real_registry(),
        settings(models=[model_id], hfToken={"secure": "v1:configured"}),
        stack="dev",
    )
    model_plan = plan.model(model_id)
    assert model_plan is not None and model_plan.placement is not None, plan.problems
    volume_id = volume(emulator)
    place_releases(emulator, volume_id, model_plan.placement.pod)
    request = pod_request(model_plan, plan.settings, stack="dev", volume_id=volume_id, owner=OWNER)
    data: dict[str, Any] = json.loads(request.to_json())
    return data


def test_a_comfyui_pod_that_lists_its_weights_is_healthy(emulator: RunningEmulator) -> None:
    request = comfy_request(emulator, "stable-audio-open-1.0")
    assert request["health"]["expectedFiles"] == [
        "checkpoints/stable_audio_open_1.0.safetensors",
        "text_encoders/t5_base.safetensors",
    ]
    done = run("pod create", request, env=env_for(emulator))
    assert done.code == 0, done.err
    assert len(live_pods(emulator)) == 1


def test_a_comfyui_pod_missing_a_file_never_counts_as_healthy(emulator: RunningEmulator) -> None:
    request = comfy_request(emulator, "sdxl-1.0")
    # The server answers /system_stats, but nothing put this file on the volume.
    request["health"]["expectedFiles"].append("vae/never_downloaded.safetensors")
    done = run("pod create", request, env=env_for(emulator, FRUTEBOX_HEALTH_TIMEOUT_S="0.3"))
    assert done.code != 0
    assert "never listed vae/never_downloaded.safetensors" in done.err
    assert live_pods(emulator) == []  # the pod it created is not left billing
