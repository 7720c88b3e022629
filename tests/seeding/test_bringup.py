"""Bring-up facts: which CPU pod seeds, what it costs, and the GPU time billed before serving."""

from __future__ import annotations

import pytest

from frutebox_infra.catalog.schema import CpuFlavor, Runtime
from frutebox_infra.planner.plan import plan_fleet
from frutebox_infra.plumbing.validation import validate
from frutebox_infra.seeding.bringup import (
    CPU_POD_START_S,
    GPU_POD_START_S,
    SEED_TIMEOUT_BASE_S,
    SEEDER_DISK_GB,
    VOLUME_READ_MB_PER_S,
    BringupRates,
    CpuChoice,
    NoCpu,
    bringup,
    choose_cpu,
    cpu_candidates,
    download_seconds,
    first_deploy,
    read_seconds,
    seed_timeout_s,
)
from tests.factories import real_registry, settings


def flavor(flavor_id: str, usd: float, **kwargs: object) -> CpuFlavor:
    fields: dict[str, object] = {
        "id": flavor_id, "name": flavor_id, "vcpu_min": 2, "vcpu_max": 8,
        "ram_gb_per_vcpu": 2, "disk_gb_per_vcpu": 10, "usd_per_vcpu_hour": usd,
        "source": "test", **kwargs,
    }  # fmt: skip
    return validate(CpuFlavor, fields)


CHEAP, DEAR = flavor("cheap", 0.03), flavor("dear", 0.05)


@pytest.mark.parametrize(
    ("flavors", "kwargs", "chosen"),
    [
        pytest.param([DEAR, CHEAP], {}, "cheap", id="the-cheapest"),
        pytest.param([DEAR, CHEAP], {"flavor_id": "dear"}, "dear", id="the-one-named"),
        pytest.param([flavor("far", 0.01, data_centers=("US-TX-3",)), DEAR], {}, "dear",
                     id="offered-here-only"),
        pytest.param([flavor("small", 0.01, vcpu_max=2), DEAR], {"vcpus": 4}, "dear",
                     id="takes-the-vcpus"),
        pytest.param([flavor("tiny-disk", 0.01, disk_gb_per_vcpu=4), DEAR], {}, "dear",
                     id="takes-the-disk"),
        pytest.param([flavor("disk-at-cap", 0.01, disk_gb_per_vcpu=SEEDER_DISK_GB / 2), DEAR],
                     {}, "disk-at-cap", id="disk-exactly-enough"),
    ],
)  # fmt: skip
def test_the_seeding_pod_is_the_cheapest_flavor_that_fits(
    flavors: list[CpuFlavor], kwargs: dict[str, object], chosen: str
) -> None:
    choice = choose_cpu(flavors, "EU-RO-1", **kwargs)  # type: ignore[arg-type]

    assert isinstance(choice, CpuChoice) and choice.flavor.id == chosen
    assert choice.usd_per_hour == choice.flavor.usd_per_hour(choice.vcpus)


@pytest.mark.parametrize(
    ("flavors", "kwargs", "reason"),
    [
        pytest.param([CHEAP], {"flavor_id": "cpu9z"}, "CPU flavor cpu9z is not in", id="unknown"),
        pytest.param([flavor("far", 0.01, data_centers=("US-TX-3",))], {},
                     "no recorded CPU flavor is offered in EU-RO-1", id="not-offered"),
        pytest.param([CHEAP], {"vcpus": 16}, "takes 16 vCPUs", id="too-many-vcpus"),
        pytest.param([], {}, "no recorded CPU flavor", id="none-recorded"),
    ],
)  # fmt: skip
def test_no_cpu_pod_says_why(
    flavors: list[CpuFlavor], kwargs: dict[str, object], reason: str
) -> None:
    choice = choose_cpu(flavors, "EU-RO-1", **kwargs)  # type: ignore[arg-type]

    assert isinstance(choice, NoCpu) and reason in choice.reason


def test_the_real_registry_seeds_on_two_vcpus_of_its_cheapest_flavor() -> None:
    choice = choose_cpu(real_registry().cpu_flavors, "EU-RO-1")

    assert isinstance(choice, CpuChoice)
    assert (choice.flavor.id, choice.vcpus, choice.usd_per_hour) == ("cpu3c", 2, 0.06)


def test_a_seeded_model_bills_its_gpu_for_start_and_load_only() -> None:
    cpu = choose_cpu([CHEAP], "EU-RO-1")
    assert isinstance(cpu, CpuChoice)

    b = bringup("m", 100, 3.6, cpu=cpu, download_mb_per_s=100)

    download, load = 1000.0, 100_000 / VOLUME_READ_MB_PER_S["STANDARD"]
    assert b.seeded and b.seed_s == download
    # Its own CPU pod: the pod's start and the download, at the flavor's $/h.
    assert b.seed_usd == round((CPU_POD_START_S + download) / 3600 * 0.06, 4)
    assert b.gpu_before_serving_s == pytest.approx(GPU_POD_START_S + load)
    assert b.gpu_without_seeding_s == pytest.approx(GPU_POD_START_S + load + download)
    assert b.gpu_before_serving_usd == round((GPU_POD_START_S + load) / 3600 * 3.6, 4)


def test_without_a_cpu_pod_the_gpu_bills_the_download_too() -> None:
    b = bringup("m", 100, 3.6, cpu=NoCpu(reason="none"), download_mb_per_s=100)

    assert not b.seeded and b.seed_s == 0 and b.seed_usd == 0
    assert b.gpu_before_serving_s == b.gpu_without_seeding_s


@pytest.mark.parametrize(
    ("loads_at_start", "read_s"),
    [
        pytest.param(True, 100_000 / VOLUME_READ_MB_PER_S["STANDARD"], id="sglang-reads-first"),
        pytest.param(False, 0.0, id="comfyui-reads-on-first-request"),
    ],
)
def test_only_an_engine_that_loads_at_start_bills_the_read_before_serving(
    loads_at_start: bool, read_s: float
) -> None:
    cpu = choose_cpu([CHEAP], "EU-RO-1")
    assert isinstance(cpu, CpuChoice)

    b = bringup("m", 100, 1.0, cpu=cpu, download_mb_per_s=100, loads_at_start=loads_at_start)

    assert b.gpu_before_serving_s == pytest.approx(GPU_POD_START_S + read_s)
    assert b.gpu_without_seeding_s == pytest.approx(GPU_POD_START_S + read_s + 1000)


def test_a_faster_volume_tier_loads_faster() -> None:
    cpu = choose_cpu([CHEAP], "EU-RO-1")
    assert isinstance(cpu, CpuChoice)
    standard = bringup("m", 100, 1, cpu=cpu, download_mb_per_s=100)
    fast = bringup("m", 100, 1, cpu=cpu, download_mb_per_s=100, volume_type="HIGH_PERFORMANCE")

    assert fast.gpu_before_serving_s < standard.gpu_before_serving_s


def test_a_first_deploy_pays_a_cpu_pod_per_seeded_model() -> None:
    cpu = choose_cpu([CHEAP], "EU-RO-1")
    assert isinstance(cpu, CpuChoice)
    models = [
        bringup(m, gb, 2.0, cpu=cpu, download_mb_per_s=100) for m, gb in (("a", 50), ("b", 150))
    ]
    models.append(bringup("c", 10, 2.0, cpu=NoCpu(reason="unseedable"), download_mb_per_s=100))

    deploy = first_deploy(models)

    assert deploy.cpu_pod_s == 2 * CPU_POD_START_S + 500 + 1500
    assert deploy.seed_usd == pytest.approx(deploy.cpu_pod_s / 3600 * 0.06, abs=1e-4)
    assert deploy.gpu_before_serving_usd == round(sum(m.gpu_before_serving_usd for m in models), 4)
    assert deploy.total_usd == round(deploy.seed_usd + deploy.gpu_before_serving_usd, 2)
    assert 0 < deploy.gpu_saved_fraction < 1


def test_a_deploy_that_seeds_nothing_runs_no_cpu_pod() -> None:
    models = [bringup("a", 50, 2.0, cpu=NoCpu(reason="x"), download_mb_per_s=100)]

    deploy = first_deploy(models)

    assert deploy.cpu_pod_s == 0 and deploy.seed_usd == 0 and deploy.gpu_saved_fraction == 0


def test_the_candidates_are_every_fitting_flavor_cheapest_first() -> None:
    found = cpu_candidates([DEAR, flavor("small", 0.01, vcpu_max=2), CHEAP], "EU-RO-1", vcpus=4)

    assert not isinstance(found, NoCpu)
    assert [c.flavor.id for c in found] == ["cheap", "dear"]
    assert [c.usd_per_hour for c in found] == [0.12, 0.2]


@pytest.mark.parametrize(
    ("gb", "fixed", "expected"),
    [
        pytest.param(100, None, SEED_TIMEOUT_BASE_S + 2000, id="scaled"),
        pytest.param(0, None, SEED_TIMEOUT_BASE_S, id="nothing-to-download"),
        pytest.param(100, 7200, 7200, id="fixed"),
    ],
)
def test_the_seed_timeout_scales_with_the_weights_unless_fixed(
    gb: float, fixed: int | None, expected: int
) -> None:
    assert seed_timeout_s(gb, 100, fixed) == expected


@pytest.mark.parametrize(
    ("seeded", "loads_at_start", "volume_type"),
    [
        pytest.param(True, True, "STANDARD", id="seeded-sglang"),
        pytest.param(False, True, "STANDARD", id="downloading-sglang"),
        pytest.param(True, False, "STANDARD", id="seeded-comfyui"),
        pytest.param(True, True, "HIGH_PERFORMANCE", id="seeded-fast-tier"),
    ],
)
def test_the_stacks_rates_price_a_model_as_its_download_and_read_seconds_say(
    seeded: bool, loads_at_start: bool, volume_type: str
) -> None:
    cpu = choose_cpu([CHEAP], "EU-RO-1")
    assert isinstance(cpu, CpuChoice)
    rates = BringupRates(cpu=cpu, download_mb_per_s=87.5, volume_type=volume_type)

    b = rates.of("m", 41.3, 2.39, seeded, loads_at_start)

    # Equal to the last bit: the plan's figures are the same floats as the one-off helpers'.
    download = download_seconds(41.3, 87.5)
    read = read_seconds(41.3, volume_type) if loads_at_start else 0.0
    assert b.gpu_without_seeding_s == GPU_POD_START_S + download + read
    assert b.seed_s == (download if seeded else 0.0) and b.seeded is seeded
    assert b.gpu_before_serving_s == b.gpu_without_seeding_s - (download if seeded else 0.0)
    assert b == bringup("m", 41.3, 2.39, cpu=cpu if seeded else NoCpu(reason="x"),
                        download_mb_per_s=87.5, volume_type=volume_type,
                        loads_at_start=loads_at_start)  # fmt: skip


@pytest.mark.parametrize(
    ("gb", "fixed"),
    [
        pytest.param(41.3, None, id="scaled"),
        pytest.param(41.3, 7200, id="fixed"),
    ],
)
def test_the_stacks_rates_give_the_seed_timeout_of_its_keys(gb: float, fixed: int | None) -> None:
    rates = BringupRates(cpu=None, download_mb_per_s=87.5, fixed_timeout_s=fixed)

    assert rates.timeout_s(gb) == seed_timeout_s(gb, 87.5, fixed)
    assert (rates.timeout_s(gb) == fixed) is (fixed is not None)


@pytest.mark.parametrize("seeding", [True, False])
def test_the_release_archives_a_pod_checks_are_downloaded_with_its_weights(seeding: bool) -> None:
    registry = real_registry()
    plan = plan_fleet(registry, settings(models=["qwen3-8b"], seeding=seeding), stack="t")
    decision = plan.seeding.of("qwen3-8b") if plan.seeding else None
    gateway, ollama = registry.gateway, registry.images[Runtime.OLLAMA]
    assert decision is not None and gateway is not None
    releases_gb = gateway.archive_mb / 1000 + ollama.volume_install_gb
    b = decision.bringup
    fetched_s = download_seconds(b.weights_gb + releases_gb, plan.settings.download_mb_per_s)

    # Ollama loads a model on its first request: its GPU bills its start, and the download
    # when no CPU pod placed the weights and releases first.
    assert b.gpu_without_seeding_s == pytest.approx(GPU_POD_START_S + fetched_s)
    if seeding:
        assert b.seeded and b.seed_s == pytest.approx(fetched_s)
        assert b.gpu_before_serving_s == GPU_POD_START_S
        assert decision.timeout_s == seed_timeout_s(
            b.weights_gb + releases_gb, plan.settings.download_mb_per_s
        )
    else:
        assert not b.seeded and b.gpu_before_serving_s == b.gpu_without_seeding_s
