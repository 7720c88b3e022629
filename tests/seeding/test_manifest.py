"""What each model seeds follows from the registry and the pod its recipe renders: the engine's
cache directory from the pod's env, the source and revision from models.yaml."""

from __future__ import annotations

import dataclasses

import pytest

from frutebox_infra.catalog.schema import Model, Runtime
from frutebox_infra.deploy.contract import wire_json
from frutebox_infra.emulator.launch_reads import release_checked
from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.planner.resolver import resolve
from frutebox_infra.plumbing.validation import validate_json
from frutebox_infra.recipes.base import VOLUME_PATH, ServeOptions
from frutebox_infra.recipes.comfyui import MODELS_DIR
from frutebox_infra.seeding.manifest import (
    HF_FORMAT_SHARDS,
    MISTRAL_NATIVE,
    OTHER_WEIGHT_FORMATS,
    Unseedable,
    seed_job,
    seed_plan,
)
from frutebox_infra.seeding.protocol import (
    FilesJob,
    HfSnapshotJob,
    OllamaJob,
    PlacedArchive,
    SeedJob,
)
from tests.factories import real_registry, settings

TOKEN = ServeOptions(hf_token_configured=True)


def job_for(model_id: str, **env: str | None) -> SeedJob | Unseedable:
    """The seed job of a catalog model on the pod of its cheapest placement (env overridden)."""
    resolution = resolve(real_registry(), model_id, TOKEN)
    assert resolution.placements and resolution.recipe is not None and resolution.model
    pod = resolution.placements[0].pod
    merged = {k: v for k, v in {**pod.env, **env}.items() if v is not None}
    pod = dataclasses.replace(pod, env=merged)
    return seed_job(resolution.model, resolution.recipe.runtime, pod)


def model(model_id: str) -> Model:
    found = real_registry().model(model_id)
    assert found is not None
    return found


@pytest.mark.parametrize(
    ("model_id", "revision", "refs"),
    [
        pytest.param(
            "qwen-3.6-27b", "c79abb8dddf284f31fd5a44fed917f261c72948b", (), id="pinned-commit"
        ),
        pytest.param("qwen3-235b-a22b", "main", ("main",), id="unpinned-main"),
    ],
)
def test_sglang_seeds_the_hub_cache_under_hf_home(
    model_id: str, revision: str, refs: tuple[str, ...]
) -> None:
    job = job_for(model_id)

    assert isinstance(job, HfSnapshotJob)
    assert job.repo == model(model_id).source.hf_repo  # type: ignore[union-attr]
    assert (job.revision, job.refs) == (revision, refs)
    # images.yaml: HF_HOME=/workspace/huggingface; huggingface_hub caches in $HF_HOME/hub.
    assert job.cacheDir == "huggingface/hub"
    assert job.quant is None and set(OTHER_WEIGHT_FORMATS) <= set(job.ignoreBesideSafetensors)


def test_an_hf_hub_cache_in_the_pod_env_wins_over_hf_home() -> None:
    job = job_for("qwen-3.6-27b", HF_HUB_CACHE="/workspace/hubcache")

    assert isinstance(job, HfSnapshotJob) and job.cacheDir == "hubcache"


@pytest.mark.parametrize(
    ("model_id", "kept", "skipped"),
    [
        pytest.param("mistral-large-3", MISTRAL_NATIVE, HF_FORMAT_SHARDS, id="mistral-format"),
        pytest.param("apertus-70b", HF_FORMAT_SHARDS, MISTRAL_NATIVE, id="transformers-format"),
    ],
)
def test_vllm_seeds_only_the_checkpoint_format_it_is_launched_to_read(
    model_id: str, kept: tuple[str, ...], skipped: tuple[str, ...]
) -> None:
    job = job_for(model_id)

    assert isinstance(job, HfSnapshotJob)
    assert set(skipped) <= set(job.ignoreBesideSafetensors)
    assert not set(kept) & set(job.ignoreBesideSafetensors)


def test_llama_cpp_seeds_its_quant_into_llama_cache_with_main_pointing_at_it() -> None:
    job = job_for("kimi-k2.6")

    assert isinstance(job, HfSnapshotJob)
    assert (job.repo, job.quant) == ("unsloth/Kimi-K2.6-GGUF", "UD-Q4_K_XL")
    # llama.cpp reads LLAMA_CACHE itself as the hub cache (no hub/ below it).
    assert job.cacheDir == "llama.cpp"
    assert (job.revision, job.refs) == ("main", ("main",))


def test_ollama_seeds_the_pods_own_store_and_the_releases_its_launch_checks() -> None:
    job = job_for("qwen3-8b")
    gateway, ollama = real_registry().gateway, real_registry().images[Runtime.OLLAMA]
    assert gateway is not None and ollama.engine_archive is not None

    assert job == OllamaJob(
        modelId="qwen3-8b",
        tag="qwen3:8b",
        store="ollama/models/qwen3-8b",
        archives=(
            PlacedArchive(
                url=gateway.url,
                path=f"frutebox/gateway/caddy-{gateway.version}.tar.gz",
                sha512=gateway.sha512,
            ),
            PlacedArchive(
                url=ollama.engine_archive.url,
                path=f"frutebox/engines/ollama-{ollama.engine_version}-ollama-linux-amd64.tar.zst",
                sha256=ollama.engine_archive.sha256,
            ),
        ),
    )


GATEWAY_MODELS = [
    pytest.param("qwen-3.6-27b", id="sglang"),
    pytest.param("apertus-70b", id="vllm"),
    pytest.param("kimi-k2.6", id="llamacpp"),
    pytest.param("qwen3-8b", id="ollama"),
    pytest.param("sdxl-1.0", id="comfyui"),
]


def seeded_plan(model_id: str, *, seeding: bool) -> FleetPlan:
    return plan_fleet(real_registry(), settings(models=[model_id], seeding=seeding), stack="t")


@pytest.mark.parametrize("model_id", GATEWAY_MODELS)
def test_a_seeded_gateway_pod_s_job_places_its_release_and_its_launch_only_checks_it(
    model_id: str,
) -> None:
    plan = seeded_plan(model_id, seeding=True)
    decision = plan.seeding.of(model_id) if plan.seeding else None
    m = plan.model(model_id)
    assert decision is not None and decision.job is not None
    assert m is not None and m.placement is not None
    gateway = real_registry().gateway
    assert gateway is not None

    [placed] = [a for a in decision.job.archives if a.sha512 is not None]
    assert (placed.url, placed.sha512) == (gateway.url, gateway.sha512)
    assert placed.sha256 is None
    # Where the pod's launch (or start hook) checks it: the same file below the mount.
    assert f"{VOLUME_PATH}/{placed.path}" in m.placement.pod.args + m.placement.pod.hook_source
    # The job goes on the wire with it, and reads back as it was sent.
    assert validate_json(type(decision.job), wire_json(decision.job)) == decision.job
    hook = m.placement.pod.start_hook
    if hook is None:
        found = release_checked({"args": m.placement.pod.args}, "gateway")
        assert found == (placed.path, gateway.url, False)  # only checks: the seed placed it
    else:  # vLLM's and llama.cpp's start hook checks it (recipes/gateway.py)
        assert '"fetch": "0"' in hook.text and '"fetch": "1"' not in hook.text


@pytest.mark.parametrize(
    "model_id", [p for p in GATEWAY_MODELS if p.id not in ("vllm", "llamacpp")]
)  # hooked engines refuse to plan unseeded
def test_an_unseeded_gateway_pod_places_nothing_and_its_launch_fetches_its_release(
    model_id: str,
) -> None:
    plan = seeded_plan(model_id, seeding=False)
    m = plan.model(model_id)
    gateway = real_registry().gateway
    assert m is not None and m.placement is not None and gateway is not None
    assert plan.seeding is not None and not plan.seeding.seeded_ids

    found = release_checked({"args": m.placement.pod.args}, "gateway")
    assert found == (f"frutebox/gateway/caddy-{gateway.version}.tar.gz", gateway.url, True)


def test_the_ollama_engine_release_is_checked_only_on_a_seeded_pod() -> None:
    for seeding in (True, False):
        m = seeded_plan("qwen3-8b", seeding=seeding).model("qwen3-8b")
        assert m is not None and m.placement is not None
        found = release_checked({"args": m.placement.pod.args}, "engine")
        assert found is not None and found[2] is not seeding


def test_a_pod_without_a_gateway_or_release_places_no_archive() -> None:
    registry = dataclasses.replace(real_registry(), gateway=None)  # every pod served open
    resolution = resolve(registry, "qwen-3.6-27b", TOKEN)
    assert resolution.placements and resolution.recipe is not None and resolution.model
    pod = resolution.placements[0].pod
    job = seed_job(resolution.model, resolution.recipe.runtime, pod)

    assert isinstance(job, HfSnapshotJob) and job.archives == ()
    assert '"archives"' not in wire_json(job)  # its job and fingerprint read as before


@pytest.mark.parametrize(
    ("store", "seeded"),
    [
        pytest.param("/workspace/ollama..models/", "ollama..models", id="dots-inside-a-name"),
        pytest.param("/workspace/ollama/../models", None, id="dots-as-a-folder"),
        pytest.param("/workspace/..", None, id="dots-last"),
        pytest.param("/workspacex/models", None, id="beside-the-mount"),
    ],
)
def test_only_a_path_climbing_out_with_dot_dot_leaves_the_volume(
    store: str, seeded: str | None
) -> None:
    job = job_for("qwen3-8b", OLLAMA_MODELS=store)

    if seeded is None:
        assert isinstance(job, Unseedable) and "not on the volume" in job.reason
    else:
        assert isinstance(job, OllamaJob) and job.store == seeded


def test_comfyui_seeds_each_file_at_its_flat_models_path() -> None:
    job = job_for("stable-audio-open-1.0")

    assert isinstance(job, FilesJob)
    assert [(f.repo, f.revision, f.path, f.destination, f.gated) for f in job.files] == [
        ("stabilityai/stable-audio-open-1.0", "main", "model.safetensors",
         "ComfyUI/models/checkpoints/stable_audio_open_1.0.safetensors", True),
        # The text encoder comes from its own, open repository.
        ("google-t5/t5-base", "main", "model.safetensors",
         "ComfyUI/models/text_encoders/t5_base.safetensors", False),
    ]  # fmt: skip
    # On the volume, each is where the pod's ComfyUI reads its models.
    assert all(f"{VOLUME_PATH}/{f.destination}".startswith(f"{MODELS_DIR}/") for f in job.files)


def test_a_repackaged_comfyui_model_seeds_the_repackaging_at_its_pin() -> None:
    job = job_for("wan-2.2")

    assert isinstance(job, FilesJob) and len(job.files) == 4
    assert {(f.repo, f.revision) for f in job.files} == {
        ("Comfy-Org/Wan_2.2_ComfyUI_Repackaged", "ee6f4a40737a995bf5818954cfce6d59443b0f04")
    }


@pytest.mark.parametrize(
    ("model_id", "env", "reason"),
    [
        pytest.param("qwen-3.6-27b", {"HF_HOME": None}, "its pod sets no HF_HOME on the volume",
                     id="no-hf-home"),
        pytest.param("qwen-3.6-27b", {"HF_HOME": "/root/.cache/huggingface"},
                     "HF_HOME is /root/.cache/huggingface, not on the volume",
                     id="hf-home-off-volume"),
        pytest.param("kimi-k2.6", {"LLAMA_CACHE": None}, "its pod sets no LLAMA_CACHE",
                     id="no-llama-cache"),
        pytest.param("qwen3-8b", {"OLLAMA_MODELS": "/workspace/../root"}, "not on the volume",
                     id="store-climbs-out"),
        pytest.param("qwen3-8b", {"OLLAMA_MODELS": None}, "its pod sets no OLLAMA_MODELS",
                     id="no-ollama-store"),
    ],
)  # fmt: skip
def test_a_cache_the_volume_does_not_hold_cannot_be_seeded(
    model_id: str, env: dict[str, str | None], reason: str
) -> None:
    job = job_for(model_id, **env)

    assert isinstance(job, Unseedable) and job.model_id == model_id
    assert reason in job.reason


def test_every_servable_catalog_model_has_a_seed_job() -> None:
    """Seeding covers every engine we serve with: nothing servable falls through."""
    registry = real_registry()
    servable = [m.id for m in registry.models if resolve(registry, m.id, TOKEN).placements]
    jobs = {model_id: job_for(model_id) for model_id in servable}

    assert servable and [m for m, j in jobs.items() if isinstance(j, Unseedable)] == []


def test_an_engine_without_a_rule_is_unseedable() -> None:
    resolution = resolve(real_registry(), "qwen3-8b", TOKEN)
    pod = resolution.placements[0].pod

    job = seed_job(model("qwen3-8b"), Runtime.TGI, pod)

    assert job == Unseedable(model_id="qwen3-8b", reason="no seeding rule for the tgi engine")


def test_a_plan_mounts_the_volume_where_every_pod_does() -> None:
    plan = seed_plan([job_for("qwen3-8b")], stallSeconds=5)

    assert plan.volumePath == "/workspace" and plan.stallSeconds == 5
    assert plan.hubUrl == "https://huggingface.co"


@pytest.mark.parametrize(
    ("flags", "mistral"),
    [
        pytest.param(("--load-format", "mistral"), True, id="two-words"),
        pytest.param(("--max-model-len", "8192", "--load-format=mistral"), True, id="one-word"),
        pytest.param(("--load-format", "safetensors"), False, id="another-format"),
        pytest.param(("--tokenizer-mode", "mistral"), False, id="the-value-elsewhere"),
        pytest.param(("mistral", "--load-format"), False, id="the-pair-reversed"),
        pytest.param(("--load-format",), False, id="the-flag-alone"),
        pytest.param((), False, id="no-flags"),
    ],
)
def test_the_load_format_flag_decides_which_checkpoint_a_vllm_pod_seeds(
    flags: tuple[str, ...], mistral: bool
) -> None:
    resolution = resolve(real_registry(), "apertus-70b", TOKEN)
    assert resolution.placements and resolution.model is not None
    served = dataclasses.replace(resolution.model, engine_args={Runtime.VLLM: flags})

    job = seed_job(served, Runtime.VLLM, resolution.placements[0].pod)

    assert isinstance(job, HfSnapshotJob)
    skipped = set(job.ignoreBesideSafetensors)
    assert set(HF_FORMAT_SHARDS) <= skipped if mistral else set(MISTRAL_NATIVE) <= skipped
    assert not set(MISTRAL_NATIVE if mistral else HF_FORMAT_SHARDS) & skipped


def test_the_counter_directory_a_pod_names_is_made_by_its_seed() -> None:
    where = "/workspace/frutebox/counters/pixtral/vllm-v0.31.0-cu129"
    job = job_for("pixtral", PROMETHEUS_MULTIPROC_DIR=where)
    assert isinstance(job, HfSnapshotJob)
    assert job.counterDirs == ("frutebox/counters/pixtral/vllm-v0.31.0-cu129",)
    plain = job_for("pixtral")
    assert isinstance(plain, HfSnapshotJob) and plain.counterDirs == ()
    # Left out when empty: an unmeasured stack's seeds keep their fingerprints (no re-seed).
    from frutebox_infra.deploy.contract import wire_json

    assert "counterDirs" not in wire_json(plain) and "counterDirs" in wire_json(job)
    # One off the volume cannot be made by a seed: the model is not seeded, and says why.
    off = job_for("pixtral", PROMETHEUS_MULTIPROC_DIR="/tmp/prom")
    assert isinstance(off, Unseedable) and "PROMETHEUS_MULTIPROC_DIR" in off.reason


def test_a_measured_seeded_vllm_plan_seeds_the_directory_its_pods_count_in() -> None:
    from frutebox_infra.planner.plan import plan_fleet
    from tests.factories import settings

    plan = plan_fleet(real_registry(), settings(models=["pixtral"], measureUsage=True), stack="s")
    decision = plan.seeding.of("pixtral")
    assert decision is not None and isinstance(decision.job, HfSnapshotJob)
    (made,) = decision.job.counterDirs
    pod = plan.models[0].candidates[0].pod
    assert pod.env["PROMETHEUS_MULTIPROC_DIR"] == f"{VOLUME_PATH}/{made}"
    assert [p for p in plan.problems if p.rule == "launch-rejected"] == []
