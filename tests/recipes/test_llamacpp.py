"""llama.cpp server: its flags after the full image's dispatcher word, `-hf REPO:QUANT`, -c for
every slot, and behind the gateway the start hook that execs it, which the seeding pod puts on
the volume."""

from __future__ import annotations

import hashlib

import pytest

from frutebox_infra.catalog.schema import Registry, Runtime
from frutebox_infra.planner.plan import plan_fleet
from frutebox_infra.recipes import PodSpec
from frutebox_infra.recipes.gateway import CONFIG_ENV, HOOK_ROOT, KEY_ENV, caddyfile
from frutebox_infra.recipes.llamacpp import LlamaCpp
from frutebox_infra.seeding.protocol import HfSnapshotJob, PlacedText
from tests.factories import flag, model, settings, words
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
    assert split[:3] == ["--server", "-hf", ref]
    assert flag(split, "--host") == "0.0.0.0"
    assert flag(split, "--port") == "8080"
    assert flag(split, "-ngl") == "999"
    assert flag(split, "--parallel") == "8"
    # llama.cpp splits -c across the slots: 8 slots of CTX need 8 x CTX (the seed's bug).
    assert flag(split, "-c") == str(8 * context)
    assert {"--jinja", "--cont-batching"} <= set(split)


def test_the_entrypoint_dispatches_so_args_are_its_server_word_then_flags(
    build_pod: BuildPod, catalog: Registry
) -> None:
    # Without a gateway (a registry with no gateway release): the dispatcher execs the server.
    split = words(build_pod("kimi-k2.6", Runtime.LLAMACPP, A100, 8).args)
    dispatch = catalog.images[Runtime.LLAMACPP].dispatch
    assert dispatch is not None and split[0] == dispatch.server_word
    assert split[1] == "-hf" and flag(split, "--host") == "0.0.0.0"
    assert not any("llama-server" in w for w in split)


def gateway_pod(catalog: Registry, model_id: str = "kimi-k2.6", seeded: bool = True) -> PodSpec:
    plan = plan_fleet(catalog, settings(models=[model_id], budgetUsdPerHour=1000,
                                        seeding=seeded), stack="s")  # fmt: skip
    m = plan.model(model_id)
    assert m is not None and m.placement is not None
    return m.placement.pod


def test_behind_the_gateway_its_python_runs_the_hook_which_execs_the_server_on_loopback(
    catalog: Registry,
) -> None:
    pod = gateway_pod(catalog)
    image = catalog.images[Runtime.LLAMACPP]
    assert image.dispatch is not None
    split = words(pod.args)
    assert split[0] == image.dispatch.python_word and split[1:3] == ["-hf", split[2]]
    assert (flag(split, "--host"), flag(split, "--port")) == ("127.0.0.1", "18080")
    assert pod.port == 8080  # the published port is the gateway's
    hook = pod.start_hook
    assert hook is not None and hook.execs == image.dispatch.server_path
    assert hook.engine_config is None
    assert pod.env["PYTHONPATH"] == hook.directory
    assert hook.directory == f"{HOOK_ROOT}/{hashlib.sha256(hook.text.encode()).hexdigest()[:16]}"
    assert pod.serving_key_env == (KEY_ENV,) and KEY_ENV not in pod.env
    assert pod.env[CONFIG_ENV] == caddyfile(
        catalog.engine_routes[Runtime.LLAMACPP], port=8080, upstream_port=18080
    )
    assert "Bearer" not in hook.text and KEY_ENV in hook.text


def test_unseeded_behind_the_gateway_it_refuses_to_plan_naming_why(catalog: Registry) -> None:
    plan = plan_fleet(catalog, settings(models=["kimi-k2.6"], budgetUsdPerHour=1000,
                                        seeding=False), stack="s")  # fmt: skip
    (problem,) = [p for p in plan.problems if p.rule == "gateway-needs-seeding"]
    assert problem.message.startswith("kimi-k2.6: ghcr.io/ggml-org/llama.cpp:full-cuda")
    assert "seeding to true" in problem.fix


def test_the_seed_job_puts_the_hook_beside_the_gguf_files(catalog: Registry) -> None:
    plan = plan_fleet(catalog, settings(models=["kimi-k2.6"], budgetUsdPerHour=1000), stack="s")
    m, decision = plan.model("kimi-k2.6"), plan.seeding.of("kimi-k2.6") if plan.seeding else None
    assert m is not None and m.placement is not None and decision is not None
    job = decision.job
    assert isinstance(job, HfSnapshotJob) and job.quant
    hook = m.placement.pod.start_hook
    assert hook is not None
    assert job.texts == (PlacedText(path=hook.path.removeprefix("/workspace/"), text=hook.text),)


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
    assert pod.image.startswith("ghcr.io/ggml-org/llama.cpp:full-cuda")
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
