"""ComfyUI: a command for an image without ENTRYPOINT, and idempotent downloads to the volume."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from frutebox_infra.recipes.comfyui import MODELS_DIR, ComfyUI, provisioning_script
from frutebox_infra.registry import Model, Runtime
from frutebox_infra.resolver import resolve
from tests.factories import model, real_images, real_registry, registry, words
from tests.recipes.conftest import BuildPod

A5000 = "NVIDIA RTX A5000"
COMFY_MODELS = (
    "sdxl-1.0",
    "stable-audio-open-1.0",
    "qwen-image-20b",
    "ace-step-v1-3.5b",
    "wan-2.2",
)


def fetches(m: Model) -> list[tuple[str, str, str]]:
    """(folder path, stored name, URL) of every download line in the provisioning script."""
    out = []
    for line in provisioning_script(m).splitlines()[1:]:
        split = words(line)
        assert split[0] == "fetch" and split[4:] == ["||", "exit", "1"], line
        out.append((split[1], split[2], split[3]))
    return out


def catalog_model(model_id: str) -> Model:
    m = real_registry().model(model_id)
    assert m is not None
    return m


@pytest.mark.parametrize("model_id", COMFY_MODELS)
def test_args_run_in_bash_and_end_by_execing_the_image_init(
    build_pod: BuildPod, model_id: str
) -> None:
    pod = build_pod(model_id, Runtime.COMFYUI, A5000, 1, hf_token_configured=True)
    split = words(pod.args)
    assert split[:2] == ["bash", "-c"] and len(split) == 3
    assert split[2].rstrip().endswith("exec init.sh")
    assert subprocess.run(["bash", "-n", "-c", split[2]], check=False).returncode == 0
    assert (
        subprocess.run(["bash", "-n", "-c", pod.env["FRUTEBOX_PROVISION"]], check=False).returncode
        == 0
    )
    assert pod.image.startswith("ghcr.io/ai-dock/comfyui:")
    assert (pod.port, pod.health_path) == (8188, "/system_stats")


@pytest.mark.parametrize("model_id", COMFY_MODELS)
def test_every_file_lands_flat_in_its_models_folder(model_id: str) -> None:
    m = catalog_model(model_id)
    recipe = m.source.comfyui  # type: ignore[union-attr]
    got = fetches(m)
    assert len(got) == len(recipe.files)  # type: ignore[union-attr]
    for (folder, name, url), file in zip(got, recipe.files, strict=True):  # type: ignore[union-attr]
        assert folder == f"/workspace/ComfyUI/models/{file.folder}"
        assert "/" not in name
        assert name == (file.rename or file.path.rsplit("/", 1)[-1])
        assert url.endswith("/" + file.path)


def test_stable_audio_is_renamed_so_it_cannot_be_clobbered() -> None:
    [(folder, name, url), (t5_folder, t5_name, t5_url)] = fetches(
        catalog_model("stable-audio-open-1.0")
    )
    assert (folder, name) == (f"{MODELS_DIR}/checkpoints", "stable_audio_open_1.0.safetensors")
    assert url.startswith("https://huggingface.co/stabilityai/stable-audio-open-1.0/resolve/")
    assert url.endswith("/model.safetensors")
    # Its workflow's text encoder is T5-base, published in its own repository.
    assert (t5_folder, t5_name) == (f"{MODELS_DIR}/text_encoders", "t5_base.safetensors")
    assert t5_url == "https://huggingface.co/google-t5/t5-base/resolve/main/model.safetensors"


@pytest.mark.parametrize(
    ("model_id", "repo", "revision"),
    [
        pytest.param(
            "qwen-image-20b",
            "Comfy-Org/Qwen-Image_ComfyUI",
            "1f12b17be14c89b026c51a91d67c32f84bb047bc",
            id="qwen-image",
        ),
        pytest.param(
            "ace-step-v1-3.5b",
            "Comfy-Org/ACE-Step_ComfyUI_repackaged",
            "e39503e8265a02363b8c6d3fed3732944f4fc67f",
            id="ace-step",
        ),
        pytest.param(
            "wan-2.2",
            "Comfy-Org/Wan_2.2_ComfyUI_Repackaged",
            "ee6f4a40737a995bf5818954cfce6d59443b0f04",
            id="wan",
        ),
    ],
)
def test_repackaged_files_come_from_the_repackaging_at_its_revision(
    model_id: str, repo: str, revision: str
) -> None:
    for _, _, url in fetches(catalog_model(model_id)):
        assert url.startswith(f"https://huggingface.co/{repo}/resolve/{revision}/")


def test_stored_names_never_collide_on_the_shared_volume() -> None:
    seen: dict[str, str] = {}
    for model_id in COMFY_MODELS:
        for folder, name, url in fetches(catalog_model(model_id)):
            target = f"{folder}/{name}"
            assert seen.setdefault(target, url) == url, f"{target} is written by two sources"


def test_download_is_guarded_and_fails_loudly() -> None:
    script = provisioning_script(catalog_model("sdxl-1.0"))
    assert '[ -s "$1/$2" ]' in script
    assert "curl -f" in script
    assert all(line.endswith("|| exit 1") for line in script.splitlines()[1:])


def test_caches_and_workspace_live_on_the_volume(build_pod: BuildPod) -> None:
    env = build_pod("sdxl-1.0", Runtime.COMFYUI, A5000, 1).env
    assert env["HF_HOME"].startswith("/workspace/")
    assert env["WORKSPACE"] == "/workspace"


@pytest.mark.parametrize(
    ("model_id", "secret_env"),
    [
        pytest.param("stable-audio-open-1.0", ("HF_TOKEN",), id="gated"),
        pytest.param("sdxl-1.0", (), id="open"),
        pytest.param("qwen-image-20b", (), id="open-repackaging"),
    ],
)
def test_only_a_gated_download_asks_for_the_token(
    build_pod: BuildPod, model_id: str, secret_env: tuple[str, ...]
) -> None:
    assert build_pod(model_id, Runtime.COMFYUI, A5000, 1, hf_token_configured=True).secret_env == (
        secret_env
    )


@pytest.mark.parametrize(
    ("original_gated", "repack_gated", "gated"),
    [
        pytest.param(True, False, False, id="open-repackaging-of-gated-original"),
        pytest.param(False, True, True, id="gated-repackaging"),
    ],
)
def test_gating_follows_the_repo_the_files_come_from(
    original_gated: bool, repack_gated: bool, gated: bool
) -> None:
    m = model(
        "repack",
        capability="image",
        runtimes=["comfyui"],
        source={
            "hf_repo": "orig/x",
            "gated": original_gated,
            "comfyui": {
                "repo": "re/x",
                "revision": "c" * 40,
                "gated": repack_gated,
                "files": [{"path": "a/x.safetensors", "folder": "checkpoints"}],
            },
        },
        weights={"vram_gb": 8, "disk_gb": 4},
    )
    assert ComfyUI().gated_pull(m) is gated


def test_a_comfyui_model_without_a_file_list_is_missing_its_recipe() -> None:
    reason = ComfyUI().missing(catalog_model("flux.1-schnell"))
    assert reason is not None and "source.comfyui" in reason


@pytest.mark.parametrize(
    ("count", "ok"), [pytest.param(1, True, id="one"), pytest.param(2, False, id="two")]
)
def test_a_pipeline_runs_on_one_gpu(count: int, ok: bool) -> None:
    assert (ComfyUI().count_problem(catalog_model("sdxl-1.0"), count) is None) is ok


# ---- the provisioning script, run for real against a stand-in curl ----------------------------

FAKE_CURL = """#!/bin/sh
echo "$*" >> "$CURL_LOG"
out=""; url=""
while [ $# -gt 0 ]; do
  case "$1" in
    -o) out="$2"; shift 2 ;;
    *) url="$1"; shift ;;
  esac
done
[ -n "$FAKE_CURL_FAIL" ] && exit 22
printf '%s' "$url" > "$out"
"""


def run_script(tmp_path: Path, script: str, *, fail: bool = False, token: str = "") -> int:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    curl = bin_dir / "curl"
    curl.write_text(FAKE_CURL)
    curl.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "CURL_LOG": str(tmp_path / "curl.log"),
    }
    if fail:
        env["FAKE_CURL_FAIL"] = "1"
    if token:
        env["HF_TOKEN"] = token
    local = script.replace(MODELS_DIR, str(tmp_path / "models"))
    return subprocess.run(["bash", "-c", local], env=env, check=False).returncode


def curl_calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "curl.log"
    return log.read_text().splitlines() if log.exists() else []


def test_script_downloads_each_file_once_then_skips(tmp_path: Path) -> None:
    m = catalog_model("wan-2.2")
    script = provisioning_script(m)
    assert run_script(tmp_path, script) == 0
    for file in m.source.comfyui.files:  # type: ignore[union-attr]
        stored = tmp_path / "models" / file.folder / file.stored_name
        assert stored.read_text().endswith(file.path)
    assert len(curl_calls(tmp_path)) == 4
    # Second boot: every file is there and non-empty, so nothing is fetched, even if the
    # network is down.
    assert run_script(tmp_path, script, fail=True) == 0
    assert len(curl_calls(tmp_path)) == 4


def test_an_empty_leftover_is_fetched_again(tmp_path: Path) -> None:
    folder = tmp_path / "models" / "checkpoints"
    folder.mkdir(parents=True)
    (folder / "sd_xl_base_1.0.safetensors").write_text("")
    assert run_script(tmp_path, provisioning_script(catalog_model("sdxl-1.0"))) == 0
    assert (folder / "sd_xl_base_1.0.safetensors").read_text()
    assert len(curl_calls(tmp_path)) == 1


def test_a_failed_download_exits_non_zero_and_leaves_no_file(tmp_path: Path) -> None:
    m = catalog_model("qwen-image-20b")
    assert run_script(tmp_path, provisioning_script(m), fail=True) != 0
    assert len(curl_calls(tmp_path)) == 1  # stops at the first failure
    assert not any(
        p.is_file() and not p.name.endswith(".part") for p in (tmp_path / "models").rglob("*")
    )


def test_the_token_is_sent_only_when_present(tmp_path: Path) -> None:
    script = provisioning_script(catalog_model("stable-audio-open-1.0"))
    assert "$HF_TOKEN" in script and "Authorization: Bearer" in script
    assert run_script(tmp_path / "with", script, token="hf_secret") == 0
    assert "Authorization: Bearer hf_secret" in curl_calls(tmp_path / "with")[0]
    assert run_script(tmp_path / "without", script) == 0
    assert "Authorization" not in curl_calls(tmp_path / "without")[0]


def _comfy_model(min_comfyui: str | None) -> Model:
    recipe: dict[str, Any] = {
        "repo": "org/repack",
        "revision": "a" * 40,
        "files": [{"path": "x/model.safetensors", "folder": "checkpoints"}],
    }
    if min_comfyui is not None:
        recipe["min_comfyui"] = min_comfyui
    return model(
        "test-comfy",
        capability="image",
        runtimes=["comfyui"],
        source={"hf_repo": "org/original", "comfyui": recipe},
        weights={"disk_gb": 5, "vram_gb": 8},
    )


@pytest.mark.parametrize(
    ("needed", "shipped", "servable"),
    [
        pytest.param("0.3.46", "0.3.20", False, id="image-too-old"),
        pytest.param("0.3.46", "0.3.46", True, id="exactly-the-minimum"),
        pytest.param("0.3.46", "0.3.100", True, id="numeric-not-lexical"),
        pytest.param(None, "0.3.20", True, id="no-minimum-known"),
    ],
)
def test_a_model_needing_a_newer_comfyui_than_the_image_ships_is_refused(
    needed: str | None, shipped: str, servable: bool
) -> None:
    images = real_images()
    images[Runtime.COMFYUI] = images[Runtime.COMFYUI].model_copy(update={"engine_version": shipped})
    result = resolve(registry([_comfy_model(needed)], images=images), "test-comfy")
    assert result.servable is servable
    if not servable:
        assert result.problem is not None and result.problem.rule == "image-cannot-serve"
        assert needed in result.problem.message and shipped in result.problem.message
