"""Stack settings: every `frutebox-infra:*` key, its Pulumi type, default, bounds and help.

The one home of the stack keys. `Pulumi.yaml`'s typed `config:` schema is this model written
out (tests/test_settings.py checks that they say the same), and every error's fix is built
from the same bounds and units.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic.fields import FieldInfo

from frutebox_infra.registry import MAX_CONTEXT_TOKENS, Cloud, Runtime
from frutebox_infra.seeding.bringup import DOWNLOAD_MB_PER_S

PROJECT = "frutebox-infra"
SECRET_KEYS = ("runpodApiKey", "hfToken")
"""Secret config: never parsed here, only noticed as present so the plan knows a token exists.
Not declared in Pulumi.yaml: Pulumi makes a declared secret key required."""

PulumiType = Literal["string", "integer", "boolean", "array", "object"]


def _key(
    alias: str,
    description: str,
    *,
    pulumi: PulumiType,
    unit: str = "",
    example: str,
    fix: str = "",
    pulumi_default: Any = None,
    **bounds: Any,
) -> Any:
    """A stack key: its camelCase name, help, Pulumi type, unit and bounds, in one place."""
    extra: dict[str, Any] = {
        "pulumi": pulumi,
        "unit": unit,
        "example": example,
        "fix": fix,
        "pulumi_default": pulumi_default,
    }
    return Field(alias=alias, description=description, json_schema_extra=cast(Any, extra), **bounds)


VolumeTier = Literal["STANDARD", "HIGH_PERFORMANCE"]
RankBy = Literal["usdPerHour", "usdPerMillionTokens"]
MAX_DECODE_FLOOR = 1000
"""tok/s per stream: no GPU decodes a stream much faster, so a larger floor is a typo."""
ENGINE_NAMES = tuple(str(r) for r in Runtime)


class ModelOverride(BaseModel):
    """Per-model serving targets that win over the registry's defaults."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", populate_by_name=True, allow_inf_nan=False, strict=True
    )

    context: int | None = Field(default=None, ge=1, le=MAX_CONTEXT_TOKENS)
    concurrency: int | None = Field(default=None, ge=1, le=1024)
    gpu: str | None = Field(default=None, min_length=1, description="pin one RunPod GPU type id")
    min_concurrent_sequences: int | None = Field(
        default=None, alias="minConcurrentSequences", ge=1, le=1024
    )
    own_pod: bool = Field(
        default=False, alias="ownPod", description="never share a pod (with colocate on)"
    )
    gpu_count: int | None = Field(
        default=None, alias="gpuCount", ge=1, le=8, description="pin the GPUs per pod"
    )
    engine: str | None = Field(
        default=None, description="pin one of the model's runtimes (registry/models.yaml)"
    )
    min_decode_tok_s: float | None = Field(
        default=None, alias="minDecodeTokensPerSecond", ge=0, le=MAX_DECODE_FLOOR
    )

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, value: str | None) -> str | None:
        if value is not None and value not in ENGINE_NAMES:
            raise ValueError(f"is not an engine; the engines are {', '.join(ENGINE_NAMES)}")
        return value


OVERRIDE_UNITS = {
    "context": "tokens",
    "concurrency": "sequences",
    "minConcurrentSequences": "sequences",
    "gpuCount": "GPUs",
    "minDecodeTokensPerSecond": "tok/s per stream",
}
"""The unit of each override key, for messages."""
OVERRIDE_FIXES = {
    "context": "a whole number of tokens, unquoted, from 1 up to the model's own context in"
    " registry/models.yaml, e.g. 16384",
    "concurrency": "a whole number of sequences from 1 to 1024, unquoted, e.g. 8",
    "gpu": "a GPU type id or name from registry/gpus.yaml, e.g. NVIDIA H100 80GB HBM3",
    "minConcurrentSequences": "a whole number of sequences from 1 to 1024, unquoted, e.g. 2",
    "ownPod": "true or false, unquoted: true keeps the model on a pod of its own",
    "gpuCount": "a whole number of GPUs per pod from 1 to 8, unquoted, e.g. 2",
    "engine": f"one of the model's runtimes in registry/models.yaml ({', '.join(ENGINE_NAMES)}),"
    " e.g. sglang",
    "minDecodeTokensPerSecond": f"tok/s per stream from 0 (no floor) to {MAX_DECODE_FLOOR},"
    " unquoted, e.g. 20",
}
"""Every override key and what it takes; engines that cannot honour one refuse it."""


class StackSettings(BaseModel):
    """One stack's config, camelCase as written in `stacks/Pulumi.<stack>.yaml`.

    Values arrive already typed the way Pulumi's config allows (stack_file.py); overrides,
    which Pulumi does not type, are strict: `context: true` is not a number.
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", populate_by_name=True, allow_inf_nan=False
    )

    models: tuple[str, ...] = _key(
        "models",
        "Armed model ids (see `frutebox models`); one GPU pod each unless colocate shares one.",
        pulumi="array",
        example="[qwen3-8b, sdxl-1.0]",
        fix="a YAML list of ids from `frutebox models`, e.g. [qwen3-8b, sdxl-1.0]",
        default=(),
    )
    data_center: str = _key(
        "dataCenter",
        "RunPod data centre for the weights volume and every pod (e.g. EU-RO-1).",
        pulumi="string",
        example="EU-RO-1",
        fix="a RunPod data centre id from registry/datacenters.yaml, e.g. EU-RO-1",
        min_length=1,
        max_length=64,
    )
    budget_usd_per_hour: float = _key(
        "budgetUsdPerHour",
        "Most the stack's pods may cost per hour, worst allowed placement (USD).",
        pulumi="string",
        unit="USD per hour",
        example='"40"',
        gt=0,
        le=10_000,
    )
    max_fallback_premium: float = _key(
        "maxFallbackPremium",
        "Most a fallback placement may cost, as a multiple of the cheapest (>= 1).",
        pulumi="string",
        unit="x the cheapest",
        example='"1.5"',
        default=1.5,
        ge=1.0,
        le=10.0,
    )
    cloud: Cloud = _key(
        "cloud",
        "RunPod cloud; network volumes mount only on SECURE.",
        pulumi="string",
        example="SECURE",
        fix="SECURE (network volumes mount only there) or COMMUNITY",
        default=Cloud.SECURE,
    )
    container_disk_gb: int = _key(
        "containerDiskGb",
        "Container disk per pod, GB (ephemeral; weights live on the volume).",
        pulumi="integer",
        unit="GB",
        example="50",
        default=50,
        ge=1,
        le=2048,
    )
    volume_headroom: float = _key(
        "volumeHeadroom",
        "Free space kept on the weights volume, as a fraction of the armed weights.",
        pulumi="string",
        unit="x the armed weights",
        example='"0.2" for 20%',
        default=0.2,
        ge=0.0,
        le=10.0,
    )
    min_volume_gb: int = _key(
        "minVolumeGb",
        "Smallest volume size, GB; raise it to pre-size for models you will arm.",
        pulumi="integer",
        unit="GB",
        example="10",
        default=10,
        ge=10,
        le=4096,
    )
    min_concurrent_sequences: int = _key(
        "minConcurrentSequences",
        "Full-context sequences a placement must hold to count as fitting.",
        pulumi="integer",
        unit="sequences",
        example="1",
        default=1,
        ge=1,
        le=1024,
    )
    spec_decode: bool = _key(
        "specDecode",
        "Speculative decoding where the model and engine support it.",
        pulumi="boolean",
        example="true",
        fix="true or false, unquoted (YAML's yes/no/on/off are text to Pulumi)",
        default=True,
    )
    # Off by default: a shared pod is one failure domain, and turning it on moves models
    # that already run onto other pods.
    colocate: bool = _key(
        "colocate",
        "Small models of one engine (Ollama, ComfyUI) share a pod when that is cheaper.",
        pulumi="boolean",
        example="false",
        fix="true or false, unquoted (YAML's yes/no/on/off are text to Pulumi)",
        default=False,
    )
    health_timeout_seconds: int | None = _key(
        "healthTimeoutSeconds",
        "How long a new pod may take to answer its health check before it is terminated; 0"
        " scales it with the weights to read off the volume (and to download at downloadMBps"
        " unless seeded).",
        pulumi="integer",
        unit="seconds",
        example="1800",
        fix="0 (scale it with the weights), or a whole number of seconds from 30 to 86400,"
        " e.g. 1800",
        default=None,
        pulumi_default=0,
        ge=0,
        le=86_400,
    )
    download_mb_per_s: int = _key(
        "downloadMBps",
        "Download speed (MB/s) assumed for seed times, bring-up costs and deadlines scaled to"
        " the weights.",
        pulumi="integer",
        unit="MB/s",
        example="100",
        default=DOWNLOAD_MB_PER_S,
        ge=1,
        le=100_000,
    )
    # On by default: a CPU pod at ~$0.06/h downloads instead of GPUs at $0.17-$9.52/h, and a
    # wrong repo, quant or a missing token fails before any GPU pod exists.
    seeding: bool = _key(
        "seeding",
        "Seed each model's weights onto the volume from a CPU pod before its GPU pod starts"
        " (false: GPU pods download their own).",
        pulumi="boolean",
        example="true",
        fix="true or false, unquoted (YAML's yes/no/on/off are text to Pulumi)",
        default=True,
    )
    seed_cpu_flavor: str = _key(
        "seedCpuFlavor",
        "CPU flavor of the seeding pod (registry/gpus.yaml cpu_flavors); empty: the cheapest"
        " offered in the data centre.",
        pulumi="string",
        example="cpu3c",
        fix="a flavor id from registry/gpus.yaml cpu_flavors, e.g. cpu3c, or leave it unset",
        default="",
        max_length=64,
        pattern=r"^([a-z0-9][a-z0-9-]*)?$",
    )
    seed_vcpus: int = _key(
        "seedVcpus",
        "vCPUs of the seeding pod (a power of two); downloads are bound by the network, not"
        " the CPU.",
        pulumi="integer",
        unit="vCPUs",
        example="2",
        fix="a power of two from 2 to 32 vCPUs, unquoted, e.g. 2",
        default=2,
        ge=2,
        le=32,
    )
    seed_timeout_seconds: int | None = _key(
        "seedTimeoutSeconds",
        "How long seeding may take before it fails; 0 scales it with the weights to download"
        " at downloadMBps.",
        pulumi="integer",
        unit="seconds",
        example="7200",
        fix="0 (scale it with the weights), or a whole number of seconds from 300 to 172800,"
        " e.g. 7200",
        default=None,
        pulumi_default=0,
        ge=0,
        le=172_800,
    )
    volume_type: VolumeTier = _key(
        "volumeType",
        "Storage tier of the weights volume, STANDARD or HIGH_PERFORMANCE (priced in preview;"
        " fixed at creation).",
        pulumi="string",
        example="STANDARD",
        fix="STANDARD or HIGH_PERFORMANCE",
        default="STANDARD",
    )
    runpod_api_url: str = _key(
        "runpodApiUrl",
        "RunPod API base URL (default the public API; point at `frutebox emulator` to rehearse).",
        pulumi="string",
        example="http://127.0.0.1:8765/v2",
        fix="an http(s) URL of the RunPod API, or leave it unset",
        default="",
        max_length=2048,
        pattern=r"^(https?://\S+)?$",
    )
    # 20, the owner's floor for tier S, the frontier models a RunPod fleet serves (its 30 is
    # for the local node, which no stack plans). A floor is a promise to every stream, so a
    # placement below it is refused even where it is cheaper per hour.
    min_decode_tok_s: float = _key(
        "minDecodeTokensPerSecond",
        "Least decode speed per stream (tok/s at the configured concurrency) a placement must"
        " reach by the speed model's estimate; 0 turns the floor off.",
        pulumi="string",
        unit="tok/s per stream",
        example='"20"',
        default=20.0,
        ge=0.0,
        le=MAX_DECODE_FLOOR,
    )
    rank_by: RankBy = _key(
        "rankBy",
        "How placements that meet the floor are ranked, and fallbacks bounded:"
        " usdPerHour (the pod's price) or usdPerMillionTokens (output tokens at full load).",
        pulumi="string",
        example="usdPerHour",
        fix="usdPerHour or usdPerMillionTokens",
        default="usdPerHour",
    )
    prompt_tokens: int | None = _key(
        "promptTokens",
        "Prompt length each request brings, for the speed estimate (with outputTokens); 0:"
        " every stream holds the full context and prefill is not counted.",
        pulumi="integer",
        unit="tokens",
        example="1024",
        fix=f"0 (not stated) or a whole number of tokens from 1 to {MAX_CONTEXT_TOKENS},"
        " unquoted, e.g. 1024, together with outputTokens",
        default=None,
        pulumi_default=0,
        ge=0,
        le=MAX_CONTEXT_TOKENS,
    )
    output_tokens: int | None = _key(
        "outputTokens",
        "Output length of each request, for the speed estimate (with promptTokens); 0: not"
        " stated.",
        pulumi="integer",
        unit="tokens",
        example="1024",
        fix=f"0 (not stated) or a whole number of tokens from 1 to {MAX_CONTEXT_TOKENS},"
        " unquoted, e.g. 1024, together with promptTokens",
        default=None,
        pulumi_default=0,
        ge=0,
        le=MAX_CONTEXT_TOKENS,
        validate_default=True,  # a promptTokens alone is refused here
    )
    overrides: dict[str, ModelOverride] = _key(
        "overrides",
        f"Per-model overrides, model id -> {{{', '.join(OVERRIDE_FIXES)}}}.",
        pulumi="object",
        example="{qwen3-8b: {context: 16384}}",
        fix=f"a map of model id -> {{{', '.join(OVERRIDE_FIXES)}}}",
        default_factory=dict,
    )
    hf_token_configured: bool = Field(default=False, alias="hfTokenConfigured")
    """Derived from the secret's presence, never read from the stack file."""

    @field_validator("health_timeout_seconds")
    @classmethod
    def _zero_scales(cls, value: int | None) -> int | None:
        if value is not None and 0 < value < 30:
            raise ValueError("must be 0 (scale with the weights) or at least 30 seconds")
        return value or None

    @field_validator("seed_vcpus")
    @classmethod
    def _power_of_two(cls, value: int) -> int:
        # POST /v2/pods: cpu.vcpuCount "must be a power of two".
        if value & (value - 1):
            raise ValueError("must be a power of two (2, 4, 8, 16 or 32)")
        return value

    @field_validator("seed_timeout_seconds")
    @classmethod
    def _zero_scales_seeding(cls, value: int | None) -> int | None:
        if value is not None and 0 < value < 300:
            raise ValueError("must be 0 (scale with the weights) or at least 300 seconds")
        return value or None

    @field_validator("prompt_tokens", "output_tokens", mode="before")
    @classmethod
    def _zero_unstated(cls, value: int | None) -> int | None:
        return value or None

    @field_validator("output_tokens", mode="after")
    @classmethod
    def _lengths_together(cls, value: int | None, info: ValidationInfo) -> int | None:
        if "prompt_tokens" not in info.data:
            return value  # promptTokens itself was refused, and says so
        prompt = info.data["prompt_tokens"]
        if (prompt is None) != (value is None):
            given, missing = ("outputTokens", "promptTokens") if prompt is None else (
                "promptTokens", "outputTokens")  # fmt: skip
            raise ValueError(
                f"{given} is set without {missing}: the speed estimate needs both lengths of a"
                " request, or neither"
            )
        return value

    @field_validator("models")
    @classmethod
    def _unique(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        dupes = sorted(m for m, n in Counter(value).items() if n > 1)
        if dupes:
            raise ValueError(f"model(s) armed twice: {', '.join(dupes)}")
        return value


@dataclass(frozen=True)
class StackKey:
    """What Pulumi.yaml declares about one key, and what our errors say about it."""

    name: str
    field: str
    pulumi_type: PulumiType
    description: str
    required: bool
    default: Any
    unit: str
    fix: str
    pulumi_default: Any = None
    """What Pulumi.yaml says where the model's default (None: unset) has no Pulumi spelling."""


def _bound(info: FieldInfo, *names: str) -> Any:
    for meta in info.metadata:
        for name in names:
            value = getattr(meta, name, None)
            if value is not None:
                return value
    return None


def _fix(info: FieldInfo, extra: dict[str, Any]) -> str:
    if extra["fix"]:
        return str(extra["fix"])
    low, high = _bound(info, "ge", "gt"), _bound(info, "le", "lt")
    whole = info.annotation is int
    kind = "a whole number" if whole else "a number"
    span = f"above {low:g}, at most" if _bound(info, "gt") is not None else f"from {low:g} to"
    unit = f" {extra['unit']}" if extra["unit"] else ""
    quoted = "" if whole else " (quoted: Pulumi has no decimal type)"
    return f"{kind} {span} {high:g}{unit}{quoted}, e.g. {extra['example']}"


def _stack_keys() -> dict[str, StackKey]:
    keys = {}
    for name, info in StackSettings.model_fields.items():
        extra = info.json_schema_extra
        if not isinstance(extra, dict):
            continue  # derived, not a stack key
        alias = info.alias or name
        default = None if info.is_required() else info.get_default(call_default_factory=True)
        keys[alias] = StackKey(
            name=alias,
            field=name,
            pulumi_type=extra["pulumi"],  # type: ignore[arg-type]
            description=info.description or "",
            required=info.is_required(),
            default=default,
            unit=str(extra["unit"]),
            fix=_fix(info, extra),
            pulumi_default=extra["pulumi_default"],
        )
    return keys


STACK_KEYS: dict[str, StackKey] = _stack_keys()
"""Every declared stack key by its camelCase name, in declaration order."""


def pulumi_config_schema() -> dict[str, dict[str, Any]]:
    """Pulumi.yaml's `config:` section as this model says it must read."""
    schema: dict[str, dict[str, Any]] = {}
    for key in STACK_KEYS.values():
        entry: dict[str, Any] = {"type": key.pulumi_type}
        if key.pulumi_type == "array":
            entry["items"] = {"type": "string"}
        if not key.required:
            entry["default"] = _pulumi_default(key)
        entry["description"] = key.description
        schema[f"{PROJECT}:{key.name}"] = entry
    return schema


def _pulumi_default(key: StackKey) -> Any:
    if key.pulumi_default is not None:
        return key.pulumi_default
    value = key.default
    if isinstance(value, tuple):
        return list(value)
    if key.pulumi_type == "string" and isinstance(value, float):
        return f"{value:g}"  # Pulumi has no number type: decimals are strings
    if isinstance(value, Cloud):
        return str(value)
    return value
