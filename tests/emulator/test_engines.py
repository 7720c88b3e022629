"""Engine stand-ins answer each engine's real routes with the engine's own (weak) auth."""

from __future__ import annotations

from typing import Any

import pytest

from frutebox_infra.catalog.engine_routes import EngineRoutes
from frutebox_infra.catalog.schema import Runtime
from frutebox_infra.emulator.ports import serve_port
from frutebox_infra.emulator.records import PodRecord
from frutebox_infra.emulator.server import realistic_for
from tests.factories import real_registry

STARTED = 1_800_000_000.0
LOADED = STARTED + 60
REGISTRY = real_registry()


def engine(runtime: Runtime) -> EngineRoutes:
    return REGISTRY.engine_routes[runtime]


def pod(runtime: Runtime, *, args: str = "", env: dict[str, str] | None = None) -> PodRecord:
    image = REGISTRY.images[runtime]
    body: dict[str, Any] = {
        "name": "p", "image": image.reference, "ports": [f"{image.port}/http"],
        "args": args, "env": env or {},
    }  # fmt: skip
    return PodRecord(
        "p1", "p", body, "RUNNING", "EU-RO-1", 0.4, "2027-01-15T08:00:00Z",
        started_wall=STARTED, load_s=60.0,
    )  # fmt: skip


def ask(
    runtime: Runtime, record: PodRecord, method: str, path: str, **headers: str
) -> tuple[int, Any]:
    port = REGISTRY.images[runtime].port
    lower = {name.replace("_", "-").lower(): value for name, value in headers.items()}
    return serve_port(
        record, port, method, path, {"model": "m", "prompt": {}}, now=LOADED,
        engine=engine(runtime), headers=lower,
    )  # fmt: skip


def test_vllm_own_key_guards_only_v1_so_invocations_answers_without_it() -> None:
    record = pod(Runtime.VLLM, args="Qwen/Qwen3-8B --api-key k1")
    assert ask(Runtime.VLLM, record, "POST", "/v1/chat/completions")[0] == 401
    status, reply = ask(
        Runtime.VLLM, record, "POST", "/v1/chat/completions", authorization="Bearer k1"
    )
    assert status == 200 and reply["choices"][0]["message"]["role"] == "assistant"
    # The engine's own key is no gate: these answer a stranger.
    for path in ("/invocations", "/tokenize", "/pause", "/update_weights", "/metrics"):
        method = "GET" if path == "/metrics" else "POST"
        assert ask(Runtime.VLLM, record, method, path)[0] == 200, path


def test_vllm_key_from_its_variable_and_a_wrong_key_refused() -> None:
    record = pod(Runtime.VLLM, env={"VLLM_API_KEY": "k2"})
    assert ask(Runtime.VLLM, record, "POST", "/v1/completions", authorization="Bearer no")[0] == 401
    assert ask(Runtime.VLLM, record, "POST", "/v1/completions", authorization="Bearer k2")[0] == 200


def test_sglang_and_llamacpp_leave_their_open_paths_open() -> None:
    sglang = pod(Runtime.SGLANG, args="python3 -m sglang.launch_server --api-key s")
    assert ask(Runtime.SGLANG, sglang, "GET", "/metrics")[0] == 404  # only with its flag
    metered = pod(
        Runtime.SGLANG, args="python3 -m sglang.launch_server --api-key s --enable-metrics"
    )
    assert ask(Runtime.SGLANG, metered, "GET", "/metrics")[0] == 200  # then open to anyone
    assert ask(Runtime.SGLANG, sglang, "POST", "/flush_cache")[0] == 401
    assert ask(Runtime.SGLANG, sglang, "POST", "/flush_cache", x_api_key="s")[0] == 200
    llama = pod(Runtime.LLAMACPP, args="-hf r:q --api-key l")
    assert ask(Runtime.LLAMACPP, llama, "GET", "/models")[0] == 200
    assert ask(Runtime.LLAMACPP, llama, "GET", "/slots")[0] == 401
    assert ask(Runtime.LLAMACPP, llama, "GET", "/slots", x_api_key="l")[0] == 200


@pytest.mark.parametrize(
    ("runtime", "method", "path"),
    [
        pytest.param(Runtime.OLLAMA, "POST", "/api/create", id="ollama-create"),
        pytest.param(Runtime.OLLAMA, "POST", "/api/blobs/sha256-abc", id="ollama-blob"),
        pytest.param(Runtime.COMFYUI, "POST", "/free", id="comfyui-free"),
        pytest.param(Runtime.COMFYUI, "POST", "/customnode/install", id="comfyui-node-install"),
        pytest.param(Runtime.COMFYUI, "POST", "/prompt", id="comfyui-prompt"),
    ],
)
def test_ollama_and_comfyui_have_no_key_at_all(runtime: Runtime, method: str, path: str) -> None:
    record = pod(runtime, env={"VLLM_API_KEY": "ignored"})
    assert ask(runtime, record, method, path)[0] == 200


def test_a_path_the_engine_does_not_serve_is_404_and_a_wrong_method_405() -> None:
    record = pod(Runtime.OLLAMA)
    assert ask(Runtime.OLLAMA, record, "GET", "/no/such/route")[0] == 404
    assert ask(Runtime.OLLAMA, record, "GET", "/api/pull")[0] == 405


def test_the_realistic_account_runs_every_engine_image_as_its_stand_in() -> None:
    realism = realistic_for(REGISTRY)
    for runtime, image in REGISTRY.images.items():
        assert realism.engines[image.reference] is REGISTRY.engine_routes[runtime]
