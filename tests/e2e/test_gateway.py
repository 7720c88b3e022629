"""Who can reach a served model, on a real `pulumi up` against the emulator: an SGLang, a vLLM,
a llama.cpp, an Ollama and a ComfyUI pod behind their gateways (the vLLM and llama.cpp ones
started by the hook their seeding pods put on the volume, the Ollama one run from its pinned
release) ask for the stack's key on
every route, forward only the routes their clients use, and take a rotated key in place; the
key is never in the state's plain text, the outputs of up, preview and status, or the pods'
logs."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

from frutebox_infra.catalog.engine_routes import RouteUse
from frutebox_infra.catalog.schema import Runtime
from tests.e2e.deployment import SEEDED, Deployment
from tests.e2e.test_status import status
from tests.factories import real_registry

pytestmark = pytest.mark.engine

SGLANG, COMFY, VLLM, OLLAMA = "qwen-3.6-27b", "sdxl-1.0", "pixtral", "qwen3-8b"
LLAMACPP = "qwen3-235b-a22b"  # its GGUF quant, by override
STACK = {
    **SEEDED,
    "models": [SGLANG, COMFY, VLLM, LLAMACPP, OLLAMA],
    "budgetUsdPerHour": 40,
    "overrides": {LLAMACPP: {"engine": "llamacpp"}},
}
ENGINE_OF = {
    SGLANG: Runtime.SGLANG,
    COMFY: Runtime.COMFYUI,
    VLLM: Runtime.VLLM,
    LLAMACPP: Runtime.LLAMACPP,
    OLLAMA: Runtime.OLLAMA,
}
NEW_KEY = "rotated-" + "r" * 40


def ask(url: str, method: str, path: str, key: str | None, body: Any = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    return httpx.request(method, url + path, headers=headers, json=body, timeout=10)


def concrete(path: str) -> str:
    return path.replace("/*", "/x")


def assert_guarded(url: str, runtime: Runtime, key: str) -> None:
    """Every route of the engine's list: 401 without the key or with a wrong one (revealing
    nothing of the engine), forwarded with it exactly when clients use it, refused otherwise."""
    routes = real_registry().engine_routes[runtime]
    for route in routes.routes:
        for method in route.methods:
            path = concrete(route.path)
            for stranger in (None, "not-the-key-" + "x" * 30):
                answer = ask(url, method, path, stranger)
                assert answer.status_code == 401, (method, path, answer.status_code)
                assert "engine" not in answer.text.lower() and "pod" not in answer.text.lower()
            keyed = ask(url, method, path, key)
            if route.use is RouteUse.REFUSED:
                assert keyed.status_code == 403, (method, path, keyed.status_code)
            else:
                assert keyed.status_code != 401 and keyed.status_code != 403, (method, path)


def test_gateway_pods_ask_for_the_key_on_every_route_and_take_a_rotated_one_in_place(
    deployment: Deployment,
) -> None:
    project = deployment.project
    # The llama.cpp quant's 134 GB load from the volume outlasts the suite's 4 s health wait.
    project.extra_env["FRUTEBOX_HEALTH_TIMEOUT_S"] = "60"
    project.write_stack("small", STACK)
    preview = project.preview("small")
    assert preview.code == 0, preview.diagnostics
    up = project.up("small")
    outputs = project.outputs("small")
    key = outputs["servingKey"]
    assert isinstance(key, str) and len(key) >= 43
    urls = {model: outputs["pods"][model]["url"] for model in ENGINE_OF}
    for model, url in urls.items():
        assert_guarded(url, ENGINE_OF[model], key)
    for model in (SGLANG, VLLM, LLAMACPP):
        chat = ask(urls[model], "POST", "/v1/chat/completions", key,
                   {"model": model, "messages": [{"role": "user", "content": "hi"}]})  # fmt: skip
        assert chat.status_code == 200 and chat.json()["choices"][0]["message"]["content"]
    # vLLM's own key would leave /invocations open: the gateway refuses it, key or not.
    assert ask(urls[VLLM], "POST", "/invocations", None, {"prompt": "hi"}).status_code == 401
    assert ask(urls[VLLM], "POST", "/invocations", key, {"prompt": "hi"}).status_code == 403
    generate = ask(
        urls[OLLAMA], "POST", "/api/generate", key, {"model": "qwen3:8b", "prompt": "hi"}
    )
    assert generate.status_code == 200 and generate.json()["response"]
    # Nobody pulls or deletes through Ollama's gateway: its launch pulled what it serves.
    for path, method in (("/api/pull", "POST"), ("/api/delete", "DELETE")):
        assert ask(urls[OLLAMA], method, path, key, {"model": "qwen3:8b"}).status_code == 403
    prompt = ask(urls[COMFY], "POST", "/prompt", key, {"prompt": {"1": {"class_type": "x"}}})
    assert prompt.status_code == 200 and prompt.json()["prompt_id"]
    # The engines listen on loopback behind the gateway, which holds the published port; the
    # vLLM and llama.cpp pods' gateways start from the hooks their seeding pods wrote on the
    # volume.
    for body in deployment.created_bodies():
        bind = body["args"] + body["env"].get("OLLAMA_HOST", "")  # Ollama's is a variable
        assert "127.0.0.1" in bind and "FRUTEBOX_SERVING_KEY" in body["env"]
    volumes = [v for v in deployment.state()["volumes"] if not v["deleted"] and not v["foreign"]]
    hooked = [b for b in deployment.created_bodies() if "PYTHONPATH" in b["env"]]
    assert sorted(b["image"].split(":")[0] for b in hooked) == [
        "ghcr.io/ggml-org/llama.cpp",
        "vllm/vllm-openai",
    ]
    for body in hooked:
        hook_dir = body["env"]["PYTHONPATH"].removeprefix("/workspace/")
        assert [f"{hook_dir}/sitecustomize.py" in v["refs"] for v in volumes] == [True]

    # Rotating: the stack secret set, then `up`: the same pods, patched in place.
    created = len(deployment.created_bodies())
    seeds = len(deployment.seed_bodies())
    pods_before = {m: outputs["pods"][m]["podId"] for m in urls}
    project.pulumi("config", "set", "--secret", "servingKey", NEW_KEY, "--stack", "small")
    rotated = project.up("small")
    after = project.outputs("small")
    assert after["servingKey"] == NEW_KEY
    assert {m: after["pods"][m]["podId"] for m in urls} == pods_before
    assert len(deployment.created_bodies()) == created  # no new pod
    assert len(deployment.seed_bodies()) == seeds  # nothing seeded or fetched again
    patches = [r["body"] for r in deployment.requests("pods.update")]
    assert patches and all(set(p) == {"env"} for p in patches)
    for model, url in urls.items():
        path = {COMFY: "/queue", OLLAMA: "/api/tags"}.get(model, "/v1/models")
        assert ask(url, "GET", path, key).status_code == 401  # the old key, refused
        assert ask(url, "GET", path, NEW_KEY).status_code == 200

    # `frutebox status` probes each gateway's health path with the (rotated) key: in sync.
    code, data, status_err = status(project, "--health-window", "0", stack="small")
    assert code == 0, (data, status_err)
    assert {m["model"]: m["drift"] for m in data["models"]} == dict.fromkeys(ENGINE_OF)
    status_text = json.dumps(data) + status_err

    # The key is nowhere in plain text: state, the outputs of up, preview and status, the
    # pods' logs.
    again = project.preview("small")
    exported = project.pulumi("stack", "export", "--stack", "small").stdout
    plain_outputs = project.pulumi("stack", "output", "--stack", "small", "--json").stdout
    logs = json.dumps([p.get("logs") for p in deployment.state()["pods"]])
    seen = "\n".join([up.stdout, up.stderr, rotated.stdout, rotated.stderr, preview.diagnostics,
                      preview.stderr, again.diagnostics, again.stderr, exported, plain_outputs,
                      project.state_text(), logs, status_text])  # fmt: skip
    for secret in (key, NEW_KEY):
        assert secret not in seen
    assert re.search(r'"servingKey":\s*"\[secret\]"', plain_outputs)
