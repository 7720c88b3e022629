"""The one request contract between the planner (which writes it) and the deploy step (which reads
it): what `python -m frutebox_infra.runpod pod|volume|seed ACTION` gets on stdin and prints back.

Frozen dataclasses, no pulumi, no httpx and no pydantic import: `deploy_requests.py` renders a
plan as these records (`to_json`), `runpod/command_io` validates what it reads against them
(validation.py), and the tests build them; a field added here exists on both sides at once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from enum import Enum
from functools import cache
from typing import Annotated, Any, get_type_hints

from frutebox_infra.plumbing.validation import Check

OWNER_ENV = "FRUTEBOX_OWNER"
"""Pod environment variable carrying the stack's ownership token: RunPod names are not unique,
so a pod is ours only when it carries our token and mounts our volume."""


def owns_pod(
    env: Mapping[str, str], mounted: str | None, *, owner: str | None, volume_id: str | None
) -> bool:
    """Proof that a pod (its `env`, the volume it has `mounted`) is the stack's; the one place
    that decides, for `frutebox status` and the deploy step alike.

    Names are not unique on RunPod, so a name never proves it. Where the stack has an
    ownership token (`owner`), the pod must carry it in `OWNER_ENV`; where the stack's volume
    is known, the pod must mount it; with neither known, nothing is provably ours.
    """
    if owner is None and volume_id is None:
        return False
    token_ok = owner is None or env.get(OWNER_ENV) == owner
    volume_ok = volume_id is None or mounted == volume_id
    return token_ok and volume_ok


def volume_owned(name: str, *, base: str, owner: str | None) -> bool | None:
    """Whether a volume named `name` is the stack's, whose volumes are named `<base>-<token>`:
    True when named with the stack's token, False when named like the stack's without it
    (`<base>`, `<base>-<another token>`: someone else's), None when named otherwise."""
    if name != base and not name.startswith(f"{base}-"):
        return None
    return owner is not None and name == f"{base}-{owner}"

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
    private: bool = field(default=False, metadata={OMIT_EMPTY: True})
    """Created with global networking and no published port (the stack's `exposure:
    private`): the step cannot reach `health` from outside, so it waits for a RUNNING pod
    whose container stays up (a crash loop still fails fast), and patches
    `globalNetworking` with the ports when a stack switches."""
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


@dataclass(frozen=True, kw_only=True)
class SweepRequest(_Request):
    """stdin of `stack sweep`, run at the end of every `up`: what the stack's state records
    once every pod is in place. What the stack's token proves ours and this does not name is
    a leftover (an ambiguous create's late result, a cancelled run's pod) and is removed."""

    volumeName: Annotated[str, Check(min_length=1)]
    """The volume's base name; the stack's volumes are named `<base>-<owner>`."""
    owner: Annotated[str, Check(min_length=8)]
    volumeId: Annotated[str, Check(min_length=1)]
    podIds: list[str]
    """Every pod the state records."""
    names: list[str]
    """The names of the pods and seeding pods this `up` declares: a pod of ours named
    otherwise (a disarmed model's) is left to its own delete, which runs after the program."""
