"""The registry's schema: every model, GPU, image and data-centre fact, as validated records."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from enum import StrEnum
from functools import cached_property
from itertools import pairwise
from typing import Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from frutebox_infra.engine_options import EngineOptions

MAX_CONTEXT_TOKENS = 10_485_760
"""The longest context any model claims (10M tokens)."""


class Frozen(BaseModel):
    """Registry records are facts: immutable, and unknown keys are typos."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        # pydantic would read `vram_gb: true` as 1 and `fp8: 0` as false: booleans and
        # numbers never stand in for each other.
        if info.field_name is None:
            return value
        annotation = cls.model_fields[info.field_name].annotation
        boolean = annotation is bool or bool in get_args(annotation)
        if isinstance(value, bool) and not boolean:
            raise ValueError("true/false is not a value of this field")
        if boolean and value is not None and not isinstance(value, bool):
            raise ValueError("must be true or false")
        return value


class Runtime(StrEnum):
    """Serving engines a model may declare; whether we can serve one is the recipes' call."""

    SGLANG = "sglang"
    VLLM = "vllm"
    LLAMACPP = "llamacpp"
    OLLAMA = "ollama"
    COMFYUI = "comfyui"
    TGI = "tgi"
    DIFFUSERS = "diffusers"


class Cloud(StrEnum):
    """RunPod's two clouds; a GPU's price is recorded per cloud."""

    SECURE = "SECURE"
    COMMUNITY = "COMMUNITY"


class Price(Frozen):
    """On-demand price of one GPU, USD per hour, per RunPod cloud; None where never observed."""

    secure: float | None = Field(default=None, gt=0, le=100)
    community: float | None = Field(default=None, gt=0, le=100)
    source: str


class Gpu(Frozen):
    """One RunPod GPU type. `vram_gb` is the marketed size; `memory_mib` what the driver reports."""

    id: str = Field(min_length=1, description="RunPod GPU type id, e.g. 'NVIDIA H100 80GB HBM3'")
    name: str
    vram_gb: int = Field(gt=0, le=1024)
    memory_mib: int = Field(gt=0, le=1024 * 1024)
    fp8: bool
    max_count: int = Field(ge=1, le=8)
    price_usd_per_hour: Price
    architecture: str | None = Field(default=None, pattern=r"^sm_\d+$")
    """CUDA compute capability (sm_86, sm_90, ...): which image kernels can run on it."""

    @model_validator(mode="after")
    def _units_agree(self) -> Gpu:
        # Marketed GB are within a few percent of the driver's GiB; anything else is a
        # figure in the wrong unit (16376 is the A4000's MiB, not its GB).
        gib = self.memory_mib / 1024
        if not 0.85 <= gib / self.vram_gb <= 1.15:
            raise ValueError(
                f"vram_gb {self.vram_gb} GB and memory_mib {self.memory_mib} MiB"
                f" ({gib:.1f} GiB) disagree: vram_gb is the marketed size in GB (16 for a 16 GB"
                " card), memory_mib what nvidia-smi reports in MiB"
            )
        return self


class Image(Frozen):
    """A serving engine's container image and how RunPod's `args` reaches its process."""

    repository: str
    tag: str | None = None
    port: int = Field(gt=0, lt=65536)
    health_path: str = Field(pattern=r"^/")
    entrypoint: Literal["none", "fixed-binary"] = Field(
        description="none: args is the whole command; fixed-binary: args are flags or"
        " sub-commands of a fixed program"
    )
    entrypoint_detail: str
    cache_env: dict[str, str] = Field(default_factory=dict)
    engine_version: str | None = Field(default=None, pattern=r"^\d+(\.\d+)*$")
    """The engine release the tag ships, where a model needs a minimum one."""
    min_cuda_version: str = Field(pattern=r"^\d+\.\d+$")
    """The host CUDA version (driver) the image's CUDA runtime needs, `major.minor`: sent as
    `gpu.minCudaVersion` on every create, so an older host is a capacity answer."""
    gpu_architectures: tuple[str, ...] = ()
    """Compute capabilities the image's kernels run on (binary-compatible ones included);
    empty means not recorded, and then no GPU is refused for it."""
    gpu_architectures_source: str | None = None
    volume_install_gb: float = Field(default=0.0, ge=0.0, le=1000.0)
    """Disk (GB) the engine itself installs onto the weights volume, once per stack (e.g. a
    ComfyUI release and its venv): the volume is sized for it like for the weights."""

    @field_validator("gpu_architectures")
    @classmethod
    def _sm_names(cls, archs: tuple[str, ...]) -> tuple[str, ...]:
        bad = [a for a in archs if not re.fullmatch(r"sm_\d+", a)]
        if bad:
            raise ValueError(f"not a compute capability like sm_90: {', '.join(bad)}")
        return archs

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


class GgufSource(Frozen):
    """A GGUF quant served by llama.cpp's `-hf REPO:QUANT` (which takes no revision)."""

    repo: str
    quant: str
    revision: str | None = None
    disk_gb: float | None = Field(default=None, gt=0, le=10_000)
    vram_gb: float | None = Field(default=None, gt=0, le=10_000)
    context: int | None = Field(default=None, gt=0, le=MAX_CONTEXT_TOKENS)


class ComfyFile(Frozen):
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


class ComfyRecipe(Frozen):
    """Where ComfyUI's loadable files come from; `repo` is set when it is a repackaging."""

    repo: str | None = None
    revision: str | None = None
    gated: bool = False
    files: tuple[ComfyFile, ...] = Field(min_length=1)
    min_comfyui: str | None = Field(default=None, pattern=r"^\d+(\.\d+)*$")
    """The first ComfyUI release with native nodes for this model."""
    note: str | None = None


class Source(Frozen):
    """The pinned origin of a model's weights."""

    hf_repo: str | None = None
    revision: str | None = None
    gated: bool = False
    ollama_tag: str | None = None
    gguf: GgufSource | None = None
    comfyui: ComfyRecipe | None = None


class Weights(Frozen):
    """Weights at the served precision: GB (10^9 bytes) on disk and resident in VRAM."""

    format: Literal["fp8", "bf16", "fp16", "gguf", "mixed"] = "bf16"
    disk_gb: float | None = Field(default=None, gt=0, le=10_000)
    vram_gb: float | None = Field(default=None, gt=0, le=10_000)
    fp8_block_size: int | None = Field(default=None, gt=0, le=4096)
    """Block-wise FP8 scales (config.json quantization_config.weight_block_size): every
    tensor-parallel shard of a quantized matrix must hold whole blocks."""
    source: str | None = None


class Architecture(Frozen):
    """What the KV-cache estimate needs, from the model's config.json."""

    attention: Literal["gqa", "mla", "hybrid"] = "gqa"
    layers: int = Field(gt=0, le=1024)
    attention_heads: int = Field(gt=0, le=4096)
    kv_heads: int | None = Field(default=None, gt=0, le=4096)
    head_dim: int | None = Field(default=None, gt=0, le=4096)
    kv_lora_rank: int | None = Field(default=None, gt=0, le=65_536)
    qk_rope_head_dim: int | None = Field(default=None, gt=0, le=4096)
    full_attention_layers: int | None = Field(default=None, gt=0, le=1024)
    state_bytes_per_sequence: int | None = Field(default=None, ge=0, le=10**12)
    moe: bool = False
    experts: int | None = Field(default=None, gt=0)
    """Routed experts per MoE layer (config.json num_experts / n_routed_experts)."""
    moe_intermediate_size: int | None = Field(default=None, gt=0)
    """Width of one expert's MLP: what tensor parallelism splits inside each expert."""
    intermediate_size: int | None = Field(default=None, gt=0)
    """Width of a dense MLP; only dense models are sharded by it."""
    source: str

    @model_validator(mode="after")
    def _complete_for_kind(self) -> Architecture:
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
        return self


class SpecDecode(StrEnum):
    NONE = "none"
    MTP = "mtp"
    DRAFT = "draft"
    EAGLE3 = "eagle3"
    P_EAGLE = "p-eagle"


class Speed(Frozen):
    """How a model drafts tokens speculatively; the method is a fact about the model."""

    spec_decode: SpecDecode = SpecDecode.NONE
    K: int = Field(default=7, ge=1, le=32)
    draft_model: str | None = None


class Model(Frozen):
    """A catalog model and everything needed to serve it, or the reason it cannot be."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    name: str
    former_ids: tuple[str, ...] = ()
    """Ids this model was armed under before a rename; they keep working, with a warning."""
    capability: Literal["chat", "code", "vision", "image", "video", "audio", "music"]
    runtimes: tuple[Runtime, ...] = ()
    source: Source | None = None
    source_unavailable: str | None = None
    weights: Weights = Weights()
    context: int | None = Field(default=None, gt=0, le=MAX_CONTEXT_TOKENS)
    """The longest context the model is served with, in tokens; a stack may lower it, never
    raise it."""
    min_gpus: int = Field(default=1, ge=1, le=8)
    reasoning_parser: dict[Runtime, str] = Field(default_factory=dict)
    """The reasoning parser per engine: SGLang and vLLM spell parser names differently
    (SGLang `deepseek-v41`, vLLM `deepseek_v41`), so one value cannot serve both."""
    speed: Speed = Speed()
    architecture: Architecture | None = None
    engine_args: dict[Runtime, tuple[str, ...]] = Field(default_factory=dict)
    """Extra flags a model needs on an engine (e.g. Mistral's own checkpoint format on vLLM)."""
    notes: str | None = None

    @field_validator("reasoning_parser", mode="before")
    @classmethod
    def _parser_per_engine(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError(
                f"say which engine takes '{value}': reasoning_parser: {{sglang: {value}}} (or"
                " vllm:), since SGLang and vLLM spell parser names differently; each name is"
                " checked against registry/engine_options/<engine>.json"
            )
        return value


class PriceTier(Frozen):
    """Storage up to `up_to_gb` (None: everything above the last tier) at this rate."""

    up_to_gb: int | None = Field(default=None, gt=0, le=1_000_000)
    usd_per_gb_month: float = Field(gt=0, le=10)


class NetworkVolumeFacts(Frozen):
    """RunPod network volumes: the sizes the API accepts and what a GB-month costs."""

    min_gb: int = Field(gt=0, le=1_000_000)
    max_gb: int = Field(gt=0, le=1_000_000)
    price_tiers: tuple[PriceTier, ...] = Field(min_length=1)
    """The STANDARD storage tier's prices."""
    high_performance_usd_per_gb_month: float = Field(gt=0)
    source: str

    @model_validator(mode="after")
    def _sizes_in_order(self) -> NetworkVolumeFacts:
        if self.max_gb < self.min_gb:
            raise ValueError(
                f"max_gb {self.max_gb} GB is below min_gb {self.min_gb} GB: no volume size is"
                " allowed"
            )
        tops = [t.up_to_gb for t in self.price_tiers]
        bounded = [t for t in tops if t is not None]
        if None in tops[:-1] or any(a >= b for a, b in pairwise(bounded)):
            raise ValueError("price_tiers must rise by up_to_gb; only the last may have none")
        return self

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


class DataCenter(Frozen):
    id: str
    name: str


class Registry(Frozen):
    """The whole catalog, indexed by id."""

    models: tuple[Model, ...]
    gpus: tuple[Gpu, ...]
    images: dict[Runtime, Image]
    data_centers: tuple[DataCenter, ...]
    network_volume: NetworkVolumeFacts
    max_gpus_per_pod: int = Field(ge=1, le=8)
    engine_options: dict[Runtime, EngineOptions] = Field(default_factory=dict)
    """Per engine, what its pinned image accepts; empty where a registry predates the facts."""

    @field_validator("models", "gpus", "data_centers")
    @classmethod
    def _unique_ids(cls, items: tuple[Model | Gpu | DataCenter, ...]) -> Any:
        dupes = sorted(i for i, n in Counter(item.id for item in items).items() if n > 1)
        if dupes:
            raise ValueError(f"duplicate id(s): {', '.join(dupes)}")
        return items

    @model_validator(mode="after")
    def _former_ids_free(self) -> Registry:
        ids = {m.id for m in self.models}
        former = Counter(old for m in self.models for old in m.former_ids)
        clash = sorted(old for old, n in former.items() if n > 1 or old in ids)
        if clash:
            raise ValueError(f"former id(s) also in use elsewhere: {', '.join(clash)}")
        return self

    @model_validator(mode="after")
    def _parsers_known(self) -> Registry:
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
        return self

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
