"""The RunPod v2 payloads the client reads, as pydantic models (the client itself: `client.py`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Wire(BaseModel):
    """API payloads: read what we use, ignore what the API may add later.

    Each model's validator is built when it first reads a payload (`defer_build`): one deploy
    step reads only a few of these."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True, defer_build=True)


class GpuSpec(Wire):
    id: str
    count: int = 1


class Pod(Wire):
    """The fields of a v2 `Pod` the provisioner reads; `cost` is USD per hour."""

    id: str
    name: str
    status: str
    image: str | None = None
    args: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    ports: list[str] = Field(default_factory=list)
    disk: int | None = None
    gpu: GpuSpec | None = None
    cloud: str | None = None
    data_center_id: str | None = Field(default=None, alias="dataCenterId")
    # Changes when the container (re)starts: how an update tells the new process from the old.
    started_at: str | None = Field(default=None, alias="startedAt")
    runtime: dict[str, Any] | None = None
    cost: float = 0.0
    mounts: dict[str, Any] = Field(default_factory=dict)
    global_networking: dict[str, Any] | None = Field(default=None, alias="globalNetworking")

    @property
    def networked(self) -> bool:
        """Global networking is on (`globalNetworking.enabled`): a PATCH of it shows here only
        once the pod restarted."""
        return bool((self.global_networking or {}).get("enabled"))

    @property
    def volume_id(self) -> str | None:
        network = self.mounts.get("network") or []
        first = network[0] if isinstance(network, list) and network else None
        return str(first["volumeId"]) if isinstance(first, dict) and "volumeId" in first else None

    @property
    def uptime_s(self) -> float | None:
        """Seconds since the container started (`runtime.uptime`), when the API says."""
        value = (self.runtime or {}).get("uptime")
        return float(value) if isinstance(value, int | float) else None


class NetworkVolume(Wire):
    """A v2 network volume; `size` is in GB."""

    id: str
    name: str
    size: int
    data_center: str = Field(alias="dataCenter")
    type: str | None = None


class PodList(Wire):
    pods: list[Pod]


class VolumeList(Wire):
    network_volumes: list[NetworkVolume] = Field(alias="networkVolumes")


class GpuPrice(Wire):
    secure: float
    community: float


class Availability(Wire):
    """Stock of one GPU type in one data centre: NONE, LOW, MEDIUM or HIGH."""

    id: str
    availability: str


class CudaVersion(Wire):
    version: str
    available: bool


class GpuOffer(Wire):
    """A v2 `GpuType` with pod availability; prices are USD per GPU per hour."""

    id: str
    price: GpuPrice
    availability: str | None = None
    data_centers: list[Availability] = Field(default_factory=list, alias="dataCenters")
    cuda_versions: list[CudaVersion] = Field(default_factory=list, alias="cudaVersions")


class DataCenterInfo(Wire):
    id: str
    network_volume_types: list[str] = Field(default_factory=list, alias="networkVolumeTypes")
    global_network: bool | None = Field(default=None, alias="globalNetwork")
    """Whether the centre offers global networking; None where the answer leaves it out."""


class PodBilling(Wire):
    """One `PodBillingRecord`: USD billed for one pod in one time bucket."""

    pod_id: str = Field(alias="podId")
    total_amount: float = Field(alias="totalAmount")
    start_time: str | None = Field(default=None, alias="startTime")
    """The bucket's start (RFC 3339)."""


class GpuList(Wire):
    gpus: list[GpuOffer]


class DataCenterList(Wire):
    data_centers: list[DataCenterInfo] = Field(alias="dataCenters")


class PodBillingList(Wire):
    records: list[PodBilling]
