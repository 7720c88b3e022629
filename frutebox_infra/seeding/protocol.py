"""The seeder's wire contract: the plan a CPU pod gets and the status JSON it serves back.

The seeder itself is standard-library Python (it runs in a slim image and cannot import this
package), so these frozen dataclasses are the one written definition of both documents: the
planner builds a `SeedPlan` (no pydantic), the deploy step and the emulator validate them and
`SeedStatus` at the edge (validation.py), and the tests check the real seeder's output against
them. Keys are camelCase, as in the deploy contract.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Literal

from frutebox_infra.deploy.contract import OMIT_EMPTY, wire_json
from frutebox_infra.plumbing.validation import Check

PROTOCOL_VERSION: Literal[1] = 1

PLAN_ENV = "FRUTEBOX_SEED_PLAN"
"""Pod environment variable holding the SeedPlan JSON."""
PROGRAM_ENV = "FRUTEBOX_SEEDER"
"""Pod environment variable holding the seeder's source, which the pod's args execute."""
TOKEN_ENV = "HF_TOKEN"
"""The Hugging Face token, filled by the deploy step at the last moment like a GPU pod's."""
STATUS_PATH = "/status"

HF_HUB_URL = "https://huggingface.co"
OLLAMA_REGISTRY_URL = "https://registry.ollama.ai"
OLLAMA_REGISTRY_HOST = "registry.ollama.ai"
"""The host Ollama files its manifests under (manifests/<host>/<namespace>/<name>/<tag>)."""


def _below(path: str, _: object) -> str:
    if path.startswith("/") or ".." in path.split("/") or "\\" in path:
        raise ValueError(f"{path!r} must be a path below the volume's mount, without `..`")
    return path


RepoId = Annotated[str, Check(pattern=r"^[A-Za-z0-9][\w.\-]*/[A-Za-z0-9][\w.\-]*$")]
"""`org/name` on the Hub: two names, each starting with a letter or digit."""

RelativePath = Annotated[str, Check(min_length=1, after=_below)]
"""A path below the volume's mount: never absolute, never climbing out with `..`."""

OllamaTag = Annotated[
    str, Check(pattern=r"^([A-Za-z0-9][\w.\-]*/)?[A-Za-z0-9][\w.\-]*(:\w[\w.\-]*)?$")
]
"""`name`, `namespace/name`, either with `:tag`."""


@dataclass(frozen=True, kw_only=True)
class PlacedText:
    """A small file of ours the GPU pod needs on the volume before it starts (the gateway's
    start hook, recipes/gateway.py), written whole: to a temporary name, then renamed."""

    path: RelativePath
    text: str


Sha256 = Annotated[str, Check(pattern=r"^[0-9a-f]{64}$")]
Sha512 = Annotated[str, Check(pattern=r"^[0-9a-f]{128}$")]


@dataclass(frozen=True, kw_only=True)
class PlacedArchive:
    """A published release archive the GPU pod's launch checks on the volume before its engine
    starts (the gateway's, pinned by SHA-512; an engine's, by SHA-256: registry/images.yaml):
    fetched to a temporary name, checked against its pin and only then renamed into place. One
    already there that matches its pin is left alone; a download that does not fails the job,
    so no GPU pod is created. Exactly one of the checksums."""

    url: Annotated[str, Check(pattern=r"^https?://")]
    path: RelativePath
    sha256: Sha256 | None = None
    sha512: Sha512 | None = None

    def __post_init__(self) -> None:
        if (self.sha256 is None) == (self.sha512 is None):
            raise ValueError(f"{self.path}: give exactly one of sha256 and sha512")


@dataclass(frozen=True, kw_only=True)
class HfSnapshotJob:
    """A repo at a revision, stored as huggingface_hub stores it under `cacheDir`:
    `models--org--name/blobs/<etag>`, `snapshots/<commit>/<path>` (relative symlinks to the
    blobs) and `refs/<name>` holding the commit, so an engine that loads through
    huggingface_hub (or llama.cpp's own reader of that layout) finds it offline."""

    kind: Literal["hf-snapshot"] = "hf-snapshot"
    modelId: str
    repo: RepoId
    revision: Annotated[str, Check(min_length=1)]
    cacheDir: RelativePath
    gated: bool = False
    refs: tuple[str, ...] = ()
    """Ref files written (last, once every file is in place) pointing at the resolved commit."""
    ignore: tuple[str, ...] = ()
    """fnmatch patterns on repo paths that are never seeded."""
    ignoreBesideSafetensors: tuple[str, ...] = ()
    """Patterns skipped only when the revision holds `*.safetensors` weights: the engines
    load those and leave other weight formats alone."""
    quant: str | None = None
    """For llama.cpp: seed only the GGUF files `-hf REPO:QUANT` loads (the quant's first
    shard and its siblings), chosen by llama.cpp's own rule."""
    archives: tuple[PlacedArchive, ...] = field(default=(), metadata={OMIT_EMPTY: True})
    """Release archives the model's GPU pod checks at start (its gateway's), placed first: a
    mismatch fails the job before any weight moves. Left out of the job's JSON when empty."""
    texts: tuple[PlacedText, ...] = field(default=(), metadata={OMIT_EMPTY: True})
    """Files of ours the model's GPU pod reads at start (its gateway's start hook), written
    before the weights: a job is done only with them in place. Left out of the job's JSON when
    empty, as `counterDirs` is."""
    counterDirs: tuple[RelativePath, ...] = field(default=(), metadata={OMIT_EMPTY: True})
    """Directories made once the snapshot is in place (left as they are when there): where
    the pod's engine keeps its counters on the volume (its `PROMETHEUS_MULTIPROC_DIR`), which
    an engine fails to start without and a fixed-ENTRYPOINT launch (vLLM's) cannot make.
    Left out of the job's JSON when empty, so a job without one (and its seed's fingerprint)
    reads as it did before the field."""


@dataclass(frozen=True, kw_only=True)
class FileSpec:
    """One file of a repo at a revision, stored at a flat path (ComfyUI's models/<kind>/)."""

    repo: RepoId
    revision: Annotated[str, Check(min_length=1)]
    path: Annotated[str, Check(min_length=1)]
    destination: RelativePath
    gated: bool = False
    size: Annotated[int, Check(ge=0)] | None = None
    sha256: Sha256 | None = None
    """Where the registry knows them; otherwise the Hub's tree at the revision says."""


@dataclass(frozen=True, kw_only=True)
class FilesJob:
    """Single files to place (ComfyUI's model folders): each fetched and checked."""

    kind: Literal["files"] = "files"
    modelId: str
    files: Annotated[tuple[FileSpec, ...], Check(min_length=1)]
    archives: tuple[PlacedArchive, ...] = field(default=(), metadata={OMIT_EMPTY: True})
    """As `HfSnapshotJob.archives`."""


@dataclass(frozen=True, kw_only=True)
class OllamaJob:
    """An Ollama library tag pulled into a model store as Ollama keeps one:
    `blobs/sha256-<hex>` and `manifests/<host>/<namespace>/<name>/<tag>`."""

    kind: Literal["ollama"] = "ollama"
    modelId: str
    tag: OllamaTag
    store: RelativePath
    archives: tuple[PlacedArchive, ...] = field(default=(), metadata={OMIT_EMPTY: True})
    """As `HfSnapshotJob.archives` (the gateway's and Ollama's own release)."""


SeedJob = Annotated[HfSnapshotJob | FilesJob | OllamaJob, Check(discriminator="kind")]


@dataclass(frozen=True, kw_only=True)
class SeedPlan:
    """Everything one seeder run does: one job per model, run side by side."""

    version: Literal[1] = PROTOCOL_VERSION
    volumePath: Annotated[str, Check(pattern=r"^/")] = "/workspace"
    jobs: Annotated[tuple[SeedJob, ...], Check(min_length=1)]
    hubUrl: Annotated[str, Check(pattern=r"^https?://")] = HF_HUB_URL
    ollamaRegistryUrl: Annotated[str, Check(pattern=r"^https?://")] = OLLAMA_REGISTRY_URL
    stallSeconds: Annotated[float, Check(gt=0, le=3600)] = 120
    """A download that delivers no byte for this long is a stall (retried, then a failure)."""
    port: Annotated[int, Check(ge=0, le=65535)] = 8080
    """The status port (`8080/http` on the pod); 0 takes any free port and logs it."""
    bindAddress: str = "0.0.0.0"

    def to_json(self) -> str:
        return wire_json(self)


class JobState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class SeedState(StrEnum):
    """The run as a whole: running until every job is done or failed."""

    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True, kw_only=True)
class JobStatus:
    """How far one model's seeding has got, as the seeder reports it."""

    modelId: str
    state: JobState
    bytesDone: Annotated[int, Check(ge=0)]
    """Bytes in place: already present (skipped) or downloaded and verified."""
    bytesTotal: Annotated[int, Check(ge=0)] | None = None
    """None until the source has been listed."""
    bytesSkipped: Annotated[int, Check(ge=0)] = 0
    """Of bytesDone, those found already complete on the volume."""
    filesDone: Annotated[int, Check(ge=0)] = 0
    filesTotal: Annotated[int, Check(ge=0)] | None = None
    commit: str | None = None
    """The revision resolved to a commit (Hugging Face jobs)."""
    reason: str | None = None
    fix: str | None = None


@dataclass(frozen=True, kw_only=True)
class SeedStatus:
    """`GET /status` of a seeder pod."""

    version: Literal[1]
    state: SeedState
    startedAt: str
    updatedAt: str
    jobs: tuple[JobStatus, ...]
    error: str | None = None
    """Why the seeder could not run at all (its plan unreadable): failed, with no jobs."""

    def job(self, model_id: str) -> JobStatus | None:
        return next((j for j in self.jobs if j.modelId == model_id), None)
