"""What the engines count, as the real ones do: token counters that advance with traffic and
start from zero whenever the container starts.

- SGLang: `/metrics` only when launched with `--enable-metrics`
  (`sglang:generation_tokens_total`, `sglang:prompt_tokens_total`);
- vLLM: `/metrics` by default (`vllm:generation_tokens_total`, `vllm:prompt_tokens_total`);
- llama.cpp: `/metrics` only with `--metrics` (`llamacpp:tokens_predicted_total`,
  `llamacpp:tokens_predicted_seconds_total`, `llamacpp:prompt_tokens_total`);
- Ollama: no `/metrics`; every `/api/generate` and `/api/chat` answer carries `eval_count` and
  `eval_duration` (nanoseconds);
- ComfyUI: `POST /prompt` queues a prompt, `GET /history` lists the executed ones.

A pod's counters live on its record (`counters`) and are zeroed by `containers.start_loop`,
as a process's memory is, with one exception the real engines share: SGLang and vLLM count
through prometheus_client, which, when the environment names a multiprocess directory
(`PROMETHEUS_MULTIPROC_DIR`), keeps each process's values in files there and sums them when
`/metrics` is read. Both engines keep a directory set so (neither wipes it), and fail at start
when it does not exist. A directory on the pod's network volume therefore carries the counters
on across restarts and pods (the volume's `counter_dirs`); one in the container's own disk is
gone with the container. `served` keeps every request the emulator served, with its time, and
is never reset: it is what tests compare `frutebox usage` against (the account's truth, not the
engines'). A measured llama.cpp pod's start hook keeps its server's counters in a directory on
the volume the same way, and so do a measured ComfyUI pod's launch with its history's count and
a measured Ollama pod's with what its answers carry (recipes/counts.py): their gateway sends
the counters route to the keeper, which answers every container start's counts summed.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from typing import Any

from frutebox_infra.emulator import layout
from frutebox_infra.emulator.engines import served
from frutebox_infra.emulator.gateway import engine_words, hook_params, launch_words
from frutebox_infra.emulator.records import PodRecord, RawBody, VolumeRecord
from frutebox_infra.recipes.base import COUNTERS_ENV
from frutebox_infra.recipes.counts import COMFYUI_COUNTER, COUNTS_ENV, KEEPER_ENV, OLLAMA_COUNTERS

DECODE_TOK_S = 40.0
"""The decode rate per stream an emulated engine reports (tokens per second of decoding)."""
DEFAULT_MAX_TOKENS = 16
"""What a request without max_tokens / num_predict generates here."""
COUNTERS = ("tokens", "prompt_tokens", "decode_s", "prompts", "uncounted")
"""What a pod counts; `uncounted`: answers the counts keeper passed on for Ollama that carried
no count (an OpenAI-style stream whose client did not ask for usage)."""

OPENAI_PATHS = ("/v1/chat/completions", "/v1/completions")
LLMS = ("sglang", "vllm", "llamacpp", "ollama")
"""The engines that answer OpenAI-style completions here."""


def engine_of(pod: PodRecord) -> str | None:
    """The engine an image runs, from its repository (registry/images.yaml)."""
    image = str(pod.body.get("image") or "")
    env = pod.body.get("env") or {}
    if isinstance(env, dict) and "FRUTEBOX_PROVISION" in env:
        return "comfyui"  # comfy.py: a pod with a provisioning script runs ComfyUI
    if isinstance(env, dict) and "OLLAMA_MODELS" in env:
        return "ollama"  # Ollama's release run from a shell-capable image, or its own image
    for name, marker in (
        ("sglang", "sglang"),
        ("vllm", "vllm"),
        ("llamacpp", "llama.cpp"),
        ("ollama", "ollama/"),
        ("comfyui", "comfyui"),
    ):
        if marker in image:
            return name
    return None


def metrics_on(pod: PodRecord) -> bool:
    """Whether the launch turned the engine's `/metrics` on."""
    engine = engine_of(pod)
    words = engine_words(pod.body)
    if engine == "sglang":
        return "--enable-metrics" in words
    if engine == "llamacpp":
        env = pod.body.get("env") or {}
        return "--metrics" in words or str(env.get("LLAMA_ARG_ENDPOINT_METRICS", "")) == "1"
    return engine == "vllm"


def reset(pod: PodRecord) -> None:
    """A container (re)started: the engine's counters start from zero, as a process's do."""
    pod.counters = dict.fromkeys(COUNTERS, 0.0)
    pod.history = []


_MAKES_DIR = re.compile(rf'^mkdir -p "?\$\{{?{COUNTERS_ENV}\}}?"?$', re.MULTILINE)
"""A launch script's line that makes the directory its environment names."""


def multiproc_dir(body: Mapping[str, Any]) -> str | None:
    """The prometheus_client multiprocess directory the engine counts in, or None when it
    counts in its own memory (an engine without prometheus_client's multiprocess mode, or no
    directory named)."""
    env = body.get("env") or {}
    path = env.get(COUNTERS_ENV) if isinstance(env, Mapping) else None
    if not isinstance(path, str) or not path:
        return None
    words = engine_words(body)
    if "sglang.launch_server" in words:
        # SGLang reads the directory only when its metrics are on (set_prometheus_multiproc_dir).
        return path if "--enable-metrics" in words else None
    return path if "vllm" in str(body.get("image", "")) else None


def keeper_dir(body: Mapping[str, Any], volume: VolumeRecord | None) -> str | None:
    """The directory the counts keeper keeps the pod's engine's counters in
    (recipes/counts.py), or None: the pod's env holds the keeper's program and names a
    directory, and its launch script execs the keeper (ComfyUI), or the start hook on the
    volume does (llama.cpp); else the engine runs in the keeper's place and counts in its
    memory."""
    env = body.get("env") or {}
    if not isinstance(env, Mapping) or not env.get(KEEPER_ENV):
        return None
    path = env.get(COUNTS_ENV)
    if not isinstance(path, str) or not path:
        return None
    if f"${KEEPER_ENV}" in engine_words(body):
        return path
    params = hook_params(body, volume)
    return path if params is not None and params.get("counts") and params.get("execs") else None


def kept_dir(body: Mapping[str, Any], volume: VolumeRecord | None) -> str | None:
    """Where the pod's counters are kept outside the engine's memory, if anywhere."""
    return multiproc_dir(body) or keeper_dir(body, volume)


def counters_failure(body: Mapping[str, Any], volume: VolumeRecord | None) -> str | None:
    """The line the engine prints as it exits at start for want of its multiprocess directory,
    or None. A launch script that makes it (`mkdir -p "$PROMETHEUS_MULTIPROC_DIR"`) puts it on
    the volume when it lies there; else it must be there already (SGLang's TemporaryDirectory
    inside it and prometheus_client's first file in it both fail without it). A counts keeper
    makes its directory itself; a launch that runs the keeper from an env without its program
    runs `python -c ""`, which exits at once."""
    env = body.get("env") or {}
    if f"${KEEPER_ENV}" in engine_words(body) and not env.get(KEEPER_ENV):
        return f"the launch runs the counts keeper, but the pod's env has no {KEEPER_ENV}"
    kept = keeper_dir(body, volume)
    if kept is not None:
        below = layout.below_mount(kept)
        if below is not None and volume is not None:
            volume.counter_dirs.setdefault(below, dict.fromkeys(COUNTERS, 0.0))
        return None
    path = multiproc_dir(body)
    if path is None:
        return None
    below = layout.below_mount(path)
    words = launch_words(body)
    script = words[2] if words[:2] == ["bash", "-c"] and len(words) > 2 else ""
    if _MAKES_DIR.search(script):
        if below is not None and volume is not None:
            volume.counter_dirs.setdefault(below, dict.fromkeys(COUNTERS, 0.0))
        return None
    if below is not None and volume is not None and below in volume.counter_dirs:
        return None
    return f"FileNotFoundError: [Errno 2] No such file or directory: '{path}'"


def store(pod: PodRecord, volume: VolumeRecord | None) -> dict[str, float]:
    """Where the pod's engine keeps its counters: in a multiprocess directory on the volume
    (they outlive the container), else the container's own (zeroed at each start)."""
    path = kept_dir(pod.body, volume)
    below = layout.below_mount(path) if path else None
    if below is not None and volume is not None and below in volume.counter_dirs:
        return volume.counter_dirs[below]
    if not pod.counters:
        pod.counters = dict.fromkeys(COUNTERS, 0.0)
    return pod.counters


def serve(
    pod: PodRecord,
    *,
    output_tokens: int,
    prompt_tokens: int,
    now_stamp: str,
    volume: VolumeRecord | None = None,
) -> dict[str, Any]:
    """One request served: the counters advance and the truth records it."""
    decode_s = output_tokens / DECODE_TOK_S
    counters = store(pod, volume)
    counters["tokens"] += output_tokens
    counters["prompt_tokens"] += prompt_tokens
    counters["decode_s"] += decode_s
    pod.served.append([now_stamp, output_tokens, prompt_tokens, 0])
    return {"output": output_tokens, "prompt": prompt_tokens, "decode_s": decode_s}


def serve_prompt(pod: PodRecord, *, now_stamp: str, volume: VolumeRecord | None = None) -> str:
    """A ComfyUI prompt queued and (here, at once) executed: its history grows by one."""
    store(pod, volume)["prompts"] += 1
    prompt_id = str(uuid.uuid4())
    pod.history.append(prompt_id)
    pod.served.append([now_stamp, 0, 0, 1])
    return prompt_id


def _metrics_text(pod: PodRecord, volume: VolumeRecord | None) -> bytes:
    engine, c = engine_of(pod), store(pod, volume)
    label = '{model_name="served"}'
    lines: list[str]
    if engine in ("sglang", "vllm"):  # the same two counters, each under its engine's prefix
        lines = [
            f"# TYPE {engine}:generation_tokens_total counter",
            f"{engine}:generation_tokens_total{label} {c['tokens']:.1f}",
            f"# TYPE {engine}:prompt_tokens_total counter",
            f"{engine}:prompt_tokens_total{label} {c['prompt_tokens']:.1f}",
        ]
    else:
        lines = [
            "# TYPE llamacpp:tokens_predicted_total counter",
            f"llamacpp:tokens_predicted_total {c['tokens']:.0f}",
            "# TYPE llamacpp:tokens_predicted_seconds_total counter",
            f"llamacpp:tokens_predicted_seconds_total {c['decode_s']:.3f}",
            "# TYPE llamacpp:prompt_tokens_total counter",
            f"llamacpp:prompt_tokens_total {c['prompt_tokens']:.0f}",
        ]
    return ("\n".join(lines) + "\n").encode()


def kept_answer(pod: PodRecord, volume: VolumeRecord | None) -> tuple[int, Any]:
    """What a running counts keeper answers on its counters route: the keeper's 503 when the
    server does not count (no `--metrics`: llama-server answers its read 501), else the sum of
    every container start's counters (llama.cpp's are the server's own, summed on the
    volume)."""
    c = store(pod, volume)
    if engine_of(pod) == "llamacpp":
        if not metrics_on(pod):
            why = "the engine's counters cannot be read: HTTP Error 501: Not Implemented\n"
            return 503, RawBody("text/plain; version=0.0.4", why.encode())
        return 200, RawBody("text/plain; version=0.0.4", _metrics_text(pod, volume))
    if engine_of(pod) == "comfyui":
        kept = {COMFYUI_COUNTER: c["prompts"]}
    else:
        tokens, seconds, uncounted = OLLAMA_COUNTERS
        kept = {uncounted: c.get("uncounted", 0.0), tokens: c["tokens"], seconds: c["decode_s"]}
    lines = [f"# TYPE {name} counter\n{name} {float(value)!r}" for name, value in kept.items()]
    return 200, RawBody("text/plain; version=0.0.4", ("\n".join(lines) + "\n").encode())


def _int(body: Any, *keys: str) -> int:
    value: Any = body
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def answer(
    pod: PodRecord,
    method: str,
    path: str,
    body: Any,
    *,
    now_stamp: str,
    volume: VolumeRecord | None = None,
) -> tuple[int, Any] | None:
    """The engine's counting routes on a serving pod; None for any other path."""
    engine = engine_of(pod)
    if method == "GET" and path == "/metrics" and engine in ("sglang", "vllm", "llamacpp"):
        if not metrics_on(pod):
            if engine == "llamacpp":
                return 501, {"error": {"code": 501, "message": "metrics endpoint is disabled"}}
            return 404, {"detail": "Not Found"}
        return 200, RawBody("text/plain; version=0.0.4", _metrics_text(pod, volume))
    if method == "POST" and path in OPENAI_PATHS and engine in LLMS:
        return _openai_answer(pod, path, body, now_stamp=now_stamp, volume=volume)
    if engine == "comfyui" and method == "POST" and path == "/prompt":
        prompt_id = serve_prompt(pod, now_stamp=now_stamp, volume=volume)
        return 200, {"prompt_id": prompt_id, "number": len(pod.history) - 1}
    if engine == "comfyui" and method == "GET" and path == "/history":
        return 200, {p: {"status": {"completed": True}} for p in pod.history}
    return None


def ollama_counts(
    pod: PodRecord, body: Any, *, now_stamp: str, volume: VolumeRecord | None = None
) -> dict[str, int]:
    """What an Ollama answer carries about its generation: `eval_count`, `eval_duration` (ns)
    (which a counts keeper in front counts)."""
    out = _int(body, "options", "num_predict") or DEFAULT_MAX_TOKENS
    served = serve(pod, output_tokens=out, prompt_tokens=0, now_stamp=now_stamp, volume=volume)
    return {"eval_count": out, "eval_duration": int(served["decode_s"] * 1e9)}


def _openai_answer(
    pod: PodRecord, path: str, body: Any, *, now_stamp: str, volume: VolumeRecord | None
) -> tuple[int, Any]:
    """An OpenAI-style completion: its `max_tokens` generated and counted, answered with
    `usage.completion_tokens`. Ollama counts nothing itself, and a stream carries usage only
    when its client asks (`stream_options.include_usage`): a counts keeper in front counts
    the answers without it apart."""
    out = _int(body, "max_tokens") or DEFAULT_MAX_TOKENS
    options = body.get("stream_options") if isinstance(body, dict) else None
    sized = (
        engine_of(pod) != "ollama"
        or not (isinstance(body, dict) and body.get("stream") is True)
        or (isinstance(options, dict) and options.get("include_usage") is True)
    )
    if sized:
        serve(pod, output_tokens=out, prompt_tokens=0, now_stamp=now_stamp, volume=volume)
    else:
        kept = store(pod, volume)
        kept["uncounted"] = kept.get("uncounted", 0.0) + 1
        pod.served.append([now_stamp, out, 0, 0])
    answered = served("POST", path, body, pod.id)
    reply = dict(answered[1]) if answered is not None else {"object": "text_completion"}
    usage = {"prompt_tokens": 0, "completion_tokens": out, "total_tokens": out}
    return 200, reply | {"usage": usage} if sized else reply


def request_of(engine: str | None, output_tokens: int) -> tuple[str, dict[str, Any]]:
    """The path and body of one request of `output_tokens` at `engine` (the traffic driver)."""
    if engine == "ollama":
        return "/api/generate", {"options": {"num_predict": output_tokens}}
    if engine == "comfyui":
        return "/prompt", {"prompt": {}}
    return "/v1/chat/completions", {"max_tokens": output_tokens, "messages": []}
