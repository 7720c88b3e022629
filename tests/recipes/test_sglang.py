"""SGLang: the exact launch command, tensor parallelism per placement, and its recipe facts."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from frutebox_infra.catalog.schema import Runtime
from frutebox_infra.recipes.sglang import SGLang
from tests.factories import flag, gqa, sglang_model, words
from tests.recipes.conftest import BuildPod

H200 = "NVIDIA H200"


def test_qwen36_27b_command_is_exactly_the_spec(build_pod: BuildPod) -> None:
    pod = build_pod("qwen-3.6-27b", Runtime.SGLANG, H200, 1)
    assert words(pod.args) == [
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "Qwen/Qwen3.6-27B-FP8",
        "--revision",
        "c79abb8dddf284f31fd5a44fed917f261c72948b",
        "--host",
        "0.0.0.0",
        "--port",
        "8080",
        "--tp-size",
        "1",
        "--context-length",
        "32768",
        "--reasoning-parser",
        "qwen3",
        "--max-running-requests",
        "16",
        "--kv-cache-dtype",
        "fp8_e4m3",
        "--enable-hierarchical-cache",
    ]


def test_qwen3_235b_command_without_a_revision(build_pod: BuildPod) -> None:
    pod = build_pod("qwen3-235b-a22b", Runtime.SGLANG, H200, 2)
    assert words(pod.args) == [
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "Qwen/Qwen3-235B-A22B-FP8",
        "--host",
        "0.0.0.0",
        "--port",
        "8080",
        "--tp-size",
        "2",
        "--context-length",
        "32768",
        "--reasoning-parser",
        "qwen3",
        "--max-running-requests",
        "16",
        "--kv-cache-dtype",
        "fp8_e4m3",
        "--enable-hierarchical-cache",
    ]


@pytest.mark.parametrize("count", [2, 4, 8])
def test_tp_flag_is_the_placement_gpu_count(build_pod: BuildPod, count: int) -> None:
    pod = build_pod("qwen3-235b-a22b", Runtime.SGLANG, H200, count)
    assert flag(pod.args, "--tp-size") == str(count)


@pytest.mark.parametrize("model_id", ["qwen3-235b-a22b", "qwen-3.6-27b"])
def test_reasoning_models_get_their_parser(build_pod: BuildPod, model_id: str) -> None:
    assert flag(build_pod(model_id, Runtime.SGLANG, H200, 2).args, "--reasoning-parser") == "qwen3"


def test_no_parser_flag_for_a_model_without_one(build_pod: BuildPod) -> None:
    m = sglang_model("plain", vram_gb=10)
    assert "--reasoning-parser" not in words(build_pod(m, Runtime.SGLANG, H200, 1).args)


def test_overrides_reach_context_and_concurrency(build_pod: BuildPod) -> None:
    pod = build_pod("qwen-3.6-27b", Runtime.SGLANG, H200, 1, context_tokens=8192, concurrency=4)
    assert flag(pod.args, "--context-length") == "8192"
    assert flag(pod.args, "--max-running-requests") == "4"


def test_the_image_has_no_server_command_so_args_start_the_server(build_pod: BuildPod) -> None:
    pod = build_pod("qwen-3.6-27b", Runtime.SGLANG, H200, 1)
    assert pod.image.startswith("lmsysorg/sglang:")
    assert words(pod.args)[:3] == ["python3", "-m", "sglang.launch_server"]
    assert (pod.port, pod.health_path, pod.ports) == (8080, "/health", ["8080/http"])


def test_measured_its_counters_are_kept_on_the_volume_in_a_directory_the_launch_makes(
    build_pod: BuildPod,
) -> None:
    pod = build_pod("qwen-3.6-27b", Runtime.SGLANG, H200, 1, metrics=True)
    # One directory per model and engine release: a restart or a new pod carries on counting.
    assert pod.env["PROMETHEUS_MULTIPROC_DIR"] == (
        "/workspace/frutebox/counters/qwen-3.6-27b/sglang-v0.5.21"
    )
    bash, dash_c, script = words(pod.args)
    assert (bash, dash_c) == ("bash", "-c")
    lines = script.splitlines()
    # SGLang fails at start without the directory, so it is made before the engine starts.
    assert lines[0] == "set -eo pipefail"
    assert lines.index('mkdir -p "$PROMETHEUS_MULTIPROC_DIR"') == len(lines) - 2
    assert words(lines[-1])[:4] == ["exec", "python3", "-m", "sglang.launch_server"]
    assert "--enable-metrics" in words(lines[-1])
    unmeasured = build_pod("qwen-3.6-27b", Runtime.SGLANG, H200, 1)
    assert "PROMETHEUS_MULTIPROC_DIR" not in unmeasured.env
    assert "--enable-metrics" not in words(unmeasured.args)


def test_weights_cache_lives_on_the_volume(build_pod: BuildPod) -> None:
    env = build_pod("qwen-3.6-27b", Runtime.SGLANG, H200, 1).env
    assert env["HF_HOME"].startswith("/workspace/")


@pytest.mark.parametrize(
    ("gated", "secret_env"),
    [pytest.param(True, ("HF_TOKEN",), id="gated"), pytest.param(False, (), id="open")],
)
def test_gated_weights_ask_for_the_token_env(
    build_pod: BuildPod, gated: bool, secret_env: tuple[str, ...]
) -> None:
    m = sglang_model("maybe-gated", source={"hf_repo": "org/m", "gated": gated})
    pod = build_pod(m, Runtime.SGLANG, H200, 1, hf_token_configured=True)
    assert pod.secret_env == secret_env
    assert "HF_TOKEN" not in pod.env  # the value is filled in at deploy time, never stored


@pytest.mark.parametrize(
    ("fields", "gap"),
    [
        pytest.param({"weights": {"format": "fp8"}}, "weights.vram_gb", id="no-weights"),
        pytest.param(
            {"source": {"gguf": {"repo": "a/b", "quant": "Q4"}}}, "source.hf_repo", id="no-hf-repo"
        ),
        pytest.param({"context": None}, "context", id="no-context"),
    ],
)
def test_missing_recipe_facts_are_named(fields: dict[str, object], gap: str) -> None:
    reason = SGLang().missing(sglang_model("gappy", **fields))
    assert reason is not None and gap in reason


def test_a_complete_model_misses_nothing() -> None:
    assert SGLang().missing(sglang_model("complete")) is None


def test_fp8_checkpoints_require_an_fp8_gpu_and_bf16_do_not() -> None:
    from frutebox_infra.recipes import ServeOptions

    assert SGLang().serving(sglang_model("f", fmt="fp8"), ServeOptions()).require_fp8
    assert not SGLang().serving(sglang_model("b", fmt="bf16"), ServeOptions()).require_fp8


@pytest.mark.parametrize(
    ("count", "ok"),
    [
        pytest.param(1, False, id="below-min"),
        pytest.param(2, True, id="min"),
        pytest.param(3, False, id="not-power-of-two"),
        pytest.param(4, True, id="four"),
        pytest.param(6, False, id="six"),
        pytest.param(8, True, id="eight"),
    ],
)
def test_count_is_a_power_of_two_at_or_above_min_gpus(count: int, ok: bool) -> None:
    m = sglang_model("tp", min_gpus=2, architecture=asdict(gqa(heads=48, kv_heads=48)))
    assert (SGLang().count_problem(m, count) is None) is ok
