"""ComfyUI: a command for an image without ENTRYPOINT, and idempotent downloads to the volume."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from frutebox_infra.catalog.schema import Model, Runtime
from frutebox_infra.planner.resolver import resolve
from frutebox_infra.recipes.comfyui import (
    INSTALL_ROOT,
    MODELS_DIR,
    ComfyUI,
    launch,
    provisioning_script,
)
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
    for line in provisioning_script(m).splitlines():
        if not line.startswith("fetch "):
            continue
        split = words(line)
        assert split[0] == "fetch" and split[4:] == ["||", "exit", "1"], line
        out.append((split[1], split[2], split[3]))
    return out


def catalog_model(model_id: str) -> Model:
    m = real_registry().model(model_id)
    assert m is not None
    return m


@pytest.mark.parametrize("model_id", COMFY_MODELS)
def test_args_install_comfyui_fetch_the_weights_then_exec_the_server(
    build_pod: BuildPod, model_id: str
) -> None:
    pod = build_pod(model_id, Runtime.COMFYUI, A5000, 1, hf_token_configured=True)
    split = words(pod.args)
    assert split[:2] == ["bash", "-c"] and len(split) == 3
    script = split[2]
    assert script.startswith("set -eo pipefail\n")
    assert script.index('eval "$FRUTEBOX_PROVISION"') < script.index("exec ")
    assert f"home={INSTALL_ROOT}/0.8.0\n" in script
    assert words(script.rstrip().splitlines()[-1]) == [
        *("exec", "$home/venv/bin/python", "main.py", "--listen", "0.0.0.0", "--port", "8188"),
        *("--base-directory", "/workspace/ComfyUI"),
        *("--output-directory", f"/workspace/ComfyUI/output/{model_id}"),
        *("--temp-directory", "/tmp/comfyui", "--database-url", "sqlite:///:memory:"),
    ]
    for text in (script, pod.env["FRUTEBOX_PROVISION"]):
        assert subprocess.run(["bash", "-n", "-c", text], check=False).returncode == 0
    assert pod.image == "pytorch/pytorch:2.9.1-cuda12.8-cudnn9-runtime"
    assert set(pod.env) == {"FRUTEBOX_PROVISION", "HF_HOME"}
    assert (pod.port, pod.health_path) == (8188, "/system_stats")


def test_the_release_installed_is_the_image_entry_s_engine_version() -> None:
    image = real_images()[Runtime.COMFYUI]
    script = launch(replace(image, engine_version="0.9.1"), "sdxl-1.0").script
    assert f"home={INSTALL_ROOT}/0.9.1\n" in script
    assert "https://github.com/Comfy-Org/ComfyUI/archive/refs/tags/v0.9.1.tar.gz" in script


@pytest.mark.parametrize(
    "model_id",
    [
        pytest.param("sdxl-1.0", id="plain-id"),
        pytest.param("it's", id="a-quote-in-the-exec-line"),
        pytest.param("a b", id="a-space-in-the-exec-line"),
    ],
)
def test_the_launch_args_are_the_script_as_shlex_joins_it(model_id: str) -> None:
    # No ENTRYPOINT: args is the whole command line, bash running the script as shlex quotes it.
    image = real_images()[Runtime.COMFYUI]
    for version in ("0.8.0", "0.9.1"):
        pinned = replace(image, engine_version=version)
        joined = shlex.join(["bash", "-c", launch(pinned, model_id).script])
        assert launch(pinned, model_id).args == joined


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
    fetch_lines = [line for line in script.splitlines() if line.startswith("fetch ")]
    assert fetch_lines and all(line.endswith("|| exit 1") for line in fetch_lines)


def test_caches_and_the_install_live_on_the_volume(build_pod: BuildPod) -> None:
    env = build_pod("sdxl-1.0", Runtime.COMFYUI, A5000, 1).env
    assert env["HF_HOME"].startswith("/workspace/")
    assert INSTALL_ROOT.startswith("/workspace/") and MODELS_DIR.startswith("/workspace/")


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


# ---- the provisioning script, run for real against a loopback file server --------------------


class _Files(BaseHTTPRequestHandler):
    """Answers every GET with its own path as the body, or 404 while `failing`; logs requests."""

    failing = False
    log: list[tuple[str, str | None]] = []

    def do_GET(self) -> None:
        type(self).log.append((self.path, self.headers.get("Authorization")))
        if type(self).failing:
            self.send_error(404)
            return
        body = self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def files() -> Iterator[tuple[type[_Files], str]]:
    handler = type("Files", (_Files,), {"failing": False, "log": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    # A short poll: shutdown() waits for the serving loop's next look at its flag.
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    yield handler, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def run_script(tmp_path: Path, script: str, base_url: str, *, token: str = "") -> int:
    """The script with Hugging Face on loopback, the models dir in tmp and no retry pause."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    if not (bin_dir / "python").exists():
        (bin_dir / "python").symlink_to(sys.executable)
    env = {"PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    if token:
        env["HF_TOKEN"] = token
    local = (
        script.replace(MODELS_DIR, str(tmp_path / "models"))
        .replace("https://huggingface.co", base_url)
        .replace("time.sleep(5)", "time.sleep(0)")
    )
    return subprocess.run(["bash", "-c", local], env=env, check=False).returncode


def test_script_downloads_each_file_once_then_skips(
    tmp_path: Path, files: tuple[type[_Files], str]
) -> None:
    handler, base = files
    m = catalog_model("wan-2.2")
    script = provisioning_script(m)
    assert run_script(tmp_path, script, base) == 0
    for file in m.source.comfyui.files:  # type: ignore[union-attr]
        stored = tmp_path / "models" / file.folder / file.stored_name
        assert stored.read_text().endswith(file.path)
    assert len(handler.log) == 4
    # Second boot: every file is there and non-empty, so nothing is fetched, even if the
    # server is failing.
    handler.failing = True
    assert run_script(tmp_path, script, base) == 0
    assert len(handler.log) == 4


def test_an_empty_leftover_is_fetched_again(
    tmp_path: Path, files: tuple[type[_Files], str]
) -> None:
    handler, base = files
    folder = tmp_path / "models" / "checkpoints"
    folder.mkdir(parents=True)
    (folder / "sd_xl_base_1.0.safetensors").write_text("")
    assert run_script(tmp_path, provisioning_script(catalog_model("sdxl-1.0")), base) == 0
    assert (folder / "sd_xl_base_1.0.safetensors").read_text()
    assert len(handler.log) == 1


def test_a_failed_download_is_retried_then_exits_non_zero_and_leaves_no_file(
    tmp_path: Path, files: tuple[type[_Files], str]
) -> None:
    handler, base = files
    handler.failing = True
    m = catalog_model("qwen-image-20b")
    assert run_script(tmp_path, provisioning_script(m), base) != 0
    # Three tries of the first file, then the script stops.
    assert len(handler.log) == 3 and len({path for path, _ in handler.log}) == 1
    assert not any(
        p.is_file() and not p.name.endswith(".part") for p in (tmp_path / "models").rglob("*")
    )


def test_the_token_is_sent_only_when_present(
    tmp_path: Path, files: tuple[type[_Files], str]
) -> None:
    handler, base = files
    script = provisioning_script(catalog_model("stable-audio-open-1.0"))
    assert run_script(tmp_path / "with", script, base, token="hf_secret") == 0
    assert handler.log[0][1] == "Bearer hf_secret"
    handler.log.clear()
    assert run_script(tmp_path / "without", script, base) == 0
    assert handler.log[0][1] is None
    assert "hf_secret" not in script


# ---- the whole launch command, run for real: install once, fetch, exec -------------------------

FAKE_MAIN = "import sys; open(sys.argv[0] + '.ran', 'a').write(' '.join(sys.argv[1:]) + chr(10))"


def release_tarball(tmp_path: Path) -> bytes:
    """A stand-in ComfyUI release: main.py records its arguments; one satisfied requirement."""
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in (("main.py", FAKE_MAIN), ("requirements.txt", "pip\n")):
            data = text.encode()
            info = tarfile.TarInfo(f"ComfyUI-0.8.0/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def run_launch(tmp_path: Path, base_url: str) -> int:
    image = real_images()[Runtime.COMFYUI]
    script = launch(image, "sdxl-1.0").script.replace("https://github.com", base_url)
    script = script.replace("/workspace", str(tmp_path / "workspace"))
    provision = provisioning_script(catalog_model("sdxl-1.0")).replace(
        "https://huggingface.co", base_url
    )
    provision = provision.replace("/workspace", str(tmp_path / "workspace"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if not (bin_dir / "python").exists():
        (bin_dir / "python").symlink_to(sys.executable)
    env = {
        "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "FRUTEBOX_PROVISION": provision,
        # pip as the script runs it, minus its look for a newer pip (a call off loopback)
        # and the bytecode files it writes for the venv's own pip (unused by the install).
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_COMPILE": "1",
    }
    return subprocess.run(["bash", "-c", script], env=env, check=False).returncode


def test_launch_installs_the_release_once_then_execs_comfyui_on_the_volume(
    tmp_path: Path,
) -> None:
    tarball = release_tarball(tmp_path)

    class Release(_Files):
        log: list[tuple[str, str | None]] = []

        def do_GET(self) -> None:
            if not self.path.endswith(".tar.gz"):
                super().do_GET()
                return
            type(self).log.append((self.path, None))
            self.send_response(200)
            self.send_header("Content-Length", str(len(tarball)))
            self.end_headers()
            self.wfile.write(tarball)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Release)
    threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        assert run_launch(tmp_path, base) == 0
        assert run_launch(tmp_path, base) == 0
    finally:
        server.shutdown()
        server.server_close()
    home = tmp_path / "workspace" / "comfyui" / "0.8.0"
    ran = (home / "main.py.ran").read_text().splitlines()
    comfy = f"{tmp_path}/workspace/ComfyUI"
    assert (
        ran
        == [
            f"--listen 0.0.0.0 --port 8188 --base-directory {comfy}"
            f" --output-directory {comfy}/output/sdxl-1.0 --temp-directory /tmp/comfyui"
            " --database-url sqlite:///:memory:"
        ]
        * 2
    )
    assert [p for p, _ in Release.log].count(
        "/Comfy-Org/ComfyUI/archive/refs/tags/v0.8.0.tar.gz"
    ) == 1
    assert (tmp_path / "workspace/ComfyUI/models/checkpoints/sd_xl_base_1.0.safetensors").is_file()
    # Nothing half-installed is left beside the release.
    assert [p.name for p in home.parent.iterdir()] == ["0.8.0"]


def test_launch_fails_before_serving_when_the_release_cannot_be_fetched(
    tmp_path: Path, files: tuple[type[_Files], str]
) -> None:
    handler, base = files
    handler.failing = True
    assert run_launch(tmp_path, base) != 0
    # Nothing is installed, nothing half-installed is left, and no server ran.
    assert list((tmp_path / "workspace" / "comfyui").iterdir()) == []


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
    images[Runtime.COMFYUI] = replace(images[Runtime.COMFYUI], engine_version=shipped)
    result = resolve(registry([_comfy_model(needed)], images=images), "test-comfy")
    assert result.servable is servable
    if not servable:
        assert result.problem is not None and result.problem.rule == "image-cannot-serve"
        assert needed in result.problem.message and shipped in result.problem.message


def test_a_shared_pod_fetches_every_member_and_must_list_them_all(build_pod: BuildPod) -> None:
    sdxl = build_pod("sdxl-1.0", Runtime.COMFYUI, A5000, 1, hf_token_configured=True)
    audio = build_pod(
        "stable-audio-open-1.5", Runtime.COMFYUI, A5000, 1, hf_token_configured=True
    )
    shared = ComfyUI().shared_pod([sdxl, audio])
    assert shared.args == sdxl.args  # the anchor's server, its output folder
    script = shared.env["FRUTEBOX_PROVISION"]
    assert script == sdxl.env["FRUTEBOX_PROVISION"] + "\n" + audio.env["FRUTEBOX_PROVISION"]
    assert subprocess.run(["bash", "-n", "-c", script], check=False).returncode == 0
    assert shared.expected_files == sdxl.expected_files + audio.expected_files
    assert shared.secret_env == ("HF_TOKEN",)  # the gated member's token reaches the pod


def test_an_image_without_the_comfyui_release_to_install_is_a_problem_not_a_crash() -> None:
    image = replace(real_images()[Runtime.COMFYUI], engine_version=None)
    model = real_registry().model("sdxl-1.0")
    assert model is not None
    problem = ComfyUI().image_problem(model, image)
    assert problem is not None and "engine_version" in problem
