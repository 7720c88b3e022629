"""The one request contract between the planner (which writes it) and the deploy step (which reads
it): what `python -m frutebox_infra.runpod pod|volume|seed ACTION` gets on stdin and prints back.

Frozen dataclasses, no pulumi, no httpx and no pydantic import: `deploy_requests.py` renders a
plan as these records (`to_json`), `runpod/command_io` validates what it reads against them
(validation.py), and the tests build them; a field added here exists on both sides at once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, is_dataclass
from enum import Enum
from functools import cache
from typing import Annotated, Any, get_type_hints

from frutebox_infra.plumbing.validation import Check

OWNER_ENV = "FRUTEBOX_OWNER"
"""Pod environment variable carrying the stack's ownership token: RunPod names are not unique,
so a pod is ours only when it carries our token and mounts our volume."""

VolumeGb = Annotated[int, Check(ge=10, le=4096)]
"""The sizes POST /v2/network-volumes accepts."""

VolumeType = Annotated[str, Check(pattern=r"^(STANDARD|HIGH_PERFORMANCE)$")]


OMIT_EMPTY = "omit_empty"
"""Field metadata: the field is left out of the wire while empty, so a request that does not
use it reads as it did before the field existed (no diff on every pod)."""


def wire_data(record: Any) -> Any:
    """A record as the JSON document it stands for: fields in order, None kept, enums as their
    values, and a float field's whole number written as a float (`120.0`), as a validated
    record would hold it, so the text of a request never depends on how it was built."""
    if is_dataclass(record) and not isinstance(record, type):
        floats = _float_fields(type(record))
        return {
            f.name: _as_float(v) if f.name in floats else wire_data(v)
            for f in fields(record)
            for v in (getattr(record, f.name),)
            if v or not f.metadata.get(OMIT_EMPTY)
        }
    if isinstance(record, list | tuple):
        return [wire_data(item) for item in record]
    if isinstance(record, dict):
        return {str(wire_data(k)): wire_data(v) for k, v in record.items()}
    if isinstance(record, Enum):
        return record.value
    return record


def wire_json(record: Any) -> str:
    """`wire_data` as compact JSON, UTF-8 kept as it is (what pydantic's JSON writes too)."""
    return json.dumps(wire_data(record), separators=(",", ":"), ensure_ascii=False)


def _as_float(value: Any) -> Any:
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


@cache
def _float_fields(cls: type) -> frozenset[str]:
    hints = get_type_hints(cls)
    return frozenset(n for n, t in hints.items() if t is float or t == float | None)


@dataclass(frozen=True, kw_only=True)
class _Request:
    """Requests come from our own Pulumi program: an unknown key is a bug worth stopping on
    (validation.py closes every record)."""

    def to_json(self) -> str:
        return wire_json(self)


@dataclass(frozen=True, kw_only=True)
class HealthSpec(_Request):
    """Where the deploy step asks a new pod whether it serves."""

    port: Annotated[int, Check(ge=1, le=65535)]
    path: Annotated[str, Check(pattern=r"^/")] = "/"
    expectedFiles: list[str] = field(default_factory=list)
    """`kind/name` files the server must list under /models/<kind> (ComfyUI) to be healthy."""


@dataclass(frozen=True, kw_only=True)
class TimeoutSpec(_Request):
    """Either bound may be left out: `Timeouts` holds the defaults, in one place."""

    runningSeconds: Annotated[float, Check(gt=0)] | None = None
    healthySeconds: Annotated[float, Check(gt=0)] | None = None


def _one_tag(value: Any) -> Any:
    # A single tag (requests written before pods could be shared) is a list of one.
    if value is None:
        return []
    return [value] if isinstance(value, str) else value


@dataclass(frozen=True, kw_only=True)
class PodRequest(_Request):
    """stdin of `pod create|update`: candidates are full CreatePodRequest bodies, cheapest first."""

    name: Annotated[str, Check(min_length=1)]
    owner: Annotated[str, Check(min_length=8)]
    """The stack's ownership token."""
    volumeId: Annotated[str, Check(min_length=1)]
    """The stack's weights volume."""
    candidates: Annotated[list[dict[str, Any]], Check(min_length=1)]
    health: HealthSpec
    ollamaPull: Annotated[list[str], Check(before=_one_tag)] = field(default_factory=list)
    """Every Ollama tag the pod serves (several on a shared pod); each is pulled, and the
    pod is healthy only when its server lists them all."""
    hfTokenEnv: list[str] = field(default_factory=list)
    servingKeyEnv: list[str] = field(default_factory=list, metadata={OMIT_EMPTY: True})
    """Env names the step fills with the stack's serving key; it refuses to start a pod that
    lists one without a key."""
    timeouts: TimeoutSpec = field(default_factory=TimeoutSpec)
    meta: Any = None


@dataclass(frozen=True, kw_only=True)
class CpuSpec(_Request):
    """The `cpu` block of a CPU pod's create: a flavor of GET /v2/catalog/cpus and its vCPUs."""

    id: Annotated[str, Check(min_length=1)]
    vcpuCount: Annotated[int, Check(ge=2)]


@dataclass(frozen=True, kw_only=True)
class SeedRequest(_Request):
    """stdin of `seed create|update`: a CPU pod on the stack's volume runs the seeder on
    `plan`, its status is followed until every job ends, and the pod is terminated.

    `pod` is the create body without `cpu`, `env` and `args`: the step adds the CPU flavor it
    walks to (`cpus`, cheapest first), the seeder with its plan (seeding/delivery.py), the
    ownership token and, for `hfTokenEnv`, the Hugging Face token.
    """

    name: Annotated[str, Check(min_length=1)]
    owner: Annotated[str, Check(min_length=8)]
    """The stack's ownership token."""
    volumeId: Annotated[str, Check(min_length=1)]
    dataCenter: Annotated[str, Check(min_length=1)]
    pod: dict[str, Any]
    cpus: Annotated[list[CpuSpec], Check(min_length=1)]
    plan: dict[str, Any]
    """A SeedPlan (seeding/protocol.py), read by the step with that model."""
    status: HealthSpec
    """Where the seeder serves GET /status."""
    timeoutSeconds: Annotated[float, Check(gt=0)]
    """The whole seeding, from the create to the last job's end."""
    hfTokenEnv: list[str] = field(default_factory=list)
    meta: Any = None


@dataclass(frozen=True, kw_only=True)
class VolumeRequest(_Request):
    """stdin of `volume create|update`; size in GB. The volume is named `name-<owner token>`."""

    name: Annotated[str, Check(min_length=1)]
    size: VolumeGb
    dataCenter: Annotated[str, Check(min_length=1)]
    type: VolumeType = "STANDARD"


@dataclass(frozen=True, kw_only=True)
class GrowRequest(_Request):
    """stdin of `volume grow`: the volume's size follows the plan upwards, never down."""

    volumeId: Annotated[str, Check(min_length=1)]
    size: VolumeGb
