"""What an emulated GPU pod's engine reads at start, told from the launch the planner renders, at
the paths on the volume where the seeder writes them."""

from __future__ import annotations

from typing import Any

import pytest

from frutebox_infra.catalog.schema import Runtime
from frutebox_infra.deploy.requests import pod_body
from frutebox_infra.emulator import layout
from frutebox_infra.emulator.hub import Hub
from frutebox_infra.emulator.launch_reads import reads_of
from frutebox_infra.emulator.records import VolumeRecord
from frutebox_infra.planner.plan import plan_fleet
from tests.factories import real_registry, settings

HUB = Hub.from_registry(real_registry())
QWEN_REPO, QWEN_COMMIT = "Qwen/Qwen3.6-27B-FP8", "c79abb8dddf284f31fd5a44fed917f261c72948b"


def body(model_id: str, *, seeding: bool = True) -> dict[str, Any]:
    plan = plan_fleet(real_registry(), settings(models=[model_id], seeding=seeding), stack="t")
    m = plan.model(model_id)
    assert m is not None and m.placement is not None
    return pod_body(m, m.placement, plan.settings, stack="t", volume_id="v1", owner="o" * 16)


def volume() -> VolumeRecord:
    return VolumeRecord("v1", "w", 2000, "EU-RO-1")


# ---- paths of weights on a volume ------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        pytest.param("/workspace/huggingface", "huggingface", id="below"),
        pytest.param("/workspace/ollama/models/x/", "ollama/models/x", id="trailing-slash"),
        pytest.param("/root/.cache", None, id="elsewhere"),
        pytest.param("/workspacex/a", None, id="a-lookalike-prefix"),
    ],
)
def test_paths_are_taken_relative_to_the_mount(path: str, expected: str | None) -> None:
    assert layout.below_mount(path) == expected


def test_a_hub_cache_file_is_filed_under_its_repo_snapshot_and_refs() -> None:
    assert layout.snapshot_file("hf/hub", "Qwen/Q-8B", "c" * 40, "a/b.json") == (
        f"hf/hub/models--Qwen--Q-8B/snapshots/{'c' * 40}/a/b.json"
    )
    assert layout.ref_file("hf/hub", "Qwen/Q-8B", "main") == "hf/hub/models--Qwen--Q-8B/refs/main"


@pytest.mark.parametrize(
    ("tag", "manifest", "listed"),
    [
        pytest.param("qwen3:8b", "library/qwen3/8b", "qwen3:8b", id="library"),
        pytest.param("llama3.2", "library/llama3.2/latest", "llama3.2:latest", id="no-tag"),
        pytest.param("me/model:v1", "me/model/v1", "me/model:v1", id="namespaced"),
    ],
)
def test_ollama_stores_file_a_tag_by_namespace_model_and_tag(
    tag: str, manifest: str, listed: str
) -> None:
    path = layout.ollama_manifest("s", tag)
    assert path == f"s/manifests/registry.ollama.ai/{manifest}"
    assert layout.ollama_tags([path, "s/blobs/sha256-00", "other/x"], "s") == [listed]


# ---- what a launch reads ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model_id", "runtime", "offline", "loads"),
    [
        pytest.param("qwen-3.6-27b", Runtime.SGLANG, True, True, id="sglang"),
        pytest.param("kimi-k2.6", Runtime.LLAMACPP, True, True, id="llama-cpp"),
        pytest.param("sdxl-1.0", Runtime.COMFYUI, False, False, id="comfyui"),
    ],
)
def test_a_seeded_launch_reads_offline_what_the_seeder_placed(
    model_id: str, runtime: Runtime, offline: bool, loads: bool
) -> None:
    vol = volume()
    if runtime is Runtime.LLAMACPP:  # -hf takes no revision: offline it reads refs/main
        repo = HUB.repos["unsloth/Kimi-K2.6-GGUF"]
        vol.refs[layout.ref_file("llama.cpp", repo.repo_id, "main")] = repo.commit
    reads = reads_of(body(model_id), HUB, vol)
    assert reads is not None and reads.failure is None
    assert (reads.runtime, reads.offline, reads.loads_at_start) == (runtime, offline, loads)
    model = real_registry().model(model_id)
    assert model is not None
    total = sum(p.size for p in reads.pieces)
    assert total == pytest.approx((model.source.gguf.disk_gb if model.source and model.source.gguf
                                   else model.weights.disk_gb or 0) * 1e9, rel=1e-3)  # fmt: skip


def test_sglang_reads_its_pinned_snapshot_in_the_hf_home_hub_cache() -> None:
    reads = reads_of(body("qwen-3.6-27b"), HUB, volume())
    assert reads is not None
    prefix = f"huggingface/hub/models--Qwen--Qwen3.6-27B-FP8/snapshots/{QWEN_COMMIT}/"
    assert reads.pieces and all(p.path.startswith(prefix) for p in reads.pieces)
    assert reads.refs == ()  # a pinned commit needs no ref


def test_a_mistral_format_launch_reads_the_files_its_seed_placed_and_no_others() -> None:
    from frutebox_infra.seeding import seeder
    from frutebox_infra.seeding.protocol import HfSnapshotJob

    plan = plan_fleet(real_registry(), settings(models=["pixtral"]), stack="t")
    job = plan.seeding.of("pixtral")
    assert job is not None and isinstance(job.job, HfSnapshotJob)
    seeded = HUB.repos["mistralai/Pixtral-12B-2409"]
    entries = [{"path": path} for path in sorted(seeded.files)]
    placed = {
        e["path"]
        for e in seeder.select(
            entries, {"ignoreBesideSafetensors": job.job.ignoreBesideSafetensors}
        )
    }
    vol = volume()
    vol.refs[layout.ref_file("huggingface/hub", seeded.repo_id, "main")] = seeded.commit
    reads = reads_of(body("pixtral"), HUB, vol)
    assert reads is not None and reads.failure is None
    # `--load-format mistral` leaves the Hugging Face shards alone, as its seed does (the
    # emulated hub's repo holds only those, so here it reads no weights at all).
    assert {p.path.rsplit("/", 1)[-1] for p in reads.pieces} == {
        path.rsplit("/", 1)[-1] for path in placed
    }
    assert not any("model-0" in p.path for p in reads.pieces)


def test_unseeded_launches_may_download_and_an_unpinned_one_records_its_ref() -> None:
    reads = reads_of(body("qwen3-235b-a22b", seeding=False), HUB, volume())
    assert reads is not None and not reads.offline and reads.failure is None
    commit = HUB.repos["Qwen/Qwen3-235B-A22B-FP8"].commit
    assert reads.refs == ((layout.ref_file("huggingface/hub", "Qwen/Qwen3-235B-A22B-FP8",
                                           "main"), commit),)  # fmt: skip


def test_offline_without_the_seeders_ref_is_a_failure_the_engine_logs() -> None:
    reads = reads_of(body("kimi-k2.6"), HUB, volume())
    assert reads is not None and reads.failure is not None
    assert "no refs/main in the cache" in reads.failure


def test_a_missing_comfyui_file_ends_the_script_before_the_server() -> None:
    hub = Hub.from_registry(real_registry())
    hub.change({"repo": "stabilityai/stable-diffusion-xl-base-1.0", "remove": True})
    reads = reads_of(body("sdxl-1.0", seeding=False), hub, volume())
    assert reads is not None and reads.failure is not None
    assert reads.failure.startswith("download failed: https://huggingface.co/stabilityai/")


def test_an_ollama_pod_names_its_store_and_reads_nothing_at_start() -> None:
    reads = reads_of(body("qwen3-8b"), HUB, volume())
    assert reads is not None and reads.runtime is Runtime.OLLAMA
    assert reads.store == "ollama/models/qwen3-8b" and reads.pieces == ()


def test_a_launch_the_emulator_cannot_read_reads_nothing_it_knows_of() -> None:
    assert reads_of({"image": "img:1", "args": "--port 8080", "env": {}}, HUB, volume()) is None
