"""llama.cpp server: flags only (fixed entrypoint), `-hf REPO:QUANT`, and -c for every slot."""

from __future__ import annotations

import pytest

from frutebox_infra.catalog.schema import Runtime
from frutebox_infra.recipes.llamacpp import LlamaCpp
from tests.factories import flag, model, words
from tests.recipes.conftest import BuildPod

A100 = "NVIDIA A100 80GB PCIe"


@pytest.mark.parametrize(
    ("model_id", "ref", "context"),
    [
        pytest.param("kimi-k2.7-code", "unsloth/Kimi-K2.7-Code-GGUF:UD-Q8_K_XL", 32768, id="k2.7"),
        pytest.param("kimi-k2.6", "unsloth/Kimi-K2.6-GGUF:UD-Q4_K_XL", 16384, id="k2.6"),
        pytest.param(
            "qwen3-235b-a22b",
            "unsloth/Qwen3-235B-A22B-GGUF:UD-Q4_K_XL",
            16384,
            id="qwen3-235b-gguf",
        ),
    ],
)
def test_flags_are_the_spec_with_context_for_every_slot(
    build_pod: BuildPod, model_id: str, ref: str, context: int
) -> None:
    split = words(build_pod(model_id, Runtime.LLAMACPP, A100, 8).args)
    assert split[:2] == ["-hf", ref]
    assert flag(split, "--host") == "0.0.0.0"
    assert flag(split, "--port") == "8080"
    assert flag(split, "-ngl") == "999"
    assert flag(split, "--parallel") == "8"
    # llama.cpp splits -c across the slots: 8 slots of CTX need 8 x CTX (the seed's bug).
    assert flag(split, "-c") == str(8 * context)
    assert {"--jinja", "--cont-batching"} <= set(split)


def test_the_entrypoint_is_the_server_so_args_are_flags_only(build_pod: BuildPod) -> None:
    split = words(build_pod("kimi-k2.6", Runtime.LLAMACPP, A100, 8).args)
    assert split[0].startswith("-")
    assert not any("llama-server" in w for w in split)


def test_hf_takes_no_revision(build_pod: BuildPod) -> None:
    m = model(
        "pinned-gguf",
        runtimes=["llamacpp"],
        source={
            "gguf": {
                "repo": "org/m-GGUF",
                "quant": "Q4_K_M",
                "revision": "b" * 40,
                "vram_gb": 5,
                "context": 4096,
            }
        },
    )
    pod = build_pod(m, Runtime.LLAMACPP, A100, 1)
    assert "--revision" not in words(pod.args)
    assert "b" * 40 not in pod.args
    assert any("b" * 40 in note for note in pod.notes)  # recorded, said out loud
    assert LlamaCpp().pod_notes(m) == pod.notes  # known before it is rendered


@pytest.mark.parametrize(
    ("concurrency", "context"),
    [pytest.param(4, 8192, id="4x8k"), pytest.param(1, 32768, id="1x32k")],
)
def test_c_is_slots_times_context_after_overrides(
    build_pod: BuildPod, concurrency: int, context: int
) -> None:
    pod = build_pod(
        "kimi-k2.6", Runtime.LLAMACPP, A100, 8, concurrency=concurrency, context_tokens=context
    )
    assert flag(pod.args, "--parallel") == str(concurrency)
    assert flag(pod.args, "-c") == str(concurrency * context)


def test_download_cache_lives_on_the_volume(build_pod: BuildPod) -> None:
    pod = build_pod("kimi-k2.6", Runtime.LLAMACPP, A100, 8)
    assert pod.env["LLAMA_CACHE"].startswith("/workspace/")
    assert pod.image.startswith("ghcr.io/ggml-org/llama.cpp:server-cuda")
    assert (pod.port, pod.health_path) == (8080, "/health")


@pytest.mark.parametrize(
    ("source", "gap"),
    [
        pytest.param({"hf_repo": "org/m"}, "source.gguf", id="no-gguf"),
        pytest.param(
            {"gguf": {"repo": "a/b", "quant": "Q4", "context": 4096}}, "vram", id="no-size"
        ),
        pytest.param(
            {"gguf": {"repo": "a/b", "quant": "Q4", "vram_gb": 4}}, "context", id="no-context"
        ),
    ],
)
def test_missing_recipe_facts_are_named(source: dict[str, object], gap: str) -> None:
    reason = LlamaCpp().missing(model("gappy", runtimes=["llamacpp"], source=source))
    assert reason is not None and gap in reason


def test_counts_need_no_power_of_two_layers_are_split() -> None:
    gguf = {"repo": "a/b", "quant": "Q4", "vram_gb": 4, "context": 4096}
    m = model("split", runtimes=["llamacpp"], source={"gguf": gguf})
    assert LlamaCpp().count_problem(m, 3) is None
    assert LlamaCpp().count_problem(m, 6) is None
