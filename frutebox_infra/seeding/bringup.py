"""Bring-up: the CPU flavor that seeds, what seeding costs, and the GPU time billed before a
model serves, with and without seeding (pure; the defaults and why they are what they are).

These constants are the one statement of the bring-up assumptions: the plan's figures come
from them, and the realistic emulator times its pods' starts, downloads and reads by them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from frutebox_infra.catalog.schema import CpuFlavor

SEED_VCPUS = 2
"""vCPUs of the seeding pod: the fewest a CPU pod takes (`vcpuCount` minimum 2). A download
is bound by the network, not the CPU: one core hashes sha256 several times faster than the
100 MB/s assumed here, and more vCPUs buy no bandwidth the catalog promises."""

SEEDER_DISK_GB = 10
"""Container disk of the seeding pod: the slim Python image (~50 MB) and its logs; every byte
of weights goes to the network volume. 10 GB is within every flavor's per-vCPU cap at 2 vCPUs."""

CPU_POD_START_S = 90
"""Assumed, not measured: placing a CPU pod, pulling the slim image and starting it."""

DOWNLOAD_MB_PER_S = 100
"""Assumed, not measured: a pod's download from Hugging Face or Ollama's registry, MB/s (the
stack key `downloadMBps` changes it). Both CDNs serve far faster; a pod's share of its host's
link is the usual bound."""

GPU_POD_START_S = 300
"""Assumed, not measured: placing a GPU pod, pulling a 5-20 GB CUDA engine image onto a host
that lacks it and starting the engine (CUDA graphs, warm-up). Billed on every first deploy;
a host that has the image cached starts faster."""

VOLUME_READ_MB_PER_S = {"STANDARD": 237.0, "HIGH_PERFORMANCE": 474.0}
"""How fast an engine reads its weights off the network volume, MB/s. STANDARD: one `dd` of a
41 GB safetensors file under /workspace on a RunPod pod read 237 MB/s (kohya-ss/musubi-tuner
issue 655, 2025-10; that it was a network volume is not stated); HIGH_PERFORMANCE: RunPod
documents the tier as up to 2x faster (runpod/docs PR 429). One sequential stream: engines
that read in parallel may do better. Measure on a pod and correct it here."""

SEED_TIMEOUT_BASE_S = 900
SEED_TIMEOUT_SLACK = 2.0
"""A seed may take twice its download at the stated speed, plus 15 minutes, before it counts
as failed: half the assumed bandwidth still finishes; a dead link does not bill for hours."""


@dataclass(frozen=True, kw_only=True)
class CpuChoice:
    """The CPU pod that seeds: flavor, vCPUs and its price, USD per hour for the pod."""

    flavor: CpuFlavor
    vcpus: int
    usd_per_hour: float
    disk_gb: int


@dataclass(frozen=True, kw_only=True)
class NoCpu:
    """Why no CPU pod seeds here; the GPU pods then download their own weights."""

    reason: str


def cpu_candidates(
    flavors: Sequence[CpuFlavor],
    data_center: str,
    *,
    vcpus: int = SEED_VCPUS,
    flavor_id: str | None = None,
) -> tuple[CpuChoice, ...] | NoCpu:
    """Every flavor (or only the one named) offered in `data_center` that takes `vcpus` and a
    disk of SEEDER_DISK_GB, cheapest first: the deploy step walks them as it walks GPUs. A
    flavor whose data centres nobody recorded counts as offered: the live catalog has the last
    word at deploy."""
    named = [f for f in flavors if flavor_id in (None, f.id)]
    if flavor_id is not None and not named:
        known = ", ".join(f.id for f in flavors) or "none"
        return NoCpu(
            reason=f"CPU flavor {flavor_id} is not in registry/gpus.yaml cpu_flavors ({known})"
        )
    offered = [f for f in named if f.data_centers is None or data_center in f.data_centers]
    if not offered:
        return NoCpu(reason=f"no recorded CPU flavor is offered in {data_center}")
    fitting = [
        f
        for f in offered
        if f.vcpu_min <= vcpus <= f.vcpu_max
        and (f.disk_gb_per_vcpu is None or f.disk_gb_per_vcpu * vcpus >= SEEDER_DISK_GB)
    ]
    if not fitting:
        return NoCpu(
            reason=f"no CPU flavor in {data_center} takes {vcpus} vCPUs and a {SEEDER_DISK_GB} "
            "GB disk"
        )
    ranked = sorted(fitting, key=lambda f: (f.usd_per_hour(vcpus), f.id))
    return tuple(
        CpuChoice(flavor=f, vcpus=vcpus, usd_per_hour=f.usd_per_hour(vcpus), disk_gb=SEEDER_DISK_GB)
        for f in ranked
    )


def choose_cpu(
    flavors: Sequence[CpuFlavor],
    data_center: str,
    *,
    vcpus: int = SEED_VCPUS,
    flavor_id: str | None = None,
) -> CpuChoice | NoCpu:
    """The cheapest of `cpu_candidates`, or why there is none."""
    found = cpu_candidates(flavors, data_center, vcpus=vcpus, flavor_id=flavor_id)
    return found if isinstance(found, NoCpu) else found[0]


def download_seconds(weights_gb: float, download_mb_per_s: float) -> float:
    return weights_gb * 1000 / download_mb_per_s


def read_seconds(weights_gb: float, volume_type: str) -> float:
    """The weights read off the volume at VOLUME_READ_MB_PER_S of its tier."""
    return weights_gb * 1000 / VOLUME_READ_MB_PER_S[volume_type]


def rearm_seconds(weights_gb: float, volume_type: str, *, loads_at_start: bool) -> float:
    """GPU time billed before a model serves again when its weights are already on the volume
    (an armed window opening): the pod's start, and the read where the engine loads at start."""
    read = read_seconds(weights_gb, volume_type) if loads_at_start else 0.0
    return GPU_POD_START_S + read


@dataclass(frozen=True, kw_only=True)
class Bringup:
    """One model's way to serving on a first deploy, seconds and USD."""

    model_id: str
    weights_gb: float
    seed_s: float
    """Its download on its CPU pod at the stated speed, the release archives its GPU pod
    checks included (0 when it is not seeded)."""
    seed_usd: float
    """Its CPU pod's $/h over the pod's start and that download."""
    gpu_before_serving_s: float
    """GPU time billed before it serves: start, plus the weights read off the volume where
    the engine loads them at start, plus the download (weights and release archives) when no
    CPU pod seeded it."""
    gpu_before_serving_usd: float
    gpu_without_seeding_s: float
    gpu_without_seeding_usd: float
    seeded: bool


def bringup(
    model_id: str,
    weights_gb: float,
    gpu_usd_per_hour: float,
    *,
    cpu: CpuChoice | NoCpu,
    download_mb_per_s: float,
    volume_type: str = "STANDARD",
    loads_at_start: bool = True,
) -> Bringup:
    """`cpu` is the pod that seeds this model, or why none does. `loads_at_start`: the engine
    reads every weight before it answers (SGLang, vLLM, llama.cpp); Ollama and ComfyUI load a
    model on its first request, so their GPU bills no read before serving."""
    seeder = cpu if isinstance(cpu, CpuChoice) else None
    rates = BringupRates(cpu=seeder, download_mb_per_s=download_mb_per_s, volume_type=volume_type)
    return rates.of(model_id, weights_gb, gpu_usd_per_hour, seeder is not None, loads_at_start)


@dataclass(frozen=True, kw_only=True)
class BringupRates:
    """What every model's bring-up in one stack is priced by: the CPU pod that seeds, the
    download speed, the volume's tier and the fixed seed timeout, if any. Made once per plan,
    so a model's bring-up is its own arithmetic only."""

    cpu: CpuChoice | None
    """The seeding pod (the cheapest flavor), or None where nothing seeds."""
    download_mb_per_s: float
    volume_type: str = "STANDARD"
    fixed_timeout_s: int | None = None

    def of(
        self,
        model_id: str,
        weights_gb: float,
        gpu_usd_per_hour: float,
        seeded: bool,
        loads_at_start: bool,
        releases_gb: float = 0.0,
    ) -> Bringup:
        """One model's bring-up; `seeded`: the stack's CPU pod seeds it. `releases_gb`: the
        release archives its pod's launch checks on the volume (the gateway's, an engine's),
        downloaded with the weights by whichever pod fetches them, and never read at load."""
        download_s = download_seconds(weights_gb + releases_gb, self.download_mb_per_s)
        load_s = read_seconds(weights_gb, self.volume_type) if loads_at_start else 0.0
        without = GPU_POD_START_S + download_s + load_s
        without_usd = round(without / 3600 * gpu_usd_per_hour, 4)
        if not seeded:
            return Bringup(
                model_id=model_id,
                weights_gb=weights_gb,
                seed_s=0.0,
                seed_usd=0.0,
                gpu_before_serving_s=without,
                gpu_before_serving_usd=without_usd,
                gpu_without_seeding_s=without,
                gpu_without_seeding_usd=without_usd,
                seeded=False,
            )
        cpu = self.cpu
        assert cpu is not None, "a seeded model needs the stack's CPU pod"
        gpu_s = without - download_s
        seed_usd = (CPU_POD_START_S + download_s) / 3600 * cpu.usd_per_hour
        return Bringup(
            model_id=model_id,
            weights_gb=weights_gb,
            seed_s=download_s,
            seed_usd=round(seed_usd, 4),
            gpu_before_serving_s=gpu_s,
            gpu_before_serving_usd=round(gpu_s / 3600 * gpu_usd_per_hour, 4),
            gpu_without_seeding_s=without,
            gpu_without_seeding_usd=without_usd,
            seeded=True,
        )

    def timeout_s(self, weights_gb: float, releases_gb: float = 0.0) -> int:
        """`seed_timeout_s` at the stack's download speed and fixed timeout, for the weights
        and the release archives a seed fetches."""
        return seed_timeout_s(
            weights_gb + releases_gb, self.download_mb_per_s, self.fixed_timeout_s
        )


@dataclass(frozen=True, kw_only=True)
class FirstDeploy:
    """A stack's first deploy: each seeded model on a CPU pod of its own (they run side by
    side, each with its own link), then the GPUs."""

    models: tuple[Bringup, ...]
    cpu_pod_s: float
    """CPU pod time, summed over the seeding pods."""
    seed_usd: float
    gpu_before_serving_usd: float
    gpu_without_seeding_usd: float

    @property
    def total_usd(self) -> float:
        return round(self.seed_usd + self.gpu_before_serving_usd, 2)

    @property
    def gpu_saved_fraction(self) -> float:
        """How much of the GPU $ billed before serving seeding removes (0..1)."""
        if self.gpu_without_seeding_usd == 0:
            return 0.0
        return 1 - self.gpu_before_serving_usd / self.gpu_without_seeding_usd


def first_deploy(models: Sequence[Bringup]) -> FirstDeploy:
    """The sums over every placed model (lists, not generators: summed once per plan over
    thousands of models)."""
    seeding = [m for m in models if m.seeded]
    return FirstDeploy(
        models=tuple(models),
        cpu_pod_s=sum([CPU_POD_START_S + m.seed_s for m in seeding]),
        seed_usd=round(sum([m.seed_usd for m in seeding]), 4),
        gpu_before_serving_usd=round(sum([m.gpu_before_serving_usd for m in models]), 4),
        gpu_without_seeding_usd=round(sum([m.gpu_without_seeding_usd for m in models]), 4),
    )


def seed_timeout_s(weights_gb: float, download_mb_per_s: float, fixed: int | None = None) -> int:
    """How long one seeding run may take: `fixed` when the stack sets one, else scaled."""
    if fixed:
        return fixed
    download_s = download_seconds(weights_gb, download_mb_per_s)
    return SEED_TIMEOUT_BASE_S + math.ceil(SEED_TIMEOUT_SLACK * download_s)
