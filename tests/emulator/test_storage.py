"""GPU pods and the weights on their volume: a seeded model loads at the read speed, an unseeded
one downloads first (and leaves the files for the next pod), one launched offline without its
files crash-loops; Ollama's store lists what earlier pods pulled. The starts and speeds are the
plan's bring-up assumptions, or instant."""

from __future__ import annotations

from typing import Any

import pytest

from frutebox_infra.catalog.schema import Runtime
from frutebox_infra.deploy.requests import pod_body
from frutebox_infra.emulator import volume_files
from frutebox_infra.emulator.catalog import Catalog
from frutebox_infra.emulator.clock import ManualClock
from frutebox_infra.emulator.hub import Hub
from frutebox_infra.emulator.realism import Kind, Realism
from frutebox_infra.emulator.records import PodRecord
from frutebox_infra.emulator.state import Account
from frutebox_infra.emulator.storage import Storage
from frutebox_infra.emulator.transfers import Transfers
from frutebox_infra.planner.plan import plan_fleet
from frutebox_infra.recipes.gateway import KEY_ENV
from frutebox_infra.seeding.bringup import (
    CPU_POD_START_S,
    DOWNLOAD_MB_PER_S,
    GPU_POD_START_S,
    VOLUME_READ_MB_PER_S,
)
from tests.emulator.test_seeder_pod import GATEWAY_ARCHIVE, running, seeding_body
from tests.factories import real_registry, settings

HUB = Hub.from_registry(real_registry())
KEY = "storage-" + "k" * 40


def account(clock: ManualClock, time_scale: float = 1.0) -> Account:
    realism = Realism(
        kind=Kind.FAST, quotas=(), time_scale=time_scale, transfers=Transfers.realistic()
    )
    return Account(Catalog.builtin(), realism=realism, clock=clock, storage=Storage(HUB))


def gpu_body(acct: Account, model_id: str, *, seeding: bool, **config: Any) -> dict[str, Any]:
    vol = next(iter(acct.volumes.values()))
    plan = plan_fleet(
        real_registry(), settings(models=[model_id], seeding=seeding, **config), stack="t"
    )
    m = plan.model(model_id)
    assert m is not None and m.placement is not None
    return pod_body(m, m.placement, plan.settings, stack="t", volume_id=vol.id, owner="o" * 16)


def seeded(clock: ManualClock, model_id: str, time_scale: float = 1.0) -> Account:
    acct = account(clock, time_scale)
    vol = acct.create_volume({"name": "w", "size": 100, "dataCenter": "EU-RO-1"})
    seed = running(acct, seeding_body(acct, vol, model_id))
    clock.advance(10_000 / time_scale)
    acct.terminate_pod(seed.id)
    return acct


def weights_bytes(pod: PodRecord, acct: Account) -> int:
    """The weights on the volume (not the release archives the seed placed beside them)."""
    vol = next(iter(acct.volumes.values()))
    return sum(size for path, (size, _) in vol.files.items() if not path.startswith("frutebox/"))


@pytest.mark.parametrize("time_scale", [1.0, 100.0])
def test_a_seeded_model_loads_at_the_volumes_read_speed(
    clock: ManualClock, time_scale: float
) -> None:
    acct = seeded(clock, "qwen-3.6-27b", time_scale)
    pod = acct.create_pod(gpu_body(acct, "qwen-3.6-27b", seeding=True))
    read = weights_bytes(pod, acct) / (VOLUME_READ_MB_PER_S["STANDARD"] * 1e6)
    assert pod.load_s == pytest.approx((GPU_POD_START_S + read) / time_scale)
    assert "weights found on the volume; loading" in pod.lines() and pod.transfer is None


def test_an_unseeded_model_downloads_first_and_leaves_the_files_for_the_next_pod(
    clock: ManualClock,
) -> None:
    acct = account(clock)
    vol = acct.create_volume({"name": "w", "size": 100, "dataCenter": "EU-RO-1"})
    pod = running(acct, gpu_body(acct, "qwen-3.6-27b", seeding=False))
    total = sum(size for _, size, _ in (pod.transfer or {})["pieces"])
    download, read = total / 100e6, total / 237e6
    assert pod.load_s == pytest.approx(GPU_POD_START_S + download + read)
    assert any(line.startswith("downloading 31.0 GB") for line in pod.lines())
    clock.advance(GPU_POD_START_S + download + 1)
    acct.terminate_pod(pod.id)
    again = acct.create_pod(gpu_body(acct, "qwen-3.6-27b", seeding=False))
    assert again.transfer is None and again.load_s == pytest.approx(GPU_POD_START_S + read)
    assert vol.files


def test_offline_without_its_files_the_engine_exits_at_every_start(clock: ManualClock) -> None:
    acct = account(clock)
    vol = acct.create_volume({"name": "w", "size": 100, "dataCenter": "EU-RO-1"})
    volume_files.write(vol, GATEWAY_ARCHIVE, 17_000_000, 17_000_000)  # its gateway starts
    pod = running(acct, gpu_body(acct, "qwen-3.6-27b", seeding=True))
    clock.advance(10_000)
    assert pod.crash is not None and pod.crash.startswith("offline mode (HF_HUB_OFFLINE=1)")
    assert acct.proxy(pod.id, 8080, "GET", "/health", None)[0] == 502
    lines = [line for _, line in acct.logs(pod.id, 200, None)]
    assert lines.count(pod.crash) > 1 and lines.count("start container") > 1  # a crash loop
    assert "server is listening" not in lines


def keyed(body: dict[str, Any]) -> dict[str, Any]:
    """A gateway pod's body with its serving key, as the deploy step fills it."""
    return {**body, "env": {**body["env"], KEY_ENV: KEY}}


def test_ollama_lists_what_its_store_holds_and_its_launch_pulls_what_the_store_lacks(
    clock: ManualClock,
) -> None:
    bearer = {"authorization": f"Bearer {KEY}"}
    acct = seeded(clock, "qwen3-8b")
    pod = running(acct, keyed(gpu_body(acct, "qwen3-8b", seeding=True)))
    # Its seeding pod placed Ollama's release (and the gateway's): its start fetches nothing.
    assert pod.crash is None and pod.load_s == GPU_POD_START_S
    clock.advance(pod.load_s)
    tags = acct.proxy(pod.id, 11434, "GET", "/api/tags", None, bearer)[1]
    assert [m["name"] for m in tags["models"]] == ["qwen3:8b"]

    fresh = account(clock)
    fresh.create_volume({"name": "w", "size": 100, "dataCenter": "EU-RO-1"})
    first = running(fresh, keyed(gpu_body(fresh, "qwen3-8b", seeding=False)))
    weights = sum(size for _, size in HUB.tags["library/qwen3:8b"].blobs)
    assert first.load_s == pytest.approx(
        GPU_POD_START_S + (1.6e9 + weights) / 1e6 / DOWNLOAD_MB_PER_S
    )
    clock.advance(first.load_s)
    listed = fresh.proxy(first.id, 11434, "GET", "/api/tags", None, bearer)[1]["models"]
    assert [m["name"] for m in listed] == ["qwen3:8b"]
    # Behind the gateway no client pulls or deletes, key or not.
    assert fresh.proxy(first.id, 11434, "POST", "/api/pull", {"model": "x:1b"}, bearer)[0] == 403
    assert fresh.proxy(first.id, 11434, "DELETE", "/api/delete", {"model": "qwen3:8b"},
                       bearer)[0] == 403  # fmt: skip
    fresh.terminate_pod(first.id)
    second = fresh.create_pod(keyed(gpu_body(fresh, "qwen3-8b", seeding=False)))
    assert second.pulled == ["qwen3:8b"]  # the store kept what the first pod's launch pulled
    assert second.load_s == GPU_POD_START_S  # nothing fetched again


def test_an_ollama_launch_whose_release_or_tag_cannot_be_fetched_exits_at_every_start(
    clock: ManualClock,
) -> None:
    acct = account(clock)
    acct.create_volume({"name": "w", "size": 100, "dataCenter": "EU-RO-1"})
    body = keyed(gpu_body(acct, "qwen3-8b", seeding=False))
    image = real_registry().images[Runtime.OLLAMA]
    assert image.engine_archive is not None
    acct.storage.hub.change({"releaseUrl": image.engine_archive.url})
    gone = acct.create_pod(body)
    assert gone.crash is not None and "could not be fetched" in gone.crash
    acct.storage.reset()
    acct.storage.hub.change({"ollamaTag": "qwen3:8b"})
    missing = acct.create_pod(body)
    assert missing.crash is not None and "file does not exist (qwen3:8b)" in missing.crash


@pytest.mark.parametrize(
    "model_id",
    [pytest.param("qwen-3.6-27b", id="sglang"), pytest.param("qwen3-8b", id="ollama")],
)
def test_a_seeded_gateway_pod_whose_release_is_missing_exits_at_every_start(
    clock: ManualClock, model_id: str
) -> None:
    acct = account(clock)
    acct.create_volume({"name": "w", "size": 100, "dataCenter": "EU-RO-1"})
    pod = running(acct, keyed(gpu_body(acct, model_id, seeding=True)))  # no seed ran
    clock.advance(10_000)
    line = f"gateway: /workspace/{GATEWAY_ARCHIVE} is missing or fails its SHA-512 check"
    assert pod.crash == line  # it only checks: nothing is fetched on the GPU
    assert GATEWAY_ARCHIVE not in next(iter(acct.volumes.values())).files
    lines = [line for _, line in acct.logs(pod.id, 200, None)]
    assert lines.count(pod.crash) > 1  # a crash loop, which the deploy step fails fast on


def test_an_unseeded_gateway_pod_fetches_its_release_and_fails_when_it_is_gone(
    clock: ManualClock,
) -> None:
    acct = account(clock)
    vol = acct.create_volume({"name": "w", "size": 100, "dataCenter": "EU-RO-1"})
    body = keyed(gpu_body(acct, "qwen-3.6-27b", seeding=False))
    gateway = real_registry().gateway
    assert gateway is not None
    acct.storage.hub.change({"releaseUrl": gateway.url, "tamper": True})
    tampered = acct.create_pod(body)
    assert tampered.crash == f"gateway: {gateway.url} does not match its pinned SHA-512"
    acct.storage.reset()
    acct.storage.hub.change({"releaseUrl": gateway.url})
    gone = acct.create_pod(body)
    assert gone.crash == f"gateway: {gateway.url} could not be fetched: HTTP Error 404: Not Found"
    assert GATEWAY_ARCHIVE not in vol.files
    acct.storage.reset()
    fetched = acct.create_pod(body)
    assert fetched.crash is None and vol.files[GATEWAY_ARCHIVE][1] == 17_000_000


# ---- the starts and speeds -------------------------------------------------------------------


def test_the_realistic_speeds_are_the_plans_assumptions() -> None:
    speeds = Transfers.realistic()
    assert speeds.download_mb_per_s == DOWNLOAD_MB_PER_S
    assert dict(speeds.read_mb_per_s) == VOLUME_READ_MB_PER_S
    assert (speeds.gpu_start_s, speeds.cpu_start_s) == (GPU_POD_START_S, CPU_POD_START_S)
    assert Realism.realistic().transfers == speeds


def test_an_override_changes_only_what_it_names() -> None:
    slow = Transfers.realistic(download_mb_per_s=1.0)
    assert slow.download_mb_per_s == 1.0 and slow.gpu_start_s == GPU_POD_START_S


@pytest.mark.parametrize(
    ("speeds", "download_s", "read_s"),
    [
        pytest.param(Transfers.realistic(), 10.0, 1e9 / 237e6, id="realistic"),
        pytest.param(Transfers(), 0.0, 0.0, id="instant"),
    ],
)
def test_a_gigabyte_takes_its_size_over_the_speed(
    speeds: Transfers, download_s: float, read_s: float
) -> None:
    assert speeds.download_s(1_000_000_000) == pytest.approx(download_s)
    assert speeds.read_s(1_000_000_000, "STANDARD") == pytest.approx(read_s)


def test_a_faster_tier_reads_faster_and_an_unknown_one_is_instant() -> None:
    speeds = Transfers.realistic()
    assert speeds.read_s(10**9, "HIGH_PERFORMANCE") < speeds.read_s(10**9, "STANDARD")
    assert speeds.read_s(10**9, "NO_SUCH_TIER") == 0.0
    assert Realism.fast().transfers == Transfers()
