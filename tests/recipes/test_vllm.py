"""vLLM: the model as `vllm serve`'s first argument, TP per placement, Mistral's formats, and
behind the gateway its start hook, which the seeding pod puts on the volume."""

from __future__ import annotations

import hashlib
from dataclasses import asdict

import pytest
import yaml

from frutebox_infra.catalog.schema import Registry, Runtime
from frutebox_infra.planner.plan import plan_fleet
from frutebox_infra.recipes import PodSpec, ServeOptions
from frutebox_infra.recipes.gateway import CONFIG_ENV, HOOK_ROOT, KEY_ENV, caddyfile
from frutebox_infra.recipes.vllm import ENGINE_CONFIG, ENGINE_CONFIG_TEXT, VLLM
from frutebox_infra.seeding.protocol import HfSnapshotJob, PlacedText
from frutebox_infra.stack.environment import Environment
from tests.factories import flag, gqa, model, settings, words
from tests.recipes.conftest import BuildPod

MISTRAL_FORMAT = [
    "--tokenizer-mode",
    "mistral",
    "--config-format",
    "mistral",
    "--load-format",
    "mistral",
]


def vllm_model(model_id: str = "test-vllm", **fields: object):  # type: ignore[no-untyped-def]
    data: dict[str, object] = {
        "runtimes": ["vllm"],
        "source": {"hf_repo": f"org/{model_id}"},
        "weights": {"format": "bf16", "disk_gb": 10, "vram_gb": 10},
        "context": 8192,
    }
    data.update(fields)
    return model(model_id, **data)


def test_model_is_the_first_argument(build_pod: BuildPod) -> None:
    pod = build_pod("pixtral", Runtime.VLLM, "NVIDIA A40", 1)
    assert words(pod.args)[0] == "mistralai/Pixtral-12B-2409"
    assert pod.image.startswith("vllm/vllm-openai:")
    # Without a gateway (a registry with no gateway release) it serves the port itself.
    assert flag(pod.args, "--port") == str(pod.port)
    assert flag(pod.args, "--host") == "0.0.0.0"
    assert pod.start_hook is None and "--config" not in words(pod.args)


def gateway_pod(catalog: Registry, *, seeded: bool = True) -> PodSpec:
    plan = plan_fleet(catalog, settings(models=["pixtral"], budgetUsdPerHour=1000,
                                        seeding=seeded), stack="s",
                      environment=Environment(hf_token=True))  # fmt: skip
    m = plan.model("pixtral")
    assert m is not None and m.placement is not None
    return m.placement.pod


def test_behind_the_gateway_it_listens_on_loopback_and_names_the_file_only_the_hook_writes(
    catalog: Registry,
) -> None:
    pod = gateway_pod(catalog)
    assert (flag(pod.args, "--host"), flag(pod.args, "--port")) == ("127.0.0.1", "18000")
    assert pod.port == 8000  # the published port is the gateway's
    assert flag(pod.args, "--config") == ENGINE_CONFIG
    hook = pod.start_hook
    assert hook is not None and hook.engine_config == ENGINE_CONFIG
    assert pod.env["PYTHONPATH"] == hook.directory and hook.path.endswith("/sitecustomize.py")
    assert hook.directory == f"{HOOK_ROOT}/{hashlib.sha256(hook.text.encode()).hexdigest()[:16]}"
    assert pod.serving_key_env == (KEY_ENV,) and KEY_ENV not in pod.env
    assert pod.env[CONFIG_ENV] == caddyfile(
        catalog.engine_routes[Runtime.VLLM], port=8000, upstream_port=18000
    )
    # The key is never in the hook (it reads it from the pod's env at start).
    assert "Bearer" not in hook.text and KEY_ENV in hook.text


def test_what_the_hook_writes_is_flags_the_pinned_vllm_takes(catalog: Registry) -> None:
    facts = catalog.engine_options[Runtime.VLLM]
    config = yaml.safe_load(ENGINE_CONFIG_TEXT)
    assert isinstance(config, dict) and config
    for key, value in config.items():
        found = facts.flag_index.get(f"--{key}")
        assert found is not None, key
        assert found.type == "flag" and value is True
    assert facts.flag_index["--config"].type == "str"


def test_unseeded_it_refuses_to_plan_naming_why(catalog: Registry) -> None:
    plan = plan_fleet(catalog, settings(models=["pixtral"], budgetUsdPerHour=1000, seeding=False),
                      stack="s", environment=Environment(hf_token=True))  # fmt: skip
    (problem,) = [p for p in plan.problems if p.rule == "gateway-needs-seeding"]
    assert problem.message.startswith("pixtral: vllm/vllm-openai:")
    assert "seeding is off" in problem.message and "seeding to true" in problem.fix


def test_the_seed_job_puts_the_hook_on_the_volume(catalog: Registry) -> None:
    plan = plan_fleet(catalog, settings(models=["pixtral"], budgetUsdPerHour=1000), stack="s",
                      environment=Environment(hf_token=True))  # fmt: skip
    m, decision = plan.model("pixtral"), plan.seeding.of("pixtral") if plan.seeding else None
    assert m is not None and m.placement is not None and decision is not None
    job = decision.job
    assert isinstance(job, HfSnapshotJob)
    hook = m.placement.pod.start_hook
    assert hook is not None
    assert job.texts == (PlacedText(path=hook.path.removeprefix("/workspace/"), text=hook.text),)


@pytest.mark.parametrize("count", [1, 2, 4, 8])
def test_tensor_parallel_size_is_the_placement_gpu_count(build_pod: BuildPod, count: int) -> None:
    pod = build_pod("pixtral", Runtime.VLLM, "NVIDIA A40", count)
    assert flag(pod.args, "--tensor-parallel-size") == str(count)


def test_context_and_concurrency_flags(build_pod: BuildPod) -> None:
    pod = build_pod("pixtral", Runtime.VLLM, "NVIDIA A40", 1)
    assert flag(pod.args, "--max-model-len") == "32768"
    assert flag(pod.args, "--max-num-seqs") == "16"
    pod = build_pod("pixtral", Runtime.VLLM, "NVIDIA A40", 1, context_tokens=4096, concurrency=3)
    assert (flag(pod.args, "--max-model-len"), flag(pod.args, "--max-num-seqs")) == ("4096", "3")


@pytest.mark.parametrize(
    ("model_id", "gpu_id", "count"),
    [
        pytest.param("pixtral", "NVIDIA A40", 1, id="pixtral"),
        pytest.param("mistral-large-3", "NVIDIA H200", 8, id="mistral-large-3"),
    ],
)
def test_mistral_models_load_mistral_formats(
    build_pod: BuildPod, model_id: str, gpu_id: str, count: int
) -> None:
    split = words(build_pod(model_id, Runtime.VLLM, gpu_id, count).args)
    for name, value in zip(MISTRAL_FORMAT[::2], MISTRAL_FORMAT[1::2], strict=True):
        assert flag(split, name) == value


def test_other_models_get_no_mistral_flags(build_pod: BuildPod) -> None:
    assert "--tokenizer-mode" not in words(
        build_pod("apertus-70b", Runtime.VLLM, "NVIDIA H200", 2).args
    )


def test_revision_and_reasoning_parser_when_recorded(build_pod: BuildPod) -> None:
    m = vllm_model(
        "pinned",
        source={"hf_repo": "org/p", "revision": "a" * 40},
        reasoning_parser={"vllm": "qwen3"},
    )
    pod = build_pod(m, Runtime.VLLM, "NVIDIA H200", 1)
    assert flag(pod.args, "--revision") == "a" * 40
    assert flag(pod.args, "--reasoning-parser") == "qwen3"
    plain = build_pod(vllm_model("unpinned"), Runtime.VLLM, "NVIDIA H200", 1)
    assert "--revision" not in words(plain.args)
    assert "--reasoning-parser" not in words(plain.args)


@pytest.mark.parametrize(
    ("gpu_id", "kv_flag"),
    [
        pytest.param("NVIDIA H200", "fp8", id="fp8-gpu"),
        pytest.param("NVIDIA A40", None, id="ampere-keeps-bf16"),
    ],
)
def test_fp8_kv_cache_only_where_the_gpu_runs_it(
    build_pod: BuildPod,
    catalog,
    gpu_id: str,
    kv_flag: str | None,  # type: ignore[no-untyped-def]
) -> None:
    split = words(build_pod("pixtral", Runtime.VLLM, gpu_id, 1).args)
    if kv_flag is None:
        assert "--kv-cache-dtype" not in split
        assert VLLM().kv_dtype_bytes(catalog.gpu(gpu_id)) == 2
    else:
        assert flag(split, "--kv-cache-dtype") == kv_flag
        assert VLLM().kv_dtype_bytes(catalog.gpu(gpu_id)) == 1


@pytest.mark.parametrize(
    ("metrics", "seeded", "kept"),
    [
        pytest.param(True, True, True, id="measured-seeded"),
        pytest.param(True, False, False, id="measured-downloading"),
        pytest.param(False, True, False, id="unmeasured"),
    ],
)
def test_a_measured_pod_of_seeded_weights_keeps_its_counters_on_the_volume(
    build_pod: BuildPod, metrics: bool, seeded: bool, kept: bool
) -> None:
    # vLLM fails at start without the directory and its fixed ENTRYPOINT cannot make it: only
    # a pod whose seeding pod made it names it.
    pod = build_pod("pixtral", Runtime.VLLM, "NVIDIA H200", 1, seeded=seeded, metrics=metrics)
    where = pod.env.get("PROMETHEUS_MULTIPROC_DIR")
    assert where == ("/workspace/frutebox/counters/pixtral/vllm-v0.31.0-cu129" if kept else None)
    assert words(pod.args)[0] != "bash"  # the image's program, as before


def test_weights_cache_lives_on_the_volume(build_pod: BuildPod) -> None:
    assert (
        build_pod("pixtral", Runtime.VLLM, "NVIDIA A40", 1).env["HF_HOME"].startswith("/workspace/")
    )


@pytest.mark.parametrize(
    ("count", "ok"),
    [
        pytest.param(1, False, id="below-min"),
        pytest.param(2, True, id="min"),
        pytest.param(3, False, id="not-power-of-two"),
        pytest.param(4, True, id="four"),
        pytest.param(8, False, id="does-not-divide-12-heads"),
    ],
)
def test_count_is_a_power_of_two_dividing_heads(count: int, ok: bool) -> None:
    m = vllm_model("tp", min_gpus=2, architecture=asdict(gqa(heads=12, kv_heads=4)))
    assert (VLLM().count_problem(m, count) is None) is ok


def test_vllm_only_model_without_weights_is_missing_facts() -> None:
    reason = VLLM().missing(vllm_model("gappy", weights={"format": "bf16"}))
    assert reason is not None and "weights.vram_gb" in reason and "vllm" in reason


def test_fp8_checkpoint_requires_fp8_gpu() -> None:
    m = vllm_model("fp8", weights={"format": "fp8", "vram_gb": 10})
    assert VLLM().serving(m, ServeOptions()).require_fp8
