"""The one request contract between the planner (which writes it) and the deploy step (which reads
it): what `python -m frutebox_infra.runpod pod|volume|seed ACTION` gets on stdin and prints back.

Plain pydantic, no pulumi and no httpx: `deploy_requests.py` renders a plan as these models,
`runpod/command_io` parses them, and the tests build them; a field added here exists on both
sides at once.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

OWNER_ENV = "FRUTEBOX_OWNER"
"""Pod environment variable carrying the stack's ownership token: RunPod names are not unique,
so a pod is ours only when it carries our token and mounts our volume."""

VolumeGb = Annotated[int, Field(ge=10, le=4096)]
"""The sizes POST /v2/network-volumes accepts."""

VolumeType = Annotated[str, Field(pattern=r"^(STANDARD|HIGH_PERFORMANCE)$")]


class _Strict(BaseModel):
    """Requests come from our own Pulumi program: an unknown key is a bug worth stopping on.

    Schemas are built on first use: a preview renders only the volume's request, the deploy
    step reads only the one it is given."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    def to_json(self) -> str:
        return self.model_dump_json(exclude_none=False)


class HealthSpec(_Strict):
    port: int = Field(ge=1, le=65535)
    path: str = Field(default="/", pattern=r"^/")
    expectedFiles: list[str] = Field(default_factory=list)
    """`kind/name` files the server must list under /models/<kind> (ComfyUI) to be healthy."""


class TimeoutSpec(_Strict):
    """Either bound may be left out: `Timeouts` holds the defaults, in one place."""

    runningSeconds: float | None = Field(default=None, gt=0)
    healthySeconds: float | None = Field(default=None, gt=0)


class PodRequest(_Strict):
    """stdin of `pod create|update`: candidates are full CreatePodRequest bodies, cheapest first."""

    name: str = Field(min_length=1)
    owner: str = Field(min_length=8, description="the stack's ownership token")
    volumeId: str = Field(min_length=1, description="the stack's weights volume")
    candidates: list[dict[str, Any]] = Field(min_length=1)
    health: HealthSpec
    ollamaPull: list[str] = Field(default_factory=list)
    """Every Ollama tag the pod serves (several on a shared pod); each is pulled, and the
    pod is healthy only when its server lists them all."""
    hfTokenEnv: list[str] = Field(default_factory=list)
    timeouts: TimeoutSpec = Field(default_factory=TimeoutSpec)
    meta: Any = None

    @field_validator("ollamaPull", mode="before")
    @classmethod
    def _one_tag(cls, value: Any) -> Any:
        # A single tag (requests written before pods could be shared) is a list of one.
        if value is None:
            return []
        return [value] if isinstance(value, str) else value


class CpuSpec(_Strict):
    """The `cpu` block of a CPU pod's create: a flavor of GET /v2/catalog/cpus and its vCPUs."""

    id: str = Field(min_length=1)
    vcpuCount: int = Field(ge=2)


class SeedRequest(_Strict):
    """stdin of `seed create|update`: a CPU pod on the stack's volume runs the seeder on
    `plan`, its status is followed until every job ends, and the pod is terminated.

    `pod` is the create body without `cpu`, `env` and `args`: the step adds the CPU flavor it
    walks to (`cpus`, cheapest first), the seeder with its plan (seeding/delivery.py), the
    ownership token and, for `hfTokenEnv`, the Hugging Face token.
    """

    name: str = Field(min_length=1)
    owner: str = Field(min_length=8, description="the stack's ownership token")
    volumeId: str = Field(min_length=1)
    dataCenter: str = Field(min_length=1)
    pod: dict[str, Any]
    cpus: list[CpuSpec] = Field(min_length=1)
    plan: dict[str, Any]
    """A SeedPlan (seeding/protocol.py), read by the step with that model."""
    status: HealthSpec
    """Where the seeder serves GET /status."""
    timeoutSeconds: float = Field(gt=0)
    """The whole seeding, from the create to the last job's end."""
    hfTokenEnv: list[str] = Field(default_factory=list)
    meta: Any = None


class VolumeRequest(_Strict):
    """stdin of `volume create|update`; size in GB. The volume is named `name-<owner token>`."""

    name: str = Field(min_length=1)
    size: VolumeGb
    dataCenter: str = Field(min_length=1)
    type: VolumeType = "STANDARD"


class GrowRequest(_Strict):
    """stdin of `volume grow`: the volume's size follows the plan upwards, never down."""

    volumeId: str = Field(min_length=1)
    size: VolumeGb


class _Result(BaseModel):
    """A result printed earlier and read back (PULUMI_COMMAND_STDOUT): newer keys are fine."""

    model_config = ConfigDict(extra="ignore", defer_build=True)


class PreviousPod(_Result):
    podId: str
    ollamaModels: list[str] = Field(default_factory=list)
    """The Ollama tags the pod served last time: a member no longer listed is deleted."""
    candidateIndex: int | None = None
    candidatesTried: list[dict[str, Any]] = Field(default_factory=list)
    applied: dict[str, Any] | None = None
    """What the pod was last set to (image, args, env without secrets, ports, disk) and the
    env names the step fills with secrets (`secretEnv`): an update whose new container does
    not serve is rolled back to it."""


class PreviousSeed(_Result):
    """What a seed printed: the volume it filled and how each model ended; kept whole, since
    an update that finds nothing to do prints it again."""

    model_config = ConfigDict(extra="allow")

    volumeId: str
    state: str
    models: list[dict[str, Any]] = Field(default_factory=list)


class PreviousVolume(_Result):
    volumeId: str
    owner: str | None = None
    name: str | None = None
    """The volume's name (`<base>-<owner token>`): a destroy removes any other volume of ours."""
