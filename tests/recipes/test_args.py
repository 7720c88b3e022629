"""Every engine's args string is shell-quoted: split as a shell would, its words join back."""

from __future__ import annotations

import shlex

import pytest

from frutebox_infra.catalog.schema import Runtime
from tests.factories import words
from tests.recipes.conftest import BuildPod


@pytest.mark.parametrize(
    ("model_id", "runtime", "gpu_id", "count"),
    [
        pytest.param("kimi-k2.7-code", Runtime.LLAMACPP, "NVIDIA A100 80GB PCIe", 8, id="llamacpp"),
        pytest.param("qwen3-235b-a22b", Runtime.SGLANG, "NVIDIA H200", 4, id="sglang"),
        pytest.param("pixtral", Runtime.VLLM, "NVIDIA H200", 8, id="vllm-pixtral"),
        pytest.param("mistral-large-3", Runtime.VLLM, "NVIDIA H200", 8, id="vllm-mistral-large-3"),
        pytest.param("apertus-70b", Runtime.VLLM, "NVIDIA H200", 8, id="vllm-apertus-70b"),
    ],
)
def test_args_survive_a_shell_split_round_trip(
    build_pod: BuildPod, model_id: str, runtime: Runtime, gpu_id: str, count: int
) -> None:
    args = build_pod(model_id, runtime, gpu_id, count).args
    assert shlex.join(words(args)) == args
