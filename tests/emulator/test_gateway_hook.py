"""A vLLM or llama.cpp pod's gateway as the emulator runs it: the seeding pod writes the start
hook onto the volume; a GPU pod whose image's Python finds it starts the gateway (or crash-loops
without its key); one that does not find it crash-loops, as vLLM exits reading the config file
only the hook writes, and llama.cpp's dispatcher's Python program refuses the server's flags;
an engine on loopback with no gateway answers nothing on the published port."""

from __future__ import annotations

import re
from typing import Any

import pytest

from frutebox_infra.catalog.schema import Runtime
from frutebox_infra.emulator.clock import ManualClock
from frutebox_infra.emulator.control import out_of_band
from frutebox_infra.emulator.gateway import hook_failure
from frutebox_infra.emulator.launch import launch_failure
from frutebox_infra.emulator.records import PodRecord, RawBody
from frutebox_infra.emulator.state import Account
from frutebox_infra.recipes.counts import COUNTS_ENV, KEEPER_ENV
from frutebox_infra.recipes.gateway import HOOK_ROOT, KEY_ENV
from tests.emulator.test_seeder_pod import running, seeding_body
from tests.emulator.test_storage import account, gpu_body
from tests.factories import real_registry

PIXTRAL = "pixtral"
GGUF = "qwen3-235b-a22b"
AS_LLAMACPP = {"overrides": {GGUF: {"engine": "llamacpp"}}}
KEY = "emulated-" + "k" * 40


def seeded_account(clock: ManualClock, model_id: str = PIXTRAL, **config: Any) -> Account:
    acct = account(clock, time_scale=1000.0)
    vol = acct.create_volume({"name": "w", "size": 400, "dataCenter": "EU-RO-1"})
    seed = running(acct, seeding_body(acct, vol, model_id, **config))
    clock.advance(100)
    acct.storage.answer(seed, vol, 8080, "GET", "/status", clock.now())  # its jobs settle
    acct.terminate_pod(seed.id)
    return acct


def keyed(body: dict[str, Any], key: str = KEY) -> dict[str, Any]:
    return {**body, "env": {**body["env"], KEY_ENV: key}}


def serving(acct: Account, clock: ManualClock, body: dict[str, Any]) -> PodRecord:
    pod = running(acct, body)
    clock.advance(100)
    acct.read_pod(pod.id)
    return pod


def hook_path(acct: Account) -> str:
    vol = next(iter(acct.volumes.values()))
    (path,) = [p for p in vol.refs if p.startswith(HOOK_ROOT.removeprefix("/workspace/"))]
    return path


def test_the_seeding_pod_writes_the_hook_and_the_pod_then_serves_behind_its_gateway(
    clock: ManualClock,
) -> None:
    acct = seeded_account(clock)
    path = hook_path(acct)
    body = keyed(gpu_body(acct, PIXTRAL, seeding=True))
    assert body["env"]["PYTHONPATH"] == f"/workspace/{path.rsplit('/', 1)[0]}"
    pod = serving(acct, clock, body)
    assert pod.hooked and pod.crash is None, pod.lines()
    bearer = {"authorization": f"Bearer {KEY}"}
    assert acct.proxy(pod.id, 8000, "GET", "/v1/models", None)[0] == 401
    assert acct.proxy(pod.id, 8000, "GET", "/health", None)[0] == 401
    assert acct.proxy(pod.id, 8000, "POST", "/invocations", {}, bearer)[0] == 403
    assert acct.proxy(pod.id, 8000, "GET", "/v1/models", None, bearer)[0] == 200
    # vLLM's own port is on loopback: the proxy publishes only the gateway's.
    assert "18000/http" not in body["ports"]


def test_without_its_key_the_hook_ends_the_process_at_every_start(clock: ManualClock) -> None:
    acct = seeded_account(clock)
    pod = serving(acct, clock, gpu_body(acct, PIXTRAL, seeding=True))
    assert pod.crash is not None and "FRUTEBOX_SERVING_KEY is not set" in pod.crash
    assert acct.proxy(pod.id, 8000, "GET", "/health", None)[0] == 502


def test_without_the_hook_on_the_volume_vllm_exits_reading_its_config(clock: ManualClock) -> None:
    acct = seeded_account(clock)
    vol = next(iter(acct.volumes.values()))
    acct.write_text(vol.id, hook_path(acct), None)  # deleted by hand
    pod = serving(acct, clock, keyed(gpu_body(acct, PIXTRAL, seeding=True)))
    assert not pod.hooked
    assert pod.crash is not None and "Unable to read the config file" in pod.crash
    assert acct.proxy(pod.id, 8000, "GET", "/v1/models", None)[0] == 502


def test_a_rotated_key_restarts_the_pod_through_its_hook(clock: ManualClock) -> None:
    acct = seeded_account(clock)
    pod = serving(acct, clock, keyed(gpu_body(acct, PIXTRAL, seeding=True)))
    acct.update_pod(pod.id, {"env": {**pod.body["env"], KEY_ENV: ""}})
    assert pod.hooked and pod.crash is not None and "is not set" in pod.crash
    acct.update_pod(pod.id, {"env": {**pod.body["env"], KEY_ENV: "new-" + "n" * 40}})
    assert pod.hooked and pod.crash is None


def test_an_engine_on_loopback_without_a_gateway_answers_nothing(clock: ManualClock) -> None:
    acct = seeded_account(clock)
    body = gpu_body(acct, PIXTRAL, seeding=True)
    env = {k: v for k, v in body["env"].items() if k != "PYTHONPATH"}
    words = body["args"].replace("--config /dev/shm/frutebox-gateway/vllm.yaml ", "")
    pod = serving(acct, clock, {**body, "env": env, "args": words})
    assert not pod.hooked and pod.crash is None
    assert acct.proxy(pod.id, 8000, "GET", "/v1/models", None)[0] == 502


def test_a_pod_without_a_hook_in_its_env_is_none_of_this(clock: ManualClock) -> None:
    assert hook_failure({"env": {"PYTHONPATH": "/opt/lib"}}, None) == (False, None)
    assert hook_failure({"env": {}}, None) == (False, None)


def test_llamacpp_s_hook_execs_its_server_behind_the_gateway_or_its_python_refuses_the_flags(
    clock: ManualClock,
) -> None:
    acct = seeded_account(clock, GGUF, **AS_LLAMACPP)
    body = keyed(gpu_body(acct, GGUF, seeding=True, **AS_LLAMACPP))
    assert body["args"].startswith("--convert -hf ") and "--host 127.0.0.1" in body["args"]
    pod = serving(acct, clock, body)
    assert pod.hooked and pod.crash is None, pod.lines()
    bearer = {"authorization": f"Bearer {KEY}"}
    assert acct.proxy(pod.id, 8080, "GET", "/v1/models", None)[0] == 401
    assert acct.proxy(pod.id, 8080, "GET", "/slots", None, bearer)[0] == 403
    assert acct.proxy(pod.id, 8080, "GET", "/v1/models", None, bearer)[0] == 200
    assert "18080/http" not in body["ports"]
    # Without the hook on the volume the dispatcher's Python runs its own program.
    vol = next(iter(acct.volumes.values()))
    acct.write_text(vol.id, hook_path(acct), None)
    gone = serving(acct, clock, body)
    assert not gone.hooked
    assert gone.crash is not None and "ignored explicit argument 'f'" in gone.crash
    assert acct.proxy(gone.id, 8080, "GET", "/v1/models", None, bearer)[0] == 502


@pytest.mark.parametrize(
    ("args", "crash"),
    [
        pytest.param("--server -hf r:q", None, id="server-word"),
        pytest.param("-hf r:q", "Unknown command: -hf", id="no-word"),
        pytest.param("", "Unknown command: ", id="empty"),
    ],
)
def test_llamacpp_s_dispatcher_runs_only_the_words_it_knows(args: str, crash: str | None) -> None:
    image = real_registry().images[Runtime.LLAMACPP]
    assert image.dispatch is not None
    found = launch_failure({}, {"image": image.reference, "args": args},
                           {image.reference: image.dispatch})  # fmt: skip
    assert found == crash


@pytest.mark.parametrize(
    ("model_id", "config"), [(PIXTRAL, {}), (GGUF, AS_LLAMACPP)], ids=["vllm", "llamacpp"]
)
def test_a_seeded_pod_s_hook_only_checks_the_release_its_seed_placed(
    clock: ManualClock, model_id: str, config: dict[str, Any]
) -> None:
    acct = seeded_account(clock, model_id, **config)
    vol = next(iter(acct.volumes.values()))
    gateway = real_registry().gateway
    assert gateway is not None
    kept = f"frutebox/gateway/caddy-{gateway.version}.tar.gz"
    assert kept in vol.files  # the seed placed it
    body = keyed(gpu_body(acct, model_id, seeding=True, **config))
    assert serving(acct, clock, body).crash is None
    del vol.files[kept]  # gone after the seed: the hook does not fetch it on the GPU
    pod = serving(acct, clock, body)
    assert pod.hooked
    assert pod.crash == f"gateway: /workspace/{kept} is missing or fails its SHA-512 check"
    assert kept not in vol.files


def drive(acct: Account, pod: PodRecord, requests: int, tokens: int) -> None:
    """`requests` of `tokens` output tokens each, sent with the key as the stack's clients do."""
    traffic = {"requests": requests, "outputTokens": tokens, "key": KEY}
    answered = out_of_band(acct, "POST", f"/_emulator/pods/{pod.id}/traffic", traffic)
    assert answered is not None and answered[1]["served"] == requests, answered


def counted(acct: Account, pod: PodRecord) -> tuple[int, float | None]:
    """The status and output-token count the gateway answers on llama.cpp's metrics route."""
    status, body = acct.proxy(
        pod.id, 8080, "GET", "/metrics", None, {"authorization": f"Bearer {KEY}"}
    )
    text = body.data.decode() if isinstance(body, RawBody) else ""
    found = re.search(r"^llamacpp:tokens_predicted_total (\S+)$", text, re.M)
    return status, float(found.group(1)) if found else None


def test_a_measured_llamacpp_pod_s_hook_keeps_its_counters_on_the_volume(
    clock: ManualClock,
) -> None:
    config = {**AS_LLAMACPP, "measureUsage": True}
    acct = seeded_account(clock, GGUF, **config)
    body = keyed(gpu_body(acct, GGUF, seeding=True, **config))
    kept = body["env"][COUNTS_ENV]
    assert kept.startswith("/workspace/frutebox/counters/") and "--metrics" in body["args"]
    pod = serving(acct, clock, body)
    assert pod.hooked and pod.crash is None, pod.lines()
    drive(acct, pod, 3, 100)
    assert counted(acct, pod) == (200, 300.0)
    # A restart zeroes llama-server's own counters; the keeper's files on the volume stay.
    acct.pod_action(pod.id, "restart")
    acct.read_pod(pod.id)
    clock.advance(100)
    acct.read_pod(pod.id)
    assert pod.counters["tokens"] == 0  # the server's own
    drive(acct, pod, 1, 50)
    assert counted(acct, pod) == (200, 350.0)
    # So does a new pod of the same model (an armed window's re-arm).
    acct.terminate_pod(pod.id)
    again = serving(acct, clock, body)
    assert counted(acct, again) == (200, 350.0)
    # A pod whose env names no directory: its hook execs the server, so nothing answers where
    # the gateway sends the metrics route (Caddy's 502), and llama-server counts in memory.
    bare = {**body, "env": {k: v for k, v in body["env"].items() if k != COUNTS_ENV}}
    plain = serving(acct, clock, bare)
    assert counted(acct, plain) == (502, None)


def test_a_measured_comfyui_pod_s_keeper_keeps_its_prompt_count_on_the_volume(
    clock: ManualClock,
) -> None:
    acct = seeded_account(clock, "sdxl-1.0", measureUsage=True)
    body = keyed(gpu_body(acct, "sdxl-1.0", seeding=True, measureUsage=True))
    assert body["env"][COUNTS_ENV].startswith("/workspace/frutebox/counters/sdxl-1.0/")
    pod = serving(acct, clock, body)
    bearer = {"authorization": f"Bearer {KEY}"}

    def prompts() -> tuple[int, bytes]:
        status, answer = acct.proxy(pod.id, 8188, "GET", "/metrics", None, bearer)
        return status, answer.data if isinstance(answer, RawBody) else b""

    assert prompts()[0] == 200
    drive(acct, pod, 2, 1)
    acct.pod_action(pod.id, "restart")
    acct.read_pod(pod.id)
    clock.advance(100)
    acct.read_pod(pod.id)
    # ComfyUI's own history starts empty again; the keeper's count carries on.
    assert acct.proxy(pod.id, 8188, "GET", "/history", None, bearer)[1] == {}
    drive(acct, pod, 1, 1)
    assert prompts() == (200, b"# TYPE comfyui:prompts_executed_total counter\n"
                              b"comfyui:prompts_executed_total 3.0\n")  # fmt: skip
    # With no directory named, the keeper runs ComfyUI in its place: the gateway's counters
    # route finds nothing (Caddy's 502). Without the keeper's program, `python -c ""` exits.
    plain = serving(acct, clock, {**body, "env": {**body["env"], COUNTS_ENV: ""}})
    assert not plain.crash_looping
    assert acct.proxy(plain.id, 8188, "GET", "/metrics", None, bearer)[0] == 502
    bare = {**body, "env": {k: v for k, v in body["env"].items() if k != KEEPER_ENV}}
    assert serving(acct, clock, bare).crash_looping


def test_a_measured_ollama_pod_s_keeper_counts_what_its_answers_carry(clock: ManualClock) -> None:
    acct = seeded_account(clock, "qwen3-8b", measureUsage=True)
    body = keyed(gpu_body(acct, "qwen3-8b", seeding=True, measureUsage=True))
    pod = serving(acct, clock, body)
    assert pod.crash is None, pod.lines()
    bearer = {"authorization": f"Bearer {KEY}"}

    def counts() -> dict[str, float]:
        status, answer = acct.proxy(pod.id, 11434, "GET", "/metrics", None, bearer)
        assert status == 200 and isinstance(answer, RawBody)
        lines = answer.data.decode().splitlines()
        return {ln.split()[0]: float(ln.split()[1]) for ln in lines if not ln.startswith("#")}

    drive(acct, pod, 2, 5)  # /api/generate: eval_count 5 each
    unsized = {"model": "qwen3:8b", "max_tokens": 7, "stream": True}
    assert acct.proxy(pod.id, 11434, "POST", "/v1/chat/completions", unsized, bearer)[0] == 200
    acct.pod_action(pod.id, "restart")
    acct.read_pod(pod.id)
    clock.advance(100)
    acct.read_pod(pod.id)
    drive(acct, pod, 1, 3)
    assert counts() == {
        "ollama:answers_without_count_total": 1.0,
        "ollama:eval_count_total": 13.0,
        "ollama:eval_duration_seconds_total": 13 / 40,
    }
    # No directory named: the keeper execs Ollama in its place, and the routes the gateway
    # sends to the keeper find nothing (Caddy's 502).
    plain = serving(acct, clock, {**body, "env": {**body["env"], COUNTS_ENV: ""}})
    answered = acct.proxy(plain.id, 11434, "POST", "/api/generate", {"model": "qwen3:8b"}, bearer)
    assert answered[0] == 502
