"""The launch check against the pinned engines' real facts: what each refuses, and that every
launch the catalog can produce is accepted."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from dataclasses import replace

import pytest

from frutebox_infra.catalog.engine_options import EngineOptions
from frutebox_infra.catalog.schema import Registry, Runtime
from frutebox_infra.planner.launch_check import (
    Launch,
    Refusal,
    _last_exec,
    _script_reads,
    _server_words,
    check_launch,
)
from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.planner.resolver import resolve
from frutebox_infra.recipes import RECIPES
from frutebox_infra.recipes.base import ServeOptions
from tests.factories import real_registry, registry, settings, sglang_model

SGLANG = "python3 -m sglang.launch_server --model-path org/m "


def facts(engine: str) -> EngineOptions:
    return real_registry().engine_options[Runtime(engine)]


def entrypoint(engine: str) -> str:
    return real_registry().images[Runtime(engine)].entrypoint


def check(
    engine: str, args: str, env: dict[str, str] | None = None, health: str = ""
) -> tuple[Refusal, ...]:
    options = facts(engine)
    launch = Launch(args=args, env=env or {}, health_path=health or options.health_path)
    image = real_registry().images[Runtime(engine)]
    return check_launch(launch, options, entrypoint=image.entrypoint, dispatch=image.dispatch)


def server_words(engine: str, args: str) -> list[str]:
    """The words `check_launch` reads flags from: after the server's command where the args
    are the whole command line."""
    words = shlex.split(args)
    if entrypoint(engine) == "none":
        words = _server_words(words, facts(engine))[0]
    return words


def spec_config(document: str) -> str:
    return "org/m --speculative-config " + shlex.quote(document)


def ollama_script(words: str) -> str:
    """An Ollama launch as its recipe writes one: the release's program exec'd last."""
    return shlex.join(["bash", "-c", f"exec /tmp/frutebox-ollama/bin/ollama {words}"])


def comfy_script(flags: str, extra: str = "") -> str:
    script = f'{extra}cd "$home"\nexec "$home/venv/bin/python" main.py {flags}'
    return shlex.join(["bash", "-c", script])


# Each row: a launch the pinned engine refuses, what the refusal names, and the nearest
# launch it accepts (so each rule is seen on both sides).
REFUSED = [
    # --- SGLang v0.5.21 ---
    pytest.param(
        "sglang",
        SGLANG + "--tp 2",
        {},
        "flag --tp",
        "spell it --tp-size",
        SGLANG + "--tp-size 2",
        {},
        id="sglang-prefix-flag",
    ),
    pytest.param(
        "sglang",
        SGLANG + "--tensor-parallel 2",
        {},
        "flag --tensor-parallel",
        "--tensor-parallel-size",
        SGLANG + "--tensor-parallel-size 2",
        {},
        id="sglang-prefix-of-an-alias",
    ),
    pytest.param(
        "sglang",
        SGLANG + "--kv-cache-dtype fp8_e5m3",
        {},
        "--kv-cache-dtype fp8_e5m3",
        "fp8_e5m2",
        SGLANG + "--kv-cache-dtype fp8_e5m2",
        {},
        id="sglang-choice",
    ),
    pytest.param(
        "sglang",
        SGLANG + "--reasoning-parser deepseek_v41",
        {},
        "--reasoning-parser deepseek_v41",
        "deepseek-v41",
        SGLANG + "--reasoning-parser deepseek-v41",
        {},
        id="sglang-vllm-parser-name",
    ),
    pytest.param(
        "sglang",
        SGLANG + "--speculative-algorithm EAGLE4",
        {},
        "--speculative-algorithm EAGLE4",
        "EAGLE",
        SGLANG + "--speculative-algorithm eagle3",
        {},
        id="sglang-code-choice-any-case",
    ),
    pytest.param(
        "sglang",
        SGLANG + "--context-length 32k",
        {},
        "--context-length 32k",
        "a value",
        SGLANG + "--context-length 32768",
        {},
        id="sglang-int",
    ),
    pytest.param(
        "sglang",
        SGLANG + "--enable-hierarchical-cache=1",
        {},
        "--enable-hierarchical-cache=1",
        "without a value",
        SGLANG + "--enable-hierarchical-cache",
        {},
        id="sglang-switch-value",
    ),
    pytest.param(
        "sglang",
        SGLANG + "--port",
        {},
        "--port without its value",
        "value",
        SGLANG + "--port 8080",
        {},
        id="sglang-missing-value",
    ),
    pytest.param(
        "sglang",
        SGLANG,
        {"SGLANG_FOO": "1"},
        "environment variable SGLANG_FOO",
        "remove",
        SGLANG,
        {"SGLANG_USE_MODELSCOPE": "1", "HF_HOME": "/workspace/hf"},
        id="sglang-env",
    ),
    pytest.param(
        "sglang",
        "python3 -m sglang.launch_serverx --model-path m",
        {},
        "command",
        "sglang.launch_server",
        "python3 -m sglang.launch_server --model-path m",
        {},
        id="sglang-command",
    ),
    # --- vLLM v0.31.0 ---
    pytest.param(
        "vllm",
        "org/m --tp-size 2",
        {},
        "flag --tp-size",
        "--tp-size",
        "org/m --tensor-parallel-size 2",
        {},
        id="vllm-sglang-flag",
    ),
    pytest.param(
        "vllm",
        "org/m --kv-cache-dtype fp8_e5m3",
        {},
        "--kv-cache-dtype fp8_e5m3",
        "fp8_e5m2",
        "org/m --kv-cache-dtype fp8",
        {},
        id="vllm-choice",
    ),
    pytest.param(
        "vllm",
        "org/m --reasoning-parser deepseek-v41",
        {},
        "--reasoning-parser deepseek-v41",
        "deepseek_v41",
        "org/m --reasoning-parser deepseek_v41",
        {},
        id="vllm-sglang-parser-name",
    ),
    pytest.param(
        "vllm",
        spec_config('{"method":"eagle4","model":"h"}'),
        {},
        '--speculative-config method="eagle4"',
        "eagle3",
        spec_config('{"method":"eagle3","model":"h"}'),
        {},
        id="vllm-json-method",
    ),
    pytest.param(
        "vllm",
        spec_config('{"method":"eagle3","draft":"h"}'),
        {},
        "--speculative-config key 'draft'",
        "num_speculative_tokens",
        spec_config('{"method":"eagle3","model":"h","num_speculative_tokens":7}'),
        {},
        id="vllm-json-key",
    ),
    pytest.param(
        "vllm",
        "org/m --speculative-config {method:eagle3}",
        {},
        "--speculative-config {method:eagle3}",
        "JSON",
        spec_config('{"method":"eagle3"}'),
        {},
        id="vllm-json",
    ),
    pytest.param(
        "vllm",
        "org/m extra --max-num-seqs 4",
        {},
        "argument `extra`",
        "positional",
        "org/m --max-num-seqs 4",
        {},
        id="vllm-positional",
    ),
    pytest.param(
        "vllm",
        "org/m --max_num_seqs four",
        {},
        "--max-num-seqs four",
        "whole number",
        "org/m --max_num_seqs 4",
        {},
        id="vllm-underscores-as-vllm-reads-them",
    ),
    pytest.param(
        "vllm",
        "org/m",
        {"VLLM_FOO": "1"},
        "environment variable VLLM_FOO",
        "remove",
        "org/m",
        {"VLLM_LOGGING_LEVEL": "INFO", "HF_TOKEN": "x"},
        id="vllm-env",
    ),
    # --- llama.cpp b11382 ---
    pytest.param(
        "llamacpp",
        "--server -hf r:q --ctx 4096",
        {},
        "flag --ctx",
        "its flags",
        "--server -hf r:q --ctx-size 4096",
        {},
        id="llamacpp-flag",
    ),
    pytest.param(
        "llamacpp",
        "--server -hf r:q --cache-type-k fp8",
        {},
        "--cache-type-k fp8",
        "q8_0",
        "--server -hf r:q --cache-type-k q8_0",
        {},
        id="llamacpp-choice",
    ),
    pytest.param(
        "llamacpp",
        "--server -hf r:q --flash-attn yes",
        {},
        "--flash-attn yes",
        "auto",
        "--server -hf r:q --flash-attn auto",
        {},
        id="llamacpp-on-off-auto",
    ),
    pytest.param(
        "llamacpp",
        "--server -hf r:q --parallel many",
        {},
        "--parallel many",
        "whole number",
        "--server -hf r:q --parallel 8",
        {},
        id="llamacpp-int",
    ),
    pytest.param(
        "llamacpp",
        "--server -hf r:q",
        {"LLAMA_ARG_CTXSIZE": "8"},
        "environment variable LLAMA_ARG_CTXSIZE",
        "LLAMA_ARG_CTX_SIZE",
        "--server -hf r:q",
        {"LLAMA_ARG_CTX_SIZE": "8", "LLAMA_CACHE": "/w"},
        id="llamacpp-env",
    ),
    pytest.param(
        "llamacpp",
        "--server -hf r:q",
        {"LLAMA_ARG_CTX_SIZE": "8k"},
        "LLAMA_ARG_CTX_SIZE=8k",
        "int",
        "--server -hf r:q",
        {"LLAMA_ARG_CTX_SIZE": "8192"},
        id="llamacpp-env-type",
    ),
    # --- Ollama 0.35.1 ---
    pytest.param(
        "ollama",
        ollama_script("serve --verbose"),
        {},
        "args `serve --verbose`",
        "serve",
        ollama_script("serve"),
        {},
        id="ollama-flag",
    ),
    pytest.param(
        "ollama",
        ollama_script("run"),
        {},
        "args `run`",
        "serve",
        ollama_script("serve"),
        {},
        id="ollama-subcommand",
    ),
    pytest.param(
        "ollama",
        ollama_script("serve"),
        {"OLLAMA_FOO": "1"},
        "environment variable OLLAMA_FOO",
        "remove",
        ollama_script("serve"),
        {"OLLAMA_NUM_PARALLEL": "4"},
        id="ollama-env",
    ),
    pytest.param(
        "ollama",
        ollama_script("serve"),
        {"OLLAMA_NUM_PARALLEL": "four"},
        "OLLAMA_NUM_PARALLEL=four",
        "uint",
        ollama_script("serve"),
        {"OLLAMA_NUM_PARALLEL": "4"},
        id="ollama-env-type",
    ),
    pytest.param(
        "ollama",
        ollama_script("serve"),
        {"OLLAMA_KEEP_ALIVE": "forever"},
        "OLLAMA_KEEP_ALIVE=forever",
        "duration",
        ollama_script("serve"),
        {"OLLAMA_KEEP_ALIVE": "-1"},
        id="ollama-duration",
    ),
    # --- ComfyUI ---
    pytest.param(
        "comfyui",
        comfy_script("--listen 0.0.0.0 --prot 8188"),
        {},
        "flag --prot",
        "--port",
        comfy_script("--listen 0.0.0.0 --port 8188"),
        {},
        id="comfyui-flag",
    ),
    pytest.param(
        "comfyui",
        comfy_script("--default-hashing-function md4"),
        {},
        "--default-hashing-function md4",
        "sha256",
        comfy_script("--default-hashing-function sha256"),
        {},
        id="comfyui-choice",
    ),
    pytest.param(
        "comfyui",
        comfy_script("--port 8188"),
        {"COMFYUI_FOO": "1"},
        "environment variable COMFYUI_FOO",
        "remove",
        comfy_script("--port 8188", 'echo "$COMFYUI_FOO"\n'),
        {"COMFYUI_FOO": "1"},
        id="comfyui-env-the-script-reads",
    ),
    pytest.param(
        "comfyui",
        shlex.join(["bash", "-c", "python main.py --port 8188"]),
        {},
        "never execs",
        "exec",
        comfy_script("--port 8188"),
        {},
        id="comfyui-no-exec",
    ),
]


@pytest.mark.parametrize(
    ("engine", "args", "env", "what", "hint", "good_args", "good_env"), REFUSED
)
def test_the_pinned_engine_refuses_and_accepts(
    engine: str,
    args: str,
    env: dict[str, str],
    what: str,
    hint: str,
    good_args: str,
    good_env: dict[str, str],
) -> None:
    refused = check(engine, args, env)
    assert len(refused) == 1, refused
    assert what in refused[0].what
    assert hint in refused[0].accepts + " " + refused[0].fix
    assert check(engine, good_args, good_env) == ()


@pytest.mark.parametrize("engine", [str(r) for r in RECIPES])
def test_a_health_path_the_engine_does_not_serve_is_refused(engine: str) -> None:
    args = {
        "sglang": SGLANG,
        "vllm": "org/m",
        "llamacpp": "--server -hf r:q",
        "ollama": ollama_script("serve"),
        "comfyui": comfy_script("--port 8188"),
    }[engine]
    (refusal,) = check(engine, args, health="/healthz")
    assert refusal.what == "health path /healthz"
    assert facts(engine).health_path in refusal.accepts
    assert check(engine, args) == ()


def test_a_refusal_of_an_unknown_flag_points_at_the_closest_spellings() -> None:
    (refusal,) = check("sglang", SGLANG + "--max-running-request 4")
    assert "--max-running-requests" in refusal.accepts


# ---- every launch the catalog can produce -----------------------------------------------------


def catalog_options() -> Iterator[tuple[str, ServeOptions]]:
    """Defaults, speculative decoding on and off, and context/concurrency overrides."""
    yield "defaults", ServeOptions(hf_token_configured=True)
    yield "no-spec", ServeOptions(hf_token_configured=True, spec_decode_enabled=False)
    yield "eagle-head", ServeOptions(hf_token_configured=True, eagle3_head="org/eagle3-head")
    yield "metrics", ServeOptions(hf_token_configured=True, metrics=True)
    yield (
        "overrides",
        ServeOptions(hf_token_configured=True, context_tokens=4096, concurrency=4, min_sequences=2),
    )


def refusals_of(reg: Registry, model_id: str, options: ServeOptions) -> tuple[int, list[str]]:
    resolution = resolve(reg, model_id, options)
    found = []
    for placement in resolution.placements:
        pod = placement.pod
        engine = placement.recipe.runtime
        launch = Launch(
            args=pod.args, env=pod.env, health_path=pod.health_path, secret_env=pod.secret_env,
            hook_source=pod.hook_source, hook_execs=pod.hook_execs,
        )  # fmt: skip
        found += [
            f"{placement.label}: {r.what}"
            for r in check_launch(
                launch,
                reg.engine_options[engine],
                entrypoint=placement.image.entrypoint,
                dispatch=placement.image.dispatch,
            )
        ]
    return len(resolution.placements), found


@pytest.mark.parametrize(
    ("label", "options"), list(catalog_options()), ids=lambda x: x if isinstance(x, str) else ""
)
def test_every_placement_of_every_servable_catalog_model_is_accepted(
    label: str, options: ServeOptions
) -> None:
    reg = real_registry()
    checked = 0
    for m in reg.models:
        placements, refused = refusals_of(reg, m.id, options)
        assert refused == [], (m.id, refused)
        checked += placements
    assert checked > 50  # the catalog's servable models over their ranked placements


SPEC_MODELS = [
    pytest.param({"spec_decode": "draft", "draft_model": "org/draft"}, id="draft"),
    pytest.param({"spec_decode": "eagle3", "draft_model": "org/eagle3", "K": 5}, id="eagle3"),
    pytest.param({"spec_decode": "p-eagle", "draft_model": "org/p-eagle"}, id="p-eagle"),
    pytest.param({"spec_decode": "mtp"}, id="mtp"),
]


@pytest.mark.parametrize("speed", SPEC_MODELS)
@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_speculative_decoding_flags_of_every_method_are_accepted(
    engine: str, speed: dict[str, object]
) -> None:
    m = sglang_model(
        "spec", vram_gb=16, runtimes=[engine], speed=speed, reasoning_parser={engine: "qwen3"}
    )
    reg = registry([m], engine_options=real_registry().engine_options)
    placements, refused = refusals_of(reg, "spec", ServeOptions(hf_token_configured=True))
    assert placements and refused == []
    pod = resolve(reg, "spec", ServeOptions()).placements[0].pod
    if speed["spec_decode"] != "mtp":
        assert "--speculative" in pod.args  # the flags were really there to be checked


def shared_plan(models: list[str]) -> FleetPlan:
    reg = real_registry()
    return plan_fleet(reg, settings(models=models, colocate=True), stack="test")


@pytest.mark.parametrize(
    "models",
    [
        pytest.param(["qwen3-8b", "llama-3.2-1b"], id="ollama"),
        pytest.param(["sdxl-1.0", "stable-audio-open-1.0", "ace-step-v1-3.5b"], id="comfyui"),
    ],
)
def test_co_located_groups_launch_as_their_engine_accepts(models: list[str]) -> None:
    fleet = shared_plan(models)
    assert any(p.shared for p in fleet.pods), "the group did not share a pod"
    assert [p for p in fleet.problems if p.rule == "launch-rejected"] == []


def test_the_check_sees_the_real_vllm_speculative_config_keys() -> None:
    spec = facts("vllm").flag_index["--speculative-config"]
    assert spec.json_fields is not None
    assert {"method", "model", "num_speculative_tokens", "parallel_drafting"} <= set(
        spec.json_fields
    )
    assert json.dumps("eagle3")[1:-1] in (spec.json_fields["method"].choices or ())


READ_IN_FULL = [
    pytest.param("sglang", SGLANG + "--tp-size 2 --enable-hierarchical-cache", [], id="plain"),
    pytest.param("sglang", SGLANG + "--tp-size=2", [], id="inline-value"),
    pytest.param("sglang", SGLANG + "--tp 2", ["flag --tp"], id="unknown-flag"),
    pytest.param("sglang", SGLANG + "--tp-size two", ["--tp-size two"], id="not-a-number"),
    pytest.param(
        "sglang", SGLANG + "--tp-size", ["flag --tp-size without its value"], id="missing-value"
    ),
    pytest.param(
        "sglang",
        SGLANG + "--tp-size --port",
        ["flag --tp-size without its value", "flag --port without its value"],
        id="option-as-value",
    ),
    pytest.param("sglang", SGLANG + "--random-seed -1", [], id="a-negative-number-value"),
    pytest.param(
        "sglang",
        SGLANG + "--random-seed -x",
        ["flag --random-seed without its value", "flag -x"],
        id="a-dash-word-is-an-option",
    ),
    pytest.param("sglang", SGLANG + "--kv-cache-dtype fp8_e4m3", [], id="a-choice"),
    pytest.param(
        "sglang", SGLANG + "--kv-cache-dtype fp9", ["--kv-cache-dtype fp9"], id="not-a-choice"
    ),
    pytest.param("sglang", SGLANG + "stray", ["argument `stray`"], id="a-positional-too-many"),
    pytest.param("vllm", "org/m --max-model-len 4096", [], id="vllm-positional"),
    pytest.param("vllm", "org/m --max_model_len 4096", [], id="vllm-underscores"),
    pytest.param("vllm", spec_config('{"method":"eagle3"}'), [], id="json-keys"),
    pytest.param("comfyui", comfy_script("--listen --port 8188"), [], id="optional-value-none"),
    pytest.param("comfyui", comfy_script("--listen 0.0.0.0"), [], id="optional-value"),
]


@pytest.mark.parametrize(("engine", "args", "refused"), READ_IN_FULL)
def test_flags_values_and_positionals_are_read_as_argparse_reads_them(
    engine: str, args: str, refused: list[str]
) -> None:
    assert [r.what for r in check(engine, args)] == refused


@pytest.mark.parametrize(
    ("script", "name", "reads"),
    [
        pytest.param('eval "$FRUTEBOX_PROVISION"', "FRUTEBOX_PROVISION", True, id="expanded"),
        pytest.param("echo ${HOME}/x", "HOME", True, id="expanded-in-braces"),
        pytest.param("echo $HOMEDIR", "HOME", False, id="a-longer-name"),
        pytest.param("echo HOME", "HOME", False, id="named-not-expanded"),
        pytest.param("os.environ.get( 'HF_TOKEN')", "HF_TOKEN", True, id="python-reads-it"),
        pytest.param("os.environ.get(HF_TOKEN)", "HF_TOKEN", False, id="python-unquoted"),
        pytest.param("echo $A-B", "A-B", False, id="not-a-variable-name"),
        pytest.param("echo $HOMEDIR $HOME", "HOME", True, id="a-longer-name-then-the-name"),
        pytest.param("echo ${HOMEDIR}${HOME", "HOME", True, id="braced-at-the-end"),
        pytest.param("echo $HOME_", "HOME", False, id="an-underscore-after"),
    ],
)
def test_a_launch_script_reads_the_variables_it_expands(
    script: str, name: str, reads: bool
) -> None:
    assert _script_reads(script, name) is reads


@pytest.mark.parametrize(
    ("script", "server"),
    [
        pytest.param('cd "$home"\nexec python main.py', "python main.py", id="the-last-line"),
        pytest.param("exec a\nexec b\necho done", "b", id="the-last-exec-not-the-last-line"),
        pytest.param("exec a\nexec b\n", "b", id="a-trailing-newline"),
        pytest.param("exec a\r\n  exec b  ", "b", id="crlf-and-indented"),
        pytest.param("exec a\nx\rexec b", "b", id="a-carriage-return-ends-a-line"),
        pytest.param("exec a\nx\x0cexec b", "b", id="a-form-feed-ends-a-line"),
        pytest.param("echo exec a\nexecb", None, id="no-line-starts-with-exec"),
        pytest.param("", None, id="empty"),
    ],
)
def test_a_launch_script_s_server_is_its_last_exec_line(script: str, server: str | None) -> None:
    assert _last_exec(script) == server


def test_args_that_cannot_be_split_into_words_are_refused() -> None:
    options = facts("vllm")
    unsplittable = Launch(args="org/m '", env={}, health_path=options.health_path)
    assert [r.what for r in check_launch(unsplittable, options, entrypoint="fixed-binary")] == [
        "args cannot be split into words (No closing quotation)"
    ]


def test_environment_refusals_come_in_the_order_the_launch_sets_its_variables() -> None:
    # An unread variable and a mistyped one, in both orders: the refusals follow the env
    # (the shape's checks are worked out once, then read per launch in that order).
    env = {"OLLAMA_NUM_PARALLEL": "four", "OLLAMA_NUM_PARALEL": "4", "OLLAMA_HOST": "0.0.0.0"}
    serve = ollama_script("serve")
    forward = [r.what for r in check("ollama", serve, env)]
    assert forward == ["OLLAMA_NUM_PARALLEL=four", "environment variable OLLAMA_NUM_PARALEL"]
    backward = [r.what for r in check("ollama", serve, dict(reversed(env.items())))]
    assert backward == forward[::-1]
    assert check("ollama", serve, {**env, "OLLAMA_NUM_PARALLEL": "4"})[0].what == (
        "environment variable OLLAMA_NUM_PARALEL"
    )  # the same names, another value: the value is read again


def engine_line(args: str) -> list[str]:
    """The engine's words of a launch: its args, or the line a launch script (the gateway
    first) execs."""
    words = shlex.split(args)
    if words[:2] == ["bash", "-c"]:
        execs = [ln for ln in words[2].splitlines() if ln.startswith("exec ")]
        return shlex.split(execs[-1].removeprefix("exec "))
    return words


@pytest.mark.parametrize(
    ("model_id", "engine", "flag"),
    [
        ("qwen3-235b-a22b", "sglang", "--enable-metrics"),
        ("qwen3-235b-a22b", "llamacpp", "--metrics"),
    ],
)
def test_measure_usage_turns_the_engines_counters_on_and_the_check_accepts_it(
    model_id: str, engine: str, flag: str
) -> None:
    on = plan_fleet(
        real_registry(),
        settings(models=[model_id], measureUsage=True, overrides={model_id: {"engine": engine}}),
        stack="test",
    )
    off = plan_fleet(
        real_registry(),
        settings(models=[model_id], overrides={model_id: {"engine": engine}}),
        stack="test",
    )
    args_on = on.models[0].candidates[0].pod.args
    args_off = off.models[0].candidates[0].pod.args
    assert flag in engine_line(args_on) and flag not in engine_line(args_off)
    assert [p for p in on.problems if p.rule == "launch-rejected"] == []
    # The flag is checked like any other: a misspelt one would be refused by the same facts.
    pod = on.models[0].candidates[0].pod
    typo = replace(pod, args=args_on.replace(flag, flag + "-typo"), words=())
    image = real_registry().images[Runtime(engine)]
    (refusal,) = check_launch(
        typo, facts(engine), entrypoint=image.entrypoint, dispatch=image.dispatch
    )
    assert flag + "-typo" in refusal.what


def test_a_dispatcher_entrypoint_takes_its_server_word_or_its_python_word_with_a_hook() -> None:
    image = real_registry().images[Runtime.LLAMACPP]
    dispatch = image.dispatch
    assert dispatch is not None
    options = facts("llamacpp")

    def refused(args: str, hook: str | None = None) -> list[str]:
        launch = Launch(args=args, env={}, health_path=options.health_path, hook_execs=hook)
        found = check_launch(launch, options, entrypoint=image.entrypoint, dispatch=dispatch)
        return [r.what for r in found]

    flags = "-hf r:q --port 18080"
    execs = dispatch.server_path
    assert refused(f"{dispatch.server_word} {flags}") == []
    assert refused(f"{dispatch.python_word} {flags}", hook=execs) == []
    # The server's flags with no dispatcher word: tools.sh prints its usage and exits.
    assert refused(flags) == ["args starting `-hf r:q`"]
    # Its Python without a hook that execs the server runs the convert script on the flags.
    unhooked = refused(f"{dispatch.python_word} {flags}")
    assert unhooked == [f"args starting `{dispatch.python_word} -hf`"]
    assert refused(f"{dispatch.python_word} {flags}", hook="/usr/bin/other") != []
    # The words after the dispatcher's are checked as the server's flags.
    assert refused(f"{dispatch.server_word} {flags} --ctx 4") == ["flag --ctx"]


def test_sglangs_counter_directory_is_a_variable_it_reads_and_made_before_it_starts() -> None:
    model_id = "qwen-3.6-27b"
    plan = plan_fleet(real_registry(), settings(models=[model_id], measureUsage=True), stack="t")
    pod = plan.models[0].candidates[0].pod
    assert [p for p in plan.problems if p.rule == "launch-rejected"] == []
    assert pod.env["PROMETHEUS_MULTIPROC_DIR"].startswith("/workspace/frutebox/counters/")
    script = shlex.split(pod.args)[2].splitlines()
    # Behind the gateway: the gateway starts, then the directory is made, then the engine.
    assert script[-2:-1] == ['mkdir -p "$PROMETHEUS_MULTIPROC_DIR"']
    assert any("caddy" in line for line in script[:-2])
    misspelt = {**pod.env, "PROMETHEUS_MULTIPROC_DIRS": "/x"}
    refused = check("sglang", pod.args, misspelt)
    assert [r.what for r in refused] == ["environment variable PROMETHEUS_MULTIPROC_DIRS"]
