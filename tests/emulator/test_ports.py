"""A pod's HTTP ports: health once loaded, Ollama's pull and model routes, ComfyUI's lists."""

from __future__ import annotations

import json
from typing import Any

import pytest

from frutebox_infra.emulator.comfy import models_listing
from frutebox_infra.emulator.ports import serve_port
from frutebox_infra.emulator.records import PodRecord, RawBody
from frutebox_infra.recipes.comfyui import provisioning_script
from tests.factories import real_registry

STARTED = 1_800_000_000.0
LOADED = STARTED + 60


def pod(status: str = "RUNNING", *, image: str = "ollama/ollama:0.35.1", **body: Any) -> PodRecord:
    fields: dict[str, Any] = {"name": "p", "image": image, "ports": ["8080/http"], **body}
    return PodRecord(
        "p1", "p", fields, status, "EU-RO-1", 0.4, "2027-01-15T08:00:00Z",
        started_wall=STARTED, load_s=60.0,
    )  # fmt: skip


def ask(record: PodRecord, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    return serve_port(record, 8080, method, path, body, now=LOADED)


@pytest.mark.parametrize(
    ("status", "fault", "at", "answer"),
    [
        pytest.param("RUNNING", None, LOADED, 200, id="loaded"),
        pytest.param("RUNNING", None, LOADED - 0.001, 502, id="still-loading"),
        pytest.param("STARTING", None, LOADED, 502, id="not-running"),
        pytest.param("EXITED", None, LOADED, 502, id="stopped"),
        pytest.param("RUNNING", "never-healthy", LOADED + 3600, 502, id="never-healthy"),
    ],
)
def test_health_answers_only_a_running_loaded_healthy_server(
    status: str, fault: str | None, at: float, answer: int
) -> None:
    record = pod(status)
    record.fault = fault
    assert serve_port(record, 8080, "GET", "/health", None, now=at)[0] == answer


def test_a_port_the_pod_does_not_expose_is_404() -> None:
    status, body = serve_port(pod(), 9999, "GET", "/health", None, now=LOADED)
    assert status == 404 and "does not expose 9999/http" in body["error"]


def test_a_comfyui_like_image_shows_a_placeholder_page_while_loading() -> None:
    record = pod(image="ghcr.io/ai-dock/comfyui:v2")
    status, page = serve_port(record, 8080, "GET", "/", None, now=LOADED - 1)
    assert status == 200 and isinstance(page, RawBody) and b"Loading" in page.data
    assert serve_port(record, 8080, "GET", "/", None, now=LOADED)[1]["status"] == "ok"


def test_a_comfyui_pod_lists_the_files_its_script_fetches() -> None:
    model = real_registry().model("sdxl-1.0")
    assert model is not None
    record = pod(image="ghcr.io/ai-dock/comfyui:v2", env={"FRUTEBOX_PROVISION":
                 provisioning_script(model)})  # fmt: skip
    status, listing = ask(record, "GET", "/models/checkpoints")
    assert status == 200 and isinstance(listing, list) and listing


def comfy_body(model_id: str) -> dict[str, object]:
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
def test_a_comfyui_listing_is_what_the_script_fetches_per_kind(path: str, names: list[str]) -> None:
    assert models_listing(comfy_body("stable-audio-open-1.0"), path) == names


def test_wan_lists_both_experts_under_diffusion_models() -> None:
    assert models_listing(comfy_body("wan-2.2"), "/models/diffusion_models") == [
        "wan2.2_t2v_high_noise_14B_fp8_scaled.safetensors",
        "wan2.2_t2v_low_noise_14B_fp8_scaled.safetensors",
    ]


@pytest.mark.parametrize(
    ("pod_body", "path"),
    [
        pytest.param(
            {"env": {"OLLAMA_HOST": "0.0.0.0:11434"}}, "/models/checkpoints", id="not-comfy"
        ),
        pytest.param(comfy_body("sdxl-1.0"), "/system_stats", id="not-a-listing-path"),
    ],
)
def test_other_pods_and_paths_are_not_listings(pod_body: dict[str, object], path: str) -> None:
    assert models_listing(pod_body, path) is None


def pull_events(answer: tuple[int, Any]) -> tuple[int, list[Any]]:
    status, body = answer
    assert isinstance(body, RawBody) and body.content_type == "application/x-ndjson"
    return status, [json.loads(line) for line in body.data.decode().splitlines()]


def test_a_streamed_pull_answers_ndjson_progress_then_success() -> None:
    record = pod()
    status, events = pull_events(ask(record, "POST", "/api/pull", {"model": "m:1"}))
    assert status == 200
    assert events[0] == {"status": "pulling manifest"}
    assert events[-1] == {"status": "success"}
    progress = [e for e in events if "total" in e]
    assert [e["completed"] for e in progress] == [
        0,
        progress[0]["total"] // 2,
        progress[0]["total"],
    ]
    assert record.pulled == ["m:1"]


def test_a_failing_pull_streams_an_error_line() -> None:
    record = pod()
    record.fault = "pull-fails"
    status, events = pull_events(ask(record, "POST", "/api/pull", {"model": "m:1", "stream": True}))
    assert status == 200 and "file does not exist" in events[-1]["error"]
    assert not any(e.get("status") == "success" for e in events)
    assert record.pulled == []


def test_a_pull_that_does_not_stream_is_cut_by_the_proxy() -> None:
    record = pod()
    status, answer = ask(record, "POST", "/api/pull", {"model": "m:1", "stream": False})
    assert status == 524 and isinstance(answer, RawBody) and b"524" in answer.data
    assert record.pulled == []
    assert ask(record, "POST", "/api/pull", {"stream": True})[0] == 400


def test_ollama_serves_lists_and_deletes_each_pulled_model_of_a_shared_pod() -> None:
    record = pod()
    for tag in ("qwen3:8b", "llama3.2:1b"):
        assert ask(record, "POST", "/api/pull", {"model": tag})[0] == 200
    status, tags = ask(record, "GET", "/api/tags")
    assert status == 200 and [m["name"] for m in tags["models"]] == ["qwen3:8b", "llama3.2:1b"]
    for tag in ("qwen3:8b", "llama3.2:1b"):
        status, answer = ask(record, "POST", "/api/generate", {"model": tag, "prompt": "hi"})
        assert status == 200 and answer["model"] == tag
    assert ask(record, "POST", "/api/chat", {"model": "gemma:2b"})[0] == 404  # never pulled
    assert ask(record, "DELETE", "/api/delete", {"model": "llama3.2:1b"})[0] == 200
    assert ask(record, "DELETE", "/api/delete", {"model": "llama3.2:1b"})[0] == 404  # gone
    assert ask(record, "POST", "/api/generate", {"model": "llama3.2:1b"})[0] == 404
    assert ask(record, "POST", "/api/generate", {"model": "qwen3:8b"})[0] == 200
    assert record.pulled == ["qwen3:8b"]


def test_an_untagged_model_is_the_latest_tag() -> None:
    record = pod()
    ask(record, "POST", "/api/pull", {"model": "qwen3"})
    assert record.pulled == ["qwen3:latest"]
    chat = ask(record, "POST", "/api/chat", {"model": "qwen3"})
    assert chat[0] == 200 and chat[1]["message"]["role"] == "assistant"
    assert ask(record, "GET", "/api/generate")[0] == 400  # no model named
