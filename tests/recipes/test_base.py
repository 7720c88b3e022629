"""What every recipe shares: here, the pod that reads weights a CPU pod seeded."""

from __future__ import annotations

import pytest

from frutebox_infra.recipes import RECIPES
from frutebox_infra.registry import Runtime
from tests.recipes.conftest import BuildPod


@pytest.mark.parametrize(
    ("model_id", "runtime", "gpu", "offline", "loads_at_start"),
    [
        pytest.param("qwen-3.6-27b", Runtime.SGLANG, "NVIDIA H200", {"HF_HUB_OFFLINE": "1"}, True,
                     id="sglang"),
        pytest.param("apertus-70b", Runtime.VLLM, "NVIDIA H200", {"HF_HUB_OFFLINE": "1"}, True,
                     id="vllm"),
        pytest.param("kimi-k2.6", Runtime.LLAMACPP, "NVIDIA H200", {"LLAMA_ARG_OFFLINE": "1"},
                     True, id="llama-cpp"),
        pytest.param("qwen3-8b", Runtime.OLLAMA, "NVIDIA RTX A4000", {}, False, id="ollama"),
        pytest.param("sdxl-1.0", Runtime.COMFYUI, "NVIDIA RTX A4000", {}, False, id="comfyui"),
    ],
)  # fmt: skip
def test_a_seeded_pod_reads_offline_where_its_engine_would_download(
    build_pod: BuildPod,
    model_id: str,
    runtime: Runtime,
    gpu: str,
    offline: dict[str, str],
    loads_at_start: bool,
) -> None:
    recipe = RECIPES[runtime]
    pod = build_pod(model_id, runtime, gpu, 8 if runtime is Runtime.LLAMACPP else 1,
                    hf_token_configured=True)  # fmt: skip
    seeded = recipe.seeded_pod(pod)
    assert recipe.loads_weights_at_start is loads_at_start
    assert dict(seeded.env) == {**pod.env, **offline}
    assert seeded.args == pod.args  # --revision and -hf stay: they name what is read
    if offline:
        assert seeded.secret_env == ()  # offline, no token is ever sent
    else:
        assert seeded == pod
