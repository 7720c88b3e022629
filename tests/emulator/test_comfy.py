"""The emulated ComfyUI lists exactly what its provisioning script downloads, per kind."""

from __future__ import annotations

import pytest

from frutebox_infra.emulator.comfy import models_listing
from frutebox_infra.recipes.comfyui import provisioning_script
from tests.factories import real_registry


def body(model_id: str) -> dict[str, object]:
    m = real_registry().model(model_id)
    assert m is not None
    return {"env": {"FRUTEBOX_PROVISION": provisioning_script(m)}}


@pytest.mark.parametrize(
    ("path", "names"),
    [
        ("/models/checkpoints", ["stable_audio_open_1.0.safetensors"]),
        ("/models/text_encoders", ["t5_base.safetensors"]),
        ("/models/vae", []),
    ],
)
def test_lists_the_files_the_script_fetches(path: str, names: list[str]) -> None:
    assert models_listing(body("stable-audio-open-1.0"), path) == names


def test_wan_lists_both_experts_under_diffusion_models() -> None:
    assert models_listing(body("wan-2.2"), "/models/diffusion_models") == [
        "wan2.2_t2v_high_noise_14B_fp8_scaled.safetensors",
        "wan2.2_t2v_low_noise_14B_fp8_scaled.safetensors",
    ]


@pytest.mark.parametrize(
    ("pod_body", "path"),
    [
        pytest.param(
            {"env": {"OLLAMA_HOST": "0.0.0.0:11434"}}, "/models/checkpoints", id="not-comfy"
        ),
        pytest.param(body("sdxl-1.0"), "/system_stats", id="not-a-listing-path"),
    ],
)
def test_other_pods_and_paths_are_not_listings(pod_body: dict[str, object], path: str) -> None:
    assert models_listing(pod_body, path) is None
