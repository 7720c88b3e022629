"""A seeding CPU pod in the emulator: the real request's plan, files found on the emulated hub
or refused, brought onto the volume at the account's speed, and `/status` as the seeder's."""

from __future__ import annotations

import json
from typing import Any

import pytest

from frutebox_infra.deploy.requests import seed_request
from frutebox_infra.emulator.catalog import Catalog
from frutebox_infra.emulator.clock import ManualClock
from frutebox_infra.emulator.hub import Hub
from frutebox_infra.emulator.realism import Kind, Realism
from frutebox_infra.emulator.records import PodRecord, VolumeRecord
from frutebox_infra.emulator.state import Account
from frutebox_infra.emulator.storage import Storage
from frutebox_infra.emulator.transfers import Transfers
from frutebox_infra.planner.plan import plan_fleet
from frutebox_infra.plumbing.validation import validate
from frutebox_infra.runpod.seeds import prepare_bodies
from frutebox_infra.seeding.manifest import seed_plan
from frutebox_infra.seeding.protocol import (
    PLAN_ENV,
    HfSnapshotJob,
    JobState,
    SeedState,
    SeedStatus,
)
from tests.factories import real_registry, settings

_GATEWAY = real_registry().gateway
assert _GATEWAY is not None
GATEWAY_ARCHIVE = f"frutebox/gateway/{_GATEWAY.name}-{_GATEWAY.version}.tar.gz"
"""Where a gateway pod's launch checks the gateway's release, below the volume's mount."""
OWNER = "0123456789abcdef"
QWEN = "qwen-3.6-27b"
QWEN_GB = 31.01
"""Its safetensors, config and tokenizer on the emulated hub."""


def account(clock: ManualClock, hub: Hub | None = None) -> Account:
    realism = Realism(kind=Kind.FAST, quotas=(), transfers=Transfers.realistic())
    storage = Storage(hub or Hub.from_registry(real_registry()))
    return Account(Catalog.builtin(), realism=realism, clock=clock, storage=storage)


def volume(acct: Account, size_gb: int = 100) -> VolumeRecord:
    return acct.create_volume({"name": "w", "size": size_gb, "dataCenter": "EU-RO-1"})


def seeding_body(
    acct: Account, vol: VolumeRecord, model_id: str = QWEN, **config: Any
) -> dict[str, Any]:
    """The body the deploy step sends for `model_id`'s seed, from the real plan."""
    plan = plan_fleet(real_registry(), settings(models=[model_id], **config), stack="t")
    request = seed_request(plan, model_id, volume_id=vol.id, owner=OWNER)
    return prepare_bodies(request, "")[0]


def running(acct: Account, body: dict[str, Any]) -> PodRecord:
    pod = acct.create_pod(body)
    while acct.read_pod(pod.id).status != "RUNNING":
        pass
    return pod


def status(acct: Account, pod: PodRecord) -> tuple[int, Any]:
    return acct.proxy(pod.id, 8080, "GET", "/status", None)


def job(acct: Account, pod: PodRecord) -> Any:
    code, body = status(acct, pod)
    assert code == 200
    seen = validate(SeedStatus, body)  # the deploy step's own reading of it
    [only] = seen.jobs
    return seen, only


def test_the_status_follows_the_download_at_the_accounts_speed(clock: ManualClock) -> None:
    acct = account(clock)
    vol = volume(acct)
    pod = running(acct, seeding_body(acct, vol))
    assert status(acct, pod)[0] == 502  # the container is still starting (90 s)
    clock.advance(90 + 100)  # 100 s at 100 MB/s
    seen, qwen = job(acct, pod)
    assert seen.state is SeedState.RUNNING and qwen.state is JobState.RUNNING
    assert qwen.bytesDone == pytest.approx(10e9, rel=1e-6)
    assert qwen.bytesTotal == pytest.approx(QWEN_GB * 1e9, rel=1e-3)
    assert qwen.bytesTotal is not None
    clock.advance((qwen.bytesTotal - qwen.bytesDone) / 1e8 + 0.01)
    seen, qwen = job(acct, pod)
    assert seen.state is SeedState.DONE and qwen.bytesDone == qwen.bytesTotal
    assert qwen.filesDone == qwen.filesTotal and qwen.bytesSkipped == 0
    assert qwen.commit == "c79abb8dddf284f31fd5a44fed917f261c72948b"
    snapshot = f"huggingface/hub/models--Qwen--Qwen3.6-27B-FP8/snapshots/{qwen.commit}/"
    weights = sum(size for p, (size, _) in vol.files.items() if p.startswith(snapshot))
    # The gateway's release is part of the job, placed before the weights.
    assert weights + vol.files[GATEWAY_ARCHIVE][0] == qwen.bytesTotal
    assert status(acct, pod)[0] == 200 and acct.proxy(pod.id, 8080, "GET", "/x", None)[0] == 404


def test_a_measured_vllm_seed_makes_its_counter_directory_once_its_files_are_in(
    clock: ManualClock,
) -> None:
    acct = account(clock)
    vol = volume(acct)
    pod = running(acct, seeding_body(acct, vol, "pixtral", measureUsage=True))
    made = "frutebox/counters/pixtral/vllm-v0.31.0-cu129"
    assert status(acct, pod)[0] == 502 and made not in vol.counter_dirs  # still starting
    clock.advance(3600)
    seen, pixtral = job(acct, pod)
    assert pixtral.filesDone == pixtral.filesTotal
    assert seen.state is SeedState.DONE and made in vol.counter_dirs


def test_files_already_on_the_volume_are_skipped_and_a_partial_one_resumes(
    clock: ManualClock,
) -> None:
    acct = account(clock)
    vol = volume(acct)
    first = running(acct, seeding_body(acct, vol))
    clock.advance(90 + 150)  # 15 GB, then the pod is terminated mid-file
    acct.terminate_pod(first.id)
    kept = sum(present for _, present in vol.files.values())
    assert kept == pytest.approx(15e9, rel=1e-6)

    second = running(acct, seeding_body(acct, vol))
    clock.advance(90)
    _, qwen = job(acct, second)
    complete = sum(size for size, present in vol.files.values() if present >= size)
    assert qwen.bytesSkipped == complete and qwen.bytesDone == pytest.approx(kept, rel=1e-6)
    assert qwen.bytesTotal is not None
    clock.advance((qwen.bytesTotal - qwen.bytesDone) / 1e8 + 0.01)
    seen, qwen = job(acct, second)
    assert seen.state is SeedState.DONE

    third = running(acct, seeding_body(acct, vol))
    clock.advance(90)
    seen, qwen = job(acct, third)
    assert seen.state is SeedState.DONE and qwen.bytesSkipped == qwen.bytesTotal


@pytest.mark.parametrize(
    ("model_id", "archives"),
    [
        pytest.param(QWEN, 1, id="sglang-the-gateway-s"),
        pytest.param("qwen3-8b", 2, id="ollama-the-gateway-s-and-ollama-s"),
    ],
)
def test_a_seed_places_the_releases_its_gpu_pod_checks_before_the_weights(
    clock: ManualClock, model_id: str, archives: int
) -> None:
    acct = account(clock)
    vol = volume(acct)
    pod = running(acct, seeding_body(acct, vol, model_id))
    clock.advance(90 + 0.2)  # 17 MB at 100 MB/s: the gateway's archive, first
    seen, only = job(acct, pod)  # written as far as the download has got when looked at
    assert seen.state is SeedState.RUNNING
    assert vol.files[GATEWAY_ARCHIVE][1] == vol.files[GATEWAY_ARCHIVE][0]
    clock.advance(3600)
    seen, only = job(acct, pod)
    assert seen.state is SeedState.DONE
    placed = [p for p in vol.files if p.startswith("frutebox/gateway/")]
    placed += [p for p in vol.files if p.startswith("frutebox/engines/")]
    assert len(placed) == archives and GATEWAY_ARCHIVE in placed
    assert all(vol.files[p][1] == vol.files[p][0] > 0 for p in placed)

    # One already there is left alone (skipped, as the seeder skips a matching one).
    again = running(acct, seeding_body(acct, vol, model_id))
    clock.advance(90)
    seen, only = job(acct, again)
    assert seen.state is SeedState.DONE and only.bytesSkipped == only.bytesTotal


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        pytest.param({"tamper": True}, "does not match its pinned sha512", id="tampered"),
        pytest.param({}, "could not be fetched: HTTP 404", id="gone"),
    ],
)
def test_a_release_gone_or_not_matching_its_pin_fails_the_seed_before_a_byte_moves(
    clock: ManualClock, change: dict[str, Any], reason: str
) -> None:
    gateway = real_registry().gateway
    assert gateway is not None
    acct = account(clock)
    acct.storage.hub.change({"releaseUrl": gateway.url, **change})
    vol = volume(acct)
    pod = running(acct, seeding_body(acct, vol))
    clock.advance(3600)
    seen, qwen = job(acct, pod)
    assert seen.state is SeedState.FAILED and qwen.state is JobState.FAILED
    assert f"the release {gateway.url} {reason}" in (qwen.reason or "")
    assert "registry/images.yaml" in (qwen.fix or "")
    assert vol.files == {}


def test_a_missing_file_fails_its_job_at_once_with_the_seeders_reason(clock: ManualClock) -> None:
    acct = account(clock)
    acct.storage.hub.change({"repo": "Qwen/Qwen3.6-27B-FP8", "remove": True})
    pod = running(acct, seeding_body(acct, volume(acct)))
    clock.advance(90)
    seen, qwen = job(acct, pod)
    assert seen.state is SeedState.FAILED and qwen.state is JobState.FAILED
    assert "Qwen/Qwen3.6-27B-FP8 was not found" in (qwen.reason or "")
    assert qwen.fix and "registry/models.yaml" in qwen.fix


def test_a_volume_too_small_fails_before_a_byte_moves(clock: ManualClock) -> None:
    acct = account(clock)
    vol = volume(acct, size_gb=10)
    pod = running(acct, seeding_body(acct, vol))
    clock.advance(1000)
    _, qwen = job(acct, pod)
    assert qwen.state is JobState.FAILED and "the volume has 10.00 GB free" in (qwen.reason or "")
    assert "minVolumeGb" in (qwen.fix or "") and vol.files == {}


def test_a_llama_cpp_seed_takes_only_its_quant_and_names_the_commit_last(
    clock: ManualClock,
) -> None:
    hub = Hub()
    repo = hub.repo("org/m-GGUF")
    repo.files.update({"Q4/m-Q4-00001-of-00002.gguf": 10**8, "Q4/m-Q4-00002-of-00002.gguf": 10**8,
                       "m-Q8.gguf": 10**9})  # fmt: skip
    acct = account(clock, hub)
    vol = volume(acct)
    job_ = HfSnapshotJob(modelId="m", repo="org/m-GGUF", revision="main", cacheDir="llama.cpp",
                         refs=("main",), quant="Q4")  # fmt: skip
    body = seeding_body(acct, vol, "qwen3-8b")
    body["env"][PLAN_ENV] = seed_plan([job_]).to_json()
    pod = running(acct, body)
    clock.advance(90 + 1)
    ref = "llama.cpp/models--org--m-GGUF/refs/main"
    assert ref not in vol.refs
    clock.advance(1)
    seen, m = job(acct, pod)
    assert seen.state is SeedState.DONE and m.bytesTotal == 2 * 10**8
    assert vol.refs[ref] == repo.commit
    assert not any(p.endswith("m-Q8.gguf") for p in vol.files)


def test_an_unreadable_plan_is_served_as_a_failure(clock: ManualClock) -> None:
    acct = account(clock)
    vol = volume(acct)
    body = seeding_body(acct, vol)
    body["env"][PLAN_ENV] = json.dumps({"jobs": [{"kind": "x"}]})
    pod = running(acct, body)
    clock.advance(90)
    seen = validate(SeedStatus, status(acct, pod)[1])
    assert seen.state is SeedState.FAILED and seen.jobs == ()
    assert "is unreadable" in (seen.error or "")
