"""The registry's schema: every model, GPU, image and data-centre fact, as validated records."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from itertools import pairwise
from typing import Annotated, Any, Literal, NamedTuple

from frutebox_infra.catalog.engine_options import EngineOptions
from frutebox_infra.catalog.engine_routes import EngineRoutes
from frutebox_infra.catalog.speed_facts import (
    PARAMETERS_TOLERANCE,
    GpuSpeed,
    Parameters,
    SpeedFacts,
)
from frutebox_infra.catalog.vocabulary import Runtime as Runtime
from frutebox_infra.catalog.vocabulary import SpecDecode as SpecDecode
from frutebox_infra.plumbing.validation import Check

MAX_CONTEXT_TOKENS = 10_485_760
"""The longest context any model claims (10M tokens)."""


class Cloud(StrEnum):
    """RunPod's two clouds; a GPU's price is recorded per cloud."""

    SECURE = "SECURE"
    COMMUNITY = "COMMUNITY"


@dataclass(frozen=True, kw_only=True)
class Price:
    """On-demand price of one GPU, USD per hour, per RunPod cloud; None where never observed."""

    secure: Annotated[float, Check(gt=0, le=100)] | None = None
    community: Annotated[float, Check(gt=0, le=100)] | None = None
    source: str


@dataclass(frozen=True, kw_only=True)
class Gpu:
    """One RunPod GPU type. `vram_gb` is the marketed size; `memory_mib` what the driver reports."""

    id: Annotated[str, Check(min_length=1)]
    """RunPod GPU type id, e.g. 'NVIDIA H100 80GB HBM3'."""
    name: str
    vram_gb: Annotated[int, Check(gt=0, le=1024)]
    memory_mib: Annotated[int, Check(gt=0, le=1024 * 1024)]
    fp8: bool
    max_count: Annotated[int, Check(ge=1, le=8)]
    price_usd_per_hour: Price
    architecture: Annotated[str, Check(pattern=r"^sm_\d+$")] | None = None
    """CUDA compute capability (sm_86, sm_90, ...): which image kernels can run on it."""
    speed: GpuSpeed | None = None
    """None where unsourced: the speed model then gives no estimate on this GPU."""

    def __post_init__(self) -> None:
        self._fp8_figures_agree()
        self._units_agree()

    def _fp8_figures_agree(self) -> None:
        if self.speed is None:
            return
        has_figure = self.speed.fp8_dense_tflops is not None
        if has_figure != self.fp8:
            raise ValueError(
                f"fp8 is {str(self.fp8).lower()} but speed.fp8_dense_tflops is"
                f" {'set' if has_figure else 'missing'}: a GPU with FP8 tensor cores records"
                " their dense TFLOPS, one without records none"
            )

    def _units_agree(self) -> None:
        # Marketed GB are within a few percent of the driver's GiB; anything else is a
        # figure in the wrong unit (16376 is the A4000's MiB, not its GB).
        gib = self.memory_mib / 1024
        if not 0.85 <= gib / self.vram_gb <= 1.15:
            raise ValueError(
                f"vram_gb {self.vram_gb} GB and memory_mib {self.memory_mib} MiB"
                f" ({gib:.1f} GiB) disagree: vram_gb is the marketed size in GB (16 for a 16 GB"
                " card), memory_mib what nvidia-smi reports in MiB"
            )


def _sm_names(archs: tuple[str, ...], _: object) -> tuple[str, ...]:
    bad = [a for a in archs if not re.fullmatch(r"sm_\d+", a)]
    if bad:
        raise ValueError(f"not a compute capability like sm_90: {', '.join(bad)}")
    return archs


@dataclass(frozen=True, kw_only=True)
class EngineArchive:
    """An engine's published release archive that its pod installs from the volume (an image
    that ships no engine of its own): pinned by the checksum a public source gives."""

    url: Annotated[str, Check(pattern=r"^https://")]
    sha256: Annotated[str, Check(pattern=r"^[0-9a-f]{64}$")]
    source: str
    """Where the URL and checksum were read."""

    @property
    def file_name(self) -> str:
        return self.url.rsplit("/", 1)[-1]


@dataclass(frozen=True, kw_only=True)
class Dispatch:
    """An ENTRYPOINT that is a dispatcher script (llama.cpp's tools.sh): the first word of
    `args` picks the program it execs with the rest."""

    server_word: str
    """The word that execs the server with the other words as its flags."""
    server_path: str
    """The server program's path in the image."""
    python_word: str
    """The word that execs the image's Python on a program of its own (which runs a start
    hook from PYTHONPATH first)."""
    source: str
    """Where the dispatcher was read."""


@dataclass(frozen=True, kw_only=True)
class Image:
    """A serving engine's container image and how RunPod's `args` reaches its process."""

    repository: str
    tag: str | None = None
    port: Annotated[int, Check(gt=0, lt=65536)]
    health_path: Annotated[str, Check(pattern=r"^/")]
    entrypoint: Literal["none", "fixed-binary"]
    """none: args is the whole command; fixed-binary: args are flags or sub-commands of a
    fixed program."""
    entrypoint_detail: str
    dispatch: Dispatch | None = None
    """Where a `fixed-binary` ENTRYPOINT is a dispatcher script rather than the server."""
    cache_env: dict[str, str] = field(default_factory=dict)
    engine_version: Annotated[str, Check(pattern=r"^\d+(\.\d+)*$")] | None = None
    """The engine release the tag ships, where a model needs a minimum one."""
    min_cuda_version: Annotated[str, Check(pattern=r"^\d+\.\d+$")]
    """The host CUDA version (driver) the image's CUDA runtime needs, `major.minor`: sent as
    `gpu.minCudaVersion` on every create, so an older host is a capacity answer."""
    gpu_architectures: Annotated[tuple[str, ...], Check(after=_sm_names)] = ()
    """Compute capabilities the image's kernels run on (binary-compatible ones included);
    empty means not recorded, and then no GPU is refused for it."""
    gpu_architectures_source: str | None = None
    volume_install_gb: Annotated[float, Check(ge=0.0, le=1000.0)] = 0.0
    """Disk (GB) the engine itself installs onto the weights volume, once per stack (e.g. a
    ComfyUI release and its venv): the volume is sized for it like for the weights."""
    engine_archive: EngineArchive | None = None
    """The engine's release archive the pod checks and unpacks at every start, where the image
    ships none (Ollama's): placed by the model's seed, or fetched once per volume by an
    unseeded pod."""

    def drives(self, gpu: Gpu) -> bool:
        """Can this image's kernels run on `gpu`? Unknown on either side is not a refusal."""
        if not self.gpu_architectures or gpu.architecture is None:
            return True
        return gpu.architecture in self.gpu_architectures

    @property
    def reference(self) -> str:
        return f"{self.repository}:{self.tag}" if self.tag else self.repository

    @property
    def pinned(self) -> bool:
        """A tag names a release (`0.35.1`, `v0.5.21`, build `b11382`) or a digest;
        `latest`, `server-cuda` or `server-cuda12` float."""
        return self.tag is not None and _RELEASE_TAG.search(self.tag) is not None


_RELEASE_TAG = re.compile(r"\d+\.\d+|(?:^|[-_.])b\d{3,}(?:$|[-_.])|^sha256:")


@dataclass(frozen=True, kw_only=True)
class GgufSource:
    """A GGUF quant served by llama.cpp's `-hf REPO:QUANT` (which takes no revision)."""

    repo: str
    quant: str
    revision: str | None = None
    disk_gb: Annotated[float, Check(gt=0, le=10_000)] | None = None
    vram_gb: Annotated[float, Check(gt=0, le=10_000)] | None = None
    context: Annotated[int, Check(gt=0, le=MAX_CONTEXT_TOKENS)] | None = None
    non_expert_bytes_per_weight: Annotated[float, Check(gt=0, le=4)] | None = None
    """As `weights.non_expert_bytes_per_weight`, for this quant (gpt-oss's GGUF keeps MXFP4
    experts and Q8_0 elsewhere); None: one precision throughout."""


@dataclass(frozen=True, kw_only=True)
class ComfyFile:
    """One file a ComfyUI model needs, and the flat `models/<folder>/` name it is stored under.

    `repo`/`revision` are set when the file comes from another repository than the recipe's
    (e.g. a text encoder published on its own)."""

    path: str
    folder: Literal[
        "checkpoints", "diffusion_models", "text_encoders", "vae", "clip", "loras", "unet"
    ]
    rename: str | None = None
    repo: str | None = None
    revision: str | None = None

    @property
    def stored_name(self) -> str:
        return self.rename or self.path.rsplit("/", 1)[-1]


@dataclass(frozen=True, kw_only=True)
class ComfyRecipe:
    """Where ComfyUI's loadable files come from; `repo` is set when it is a repackaging."""

    repo: str | None = None
    revision: str | None = None
    gated: bool = False
    files: Annotated[tuple[ComfyFile, ...], Check(min_length=1)]
    min_comfyui: Annotated[str, Check(pattern=r"^\d+(\.\d+)*$")] | None = None
    """The first ComfyUI release with native nodes for this model."""
    note: str | None = None


@dataclass(frozen=True, kw_only=True)
class Source:
    """The pinned origin of a model's weights."""

    hf_repo: str | None = None
    revision: str | None = None
    gated: bool = False
    ollama_tag: str | None = None
    gguf: GgufSource | None = None
    comfyui: ComfyRecipe | None = None

    def __post_init__(self) -> None:
        self._comfyui_has_a_repo()

    def _comfyui_has_a_repo(self) -> None:
        if self.comfyui is not None and self.comfyui.repo is None and self.hf_repo is None:
            raise ValueError(
                "comfyui names no repo and the model has no hf_repo: its files come from nowhere"
            )


WeightFormat = Literal["fp8", "bf16", "fp16", "gguf", "mixed"]


@dataclass(frozen=True, kw_only=True)
class Weights:
    """Weights at the served precision: GB (10^9 bytes) on disk and resident in VRAM."""

    format: WeightFormat = "bf16"
    disk_gb: Annotated[float, Check(gt=0, le=10_000)] | None = None
    vram_gb: Annotated[float, Check(gt=0, le=10_000)] | None = None
    fp8_block_size: Annotated[int, Check(gt=0, le=4096)] | None = None
    """Block-wise FP8 scales (config.json quantization_config.weight_block_size): every
    tensor-parallel shard of a quantized matrix must hold whole blocks."""
    non_expert_bytes_per_weight: Annotated[float, Check(gt=0, le=4)] | None = None
    """Where a MoE checkpoint keeps its attention and shared weights at another precision than
    its experts (gpt-oss: BF16 attention, MXFP4 experts), the bytes of one such weight; the
    experts' bytes per weight then follow from the total. None: one precision throughout."""
    source: str | None = None


@dataclass(frozen=True, kw_only=True)
class Architecture:
    """What the KV-cache estimate needs, from the model's config.json."""

    attention: Literal["gqa", "mla", "hybrid"] = "gqa"
    layers: Annotated[int, Check(gt=0, le=1024)]
    attention_heads: Annotated[int, Check(gt=0, le=4096)]
    kv_heads: Annotated[int, Check(gt=0, le=4096)] | None = None
    head_dim: Annotated[int, Check(gt=0, le=4096)] | None = None
    kv_lora_rank: Annotated[int, Check(gt=0, le=65_536)] | None = None
    qk_rope_head_dim: Annotated[int, Check(gt=0, le=4096)] | None = None
    full_attention_layers: Annotated[int, Check(gt=0, le=1024)] | None = None
    state_bytes_per_sequence: Annotated[int, Check(ge=0, le=10**12)] | None = None
    moe: bool = False
    experts: Annotated[int, Check(gt=0)] | None = None
    """Routed experts per MoE layer (config.json num_experts / n_routed_experts)."""
    moe_intermediate_size: Annotated[int, Check(gt=0)] | None = None
    """Width of one expert's MLP: what tensor parallelism splits inside each expert."""
    intermediate_size: Annotated[int, Check(gt=0)] | None = None
    """Width of a dense MLP; only dense models are sharded by it."""
    hidden_size: Annotated[int, Check(gt=0, le=65_536)] | None = None
    """The residual width (config.json hidden_size): what each tensor-parallel all-reduce
    carries per token, and with `moe_intermediate_size` the size of one expert."""
    experts_per_token: Annotated[int, Check(gt=0, le=1024)] | None = None
    """Routed experts each token uses (config.json num_experts_per_tok)."""
    dense_layers: Annotated[int, Check(ge=0, le=1024)] = 0
    """Leading layers with a dense MLP instead of experts (config.json first_k_dense_replace)."""
    source: str

    def __post_init__(self) -> None:
        self._complete_for_kind()

    def _complete_for_kind(self) -> None:
        needed: dict[str, tuple[str, ...]] = {
            "gqa": ("kv_heads", "head_dim"),
            "mla": ("kv_lora_rank", "qk_rope_head_dim"),
            "hybrid": ("kv_heads", "head_dim", "full_attention_layers"),
        }
        missing = [name for name in needed[self.attention] if getattr(self, name) is None]
        if missing:
            raise ValueError(f"{self.attention} attention needs {', '.join(missing)}")
        if (self.full_attention_layers or 0) > self.layers:
            raise ValueError(
                f"full_attention_layers {self.full_attention_layers} is more than the model's"
                f" {self.layers} layers"
            )
        if self.dense_layers >= self.layers:
            raise ValueError(
                f"dense_layers {self.dense_layers} leaves none of the {self.layers} layers"
                " for experts"
            )
        if (self.experts_per_token or 0) > (self.experts or self.experts_per_token or 0):
            raise ValueError(
                f"experts_per_token {self.experts_per_token} is more than the {self.experts}"
                " experts"
            )

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers

    @property
    def weights_per_expert(self) -> int | None:
        """Weights of one routed expert in one layer: its gate, up and down projections."""
        if self.hidden_size is None or self.moe_intermediate_size is None:
            return None
        return 3 * self.hidden_size * self.moe_intermediate_size


@dataclass(frozen=True, kw_only=True)
class Speed:
    """How a model drafts tokens speculatively; the method is a fact about the model."""

    spec_decode: SpecDecode = SpecDecode.NONE
    K: Annotated[int, Check(ge=1, le=32)] = 7
    draft_model: str | None = None
    acceptance: Annotated[float, Check(gt=0, lt=1)] | None = None
    """Chance each drafted token is accepted, measured for this model's drafter; None: the
    method's assumption in registry/speed.yaml."""
    acceptance_source: str | None = None

    def __post_init__(self) -> None:
        self._acceptance_sourced()

    def _acceptance_sourced(self) -> None:
        if self.acceptance is not None and not self.acceptance_source:
            raise ValueError("speed.acceptance needs acceptance_source: where it was measured")


def _parser_per_engine(value: Any) -> Any:
    if isinstance(value, str):
        raise ValueError(
            f"say which engine takes '{value}': reasoning_parser: {{sglang: {value}}} (or"
            " vllm:), since SGLang and vLLM spell parser names differently; each name is"
            " checked against registry/engine_options/<engine>.json"
        )
    return value


@dataclass(frozen=True, kw_only=True)
class Model:
    """A catalog model and everything needed to serve it, or the reason it cannot be."""

    id: Annotated[str, Check(pattern=r"^[a-z0-9][a-z0-9.\-]*$")]
    name: str
    former_ids: tuple[str, ...] = ()
    """Ids this model was armed under before a rename; they keep working, with a warning."""
    capability: Literal["chat", "code", "vision", "image", "video", "audio", "music"]
    runtimes: tuple[Runtime, ...] = ()
    source: Source | None = None
    source_unavailable: str | None = None
    weights: Weights = Weights()
    context: Annotated[int, Check(gt=0, le=MAX_CONTEXT_TOKENS)] | None = None
    """The longest context the model is served with, in tokens; a stack may lower it, never
    raise it."""
    min_gpus: Annotated[int, Check(ge=1, le=8)] = 1
    reasoning_parser: Annotated[dict[Runtime, str], Check(before=_parser_per_engine)] = field(
        default_factory=dict
    )
    """The reasoning parser per engine: SGLang and vLLM spell parser names differently
    (SGLang `deepseek-v41`, vLLM `deepseek_v41`), so one value cannot serve both."""
    speed: Speed = Speed()
    architecture: Architecture | None = None
    parameters: Parameters | None = None
    engine_args: dict[Runtime, tuple[str, ...]] = field(default_factory=dict)
    """Extra flags a model needs on an engine (e.g. Mistral's own checkpoint format on vLLM)."""
    notes: str | None = None

    def __post_init__(self) -> None:
        self._parameters_agree()

    def _parameters_agree(self) -> None:
        params, arch = self.parameters, self.architecture
        if params is None or arch is None:
            return
        if not arch.moe:
            if params.active_billions not in (None, params.total_billions):
                raise ValueError(
                    f"parameters.active_billions {params.active_billions} differs from"
                    f" total_billions {params.total_billions} on a dense model"
                )
            return
        if params.active_billions is None:
            raise ValueError("a MoE model's parameters need active_billions")
        split = self.expert_split
        if split is None:
            return
        derived = split.shared + split.routed
        if split.shared <= 0 or abs(derived / params.total - 1) > PARAMETERS_TOLERANCE:
            raise ValueError(
                f"parameters ({params.total_billions}B total, {params.active_billions}B active)"
                f" disagree with the architecture: {arch.moe_layers} MoE layers x {arch.experts}"
                f" experts of 3 x {arch.hidden_size} x {arch.moe_intermediate_size} weights,"
                f" {arch.experts_per_token} per token, give {derived / 1e9:.0f}B total; check"
                " hidden_size, moe_intermediate_size, experts, experts_per_token and dense_layers"
            )

    @property
    def expert_split(self) -> ExpertSplit | None:
        """A MoE's weights every token reads (the active count less its routed experts) and
        its routed experts' weights; None unless the registry has the whole expert structure."""
        params, arch = self.parameters, self.architecture
        if params is None or arch is None or not arch.moe:
            return None
        per_expert, experts, used = arch.weights_per_expert, arch.experts, arch.experts_per_token
        if per_expert is None or experts is None or used is None:
            return None
        return ExpertSplit(
            shared=params.active - arch.moe_layers * used * per_expert,
            routed=float(arch.moe_layers * experts * per_expert),
            per_expert=float(per_expert),
        )


class ExpertSplit(NamedTuple):
    """A MoE's weight counts by how a decode step reads them."""

    shared: float
    routed: float
    per_expert: float
    """Weights of one routed expert in one layer."""


@dataclass(frozen=True, kw_only=True)
class PriceTier:
    """Storage up to `up_to_gb` (None: everything above the last tier) at this rate."""

    up_to_gb: Annotated[int, Check(gt=0, le=1_000_000)] | None = None
    usd_per_gb_month: Annotated[float, Check(gt=0, le=10)]


@dataclass(frozen=True, kw_only=True)
class NetworkVolumeFacts:
    """RunPod network volumes: the sizes the API accepts and what a GB-month costs."""

    min_gb: Annotated[int, Check(gt=0, le=1_000_000)]
    max_gb: Annotated[int, Check(gt=0, le=1_000_000)]
    price_tiers: Annotated[tuple[PriceTier, ...], Check(min_length=1)]
    """The STANDARD storage tier's prices."""
    high_performance_usd_per_gb_month: Annotated[float, Check(gt=0)]
    source: str

    def __post_init__(self) -> None:
        self._sizes_in_order()

    def _sizes_in_order(self) -> None:
        if self.max_gb < self.min_gb:
            raise ValueError(
                f"max_gb {self.max_gb} GB is below min_gb {self.min_gb} GB: no volume size is"
                " allowed"
            )
        tops = [t.up_to_gb for t in self.price_tiers]
        bounded = [t for t in tops if t is not None]
        if None in tops[:-1] or any(a >= b for a, b in pairwise(bounded)):
            raise ValueError("price_tiers must rise by up_to_gb; only the last may have none")

    def usd_per_month(self, size_gb: float, storage: str = "STANDARD") -> float:
        """Graduated: each tier's rate applies to the GB inside it, so price never drops
        as a volume grows. HIGH_PERFORMANCE storage has one flat rate."""
        if storage == "HIGH_PERFORMANCE":
            return round(size_gb * self.high_performance_usd_per_gb_month, 2)
        total, floor = 0.0, 0
        for tier in self.price_tiers:
            top = size_gb if tier.up_to_gb is None else min(size_gb, tier.up_to_gb)
            if top > floor:
                total += (top - floor) * tier.usd_per_gb_month
            if tier.up_to_gb is None or size_gb <= tier.up_to_gb:
                break
            floor = tier.up_to_gb
        return round(total, 2)


@dataclass(frozen=True, kw_only=True)
class DataCenter:
    """A RunPod data centre a stack may place its volume and pods in."""

    id: str
    name: str


@dataclass(frozen=True, kw_only=True)
class CpuFlavor:
    """A RunPod CPU pod flavor (`GET /v2/catalog/cpus`): priced and sized per vCPU.

    CPU pods run on Secure cloud only (the catalog prices them `securePerVcpu` and
    `serverlessPerVcpu`, nothing for Community) and mount network volumes; memory follows
    the flavor, `ram_gb_per_vcpu` x the vCPU count.
    """

    id: Annotated[str, Check(pattern=r"^[a-z0-9][a-z0-9-]*$")]
    """cpu.id of POST /v2/pods."""
    name: str
    vcpu_min: Annotated[int, Check(ge=2, le=512)]
    vcpu_max: Annotated[int, Check(ge=2, le=512)]
    ram_gb_per_vcpu: Annotated[float, Check(gt=0, le=64)]
    disk_gb_per_vcpu: Annotated[float, Check(gt=0, le=1000)] | None = None
    """The container disk a pod of this flavor may have, per vCPU."""
    usd_per_vcpu_hour: Annotated[float, Check(gt=0, le=10)]
    """On-demand Secure price of one vCPU for an hour."""
    data_centers: tuple[str, ...] | None = None
    """Where RunPod offers the flavor; None: not recorded (the live catalog decides)."""
    source: str

    def __post_init__(self) -> None:
        self._counts_are_powers_of_two()

    def _counts_are_powers_of_two(self) -> None:
        # POST /v2/pods: vcpuCount "must be a power of two" and within the flavor's range.
        bad = [n for n in (self.vcpu_min, self.vcpu_max) if n & (n - 1)]
        if bad or self.vcpu_max < self.vcpu_min:
            raise ValueError(
                f"vcpu_min {self.vcpu_min} and vcpu_max {self.vcpu_max} must be powers of two,"
                " the minimum first"
            )

    def usd_per_hour(self, vcpus: int) -> float:
        return round(self.usd_per_vcpu_hour * vcpus, 4)


@dataclass(frozen=True, kw_only=True)
class ToolImage:
    """An image we run that serves no model (the seeder on a CPU pod): no CUDA, no GPU."""

    repository: str
    tag: Annotated[str, Check(min_length=1)]
    entrypoint: Literal["none", "fixed-binary"]
    entrypoint_detail: str
    port: Annotated[int, Check(gt=0, lt=65536)]
    source: str

    @property
    def reference(self) -> str:
        return f"{self.repository}:{self.tag}"


@dataclass(frozen=True, kw_only=True)
class GatewayRelease:
    """The gateway every GPU pod runs in front of its engine: a published static binary,
    pinned by version and the checksum its publisher gives, fetched before any GPU bills."""

    name: str
    version: Annotated[str, Check(pattern=r"^v\d+\.\d+\.\d+$")]
    url: Annotated[str, Check(pattern=r"^https://")]
    """The release archive (a .tar.gz holding `member`)."""
    sha512: Annotated[str, Check(pattern=r"^[0-9a-f]{128}$")]
    """SHA-512 of the archive, as its publisher lists it."""
    member: Annotated[str, Check(pattern=r"^[A-Za-z0-9._-]+$")]
    """The program's file name inside the archive."""
    source: str
    archive_mb: Annotated[float, Check(gt=0)]
    """About how large the archive is, MB: what its seeding adds to a seed's download."""
    archive_mb_source: str


@dataclass(frozen=True, kw_only=True)
class GlobalNetworkFacts:
    """Where RunPod offers global networking (`globalNetworking: true` in a pod create: a
    private address `<podId>.runpod.internal`, reachable only from the account's own pods),
    and on which pods: NVIDIA GPU pods only, never CPU pods."""

    data_centers: tuple[str, ...]
    """The data centres whose catalog entry (`GET /v2/catalog/datacenters`) says
    `globalNetwork: true`."""
    source: str


def _unique_ids(items: tuple[Model | Gpu | DataCenter | CpuFlavor, ...], _: object) -> Any:
    dupes = sorted(i for i, n in Counter(item.id for item in items).items() if n > 1)
    if dupes:
        raise ValueError(f"duplicate id(s): {', '.join(dupes)}")
    return items


def _known_flavors(
    flavors: tuple[CpuFlavor, ...], earlier: Mapping[str, Any]
) -> tuple[CpuFlavor, ...]:
    """Unique ids, offered only in data centres datacenters.yaml knows."""
    _unique_ids(flavors, earlier)
    known = {d.id for d in earlier.get("data_centers", ())}
    unknown = sorted({dc for f in flavors for dc in f.data_centers or () if dc not in known})
    if unknown:
        raise ValueError(f"data centre(s) not in datacenters.yaml: {', '.join(unknown)}")
    return flavors


def _known_networked(
    facts: GlobalNetworkFacts | None, earlier: Mapping[str, Any]
) -> GlobalNetworkFacts | None:
    """Global networking is offered only in data centres datacenters.yaml knows."""
    if facts is None:
        return None
    known = {d.id for d in earlier.get("data_centers", ())}
    unknown = sorted(dc for dc in facts.data_centers if dc not in known)
    if unknown:
        raise ValueError(f"data centre(s) not in datacenters.yaml: {', '.join(unknown)}")
    return facts


@dataclass(frozen=True, kw_only=True)
class Registry:
    """The whole catalog, indexed by id."""

    models: Annotated[tuple[Model, ...], Check(after=_unique_ids)]
    gpus: Annotated[tuple[Gpu, ...], Check(after=_unique_ids)]
    images: dict[Runtime, Image]
    data_centers: Annotated[tuple[DataCenter, ...], Check(after=_unique_ids)]
    network_volume: NetworkVolumeFacts
    global_network: Annotated[GlobalNetworkFacts | None, Check(after=_known_networked)] = None
    """datacenters.yaml `global_network`; None where a registry predates it (then no data
    centre is known to offer it)."""
    max_gpus_per_pod: Annotated[int, Check(ge=1, le=8)]
    speed: SpeedFacts | None = None
    """registry/speed.yaml; None where a registry predates it (a git ref's), and then no
    placement gets a speed estimate."""
    cpu_flavors: Annotated[tuple[CpuFlavor, ...], Check(after=_known_flavors)] = ()
    seeder_image: ToolImage | None = None
    gateway: GatewayRelease | None = None
    """registry/images.yaml `gateway`; None where a registry predates it."""
    engine_options: dict[Runtime, EngineOptions] = field(default_factory=dict)
    """Per engine, what its pinned image accepts; empty where a registry predates the facts."""
    engine_routes: dict[Runtime, EngineRoutes] = field(default_factory=dict)
    """Per engine, its routes, its own key and which routes clients use (registry/routes.yaml);
    empty where a registry predates the facts."""

    def __post_init__(self) -> None:
        self._former_ids_free()
        self._parsers_known()

    def _former_ids_free(self) -> None:
        ids = {m.id for m in self.models}
        former = Counter(old for m in self.models for old in m.former_ids)
        clash = sorted(old for old, n in former.items() if n > 1 or old in ids)
        if clash:
            raise ValueError(f"former id(s) also in use elsewhere: {', '.join(clash)}")

    def _parsers_known(self) -> None:
        # A parser name is checked against what the engine's pinned image accepts, so a
        # name spelt for the other engine fails here rather than in a crash-looping pod.
        for model in self.models:
            for engine, parser in model.reasoning_parser.items():
                facts = self.engine_options.get(engine)
                if facts is None:
                    continue
                flag = facts.flag_index.get("--reasoning-parser")
                if flag is None:
                    raise ValueError(
                        f"model '{model.id}': reasoning_parser.{engine} is set, but {engine}"
                        f" ({facts.image}) has no --reasoning-parser flag; remove the key"
                    )
                if flag.choices is not None and parser not in flag.choices:
                    raise ValueError(
                        f"model '{model.id}': reasoning_parser.{engine} '{parser}' is not a"
                        f" parser {facts.image} knows ({', '.join(flag.choices)}; read from"
                        f" {flag.choices_from}); use its spelling of the name"
                    )

    @cached_property
    def models_by_id(self) -> Mapping[str, Model]:
        return {m.id: m for m in self.models}

    @cached_property
    def renamed(self) -> Mapping[str, str]:
        """Former id -> current id."""
        return {old: m.id for m in self.models for old in m.former_ids}

    def model(self, model_id: str) -> Model | None:
        """The model under `model_id`, or under the id a former one was renamed to."""
        found = self.models_by_id.get(model_id)
        if found is None and model_id in self.renamed:
            found = self.models_by_id.get(self.renamed[model_id])
        return found

    def gpu(self, gpu_id: str) -> Gpu | None:
        return next((g for g in self.gpus if g.id == gpu_id or g.name == gpu_id), None)

    def data_center(self, dc_id: str) -> DataCenter | None:
        return next((d for d in self.data_centers if d.id == dc_id), None)

    @property
    def networked_data_centers(self) -> tuple[str, ...]:
        """The data centres that offer global networking, as datacenters.yaml records them."""
        return self.global_network.data_centers if self.global_network else ()
