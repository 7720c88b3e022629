"""Stack settings: every `frutebox-infra:*` key, its Pulumi type, default, bounds and help.

The one home of the stack keys. `Pulumi.yaml`'s typed `config:` schema is this model written
out (tests/stack/test_settings.py checks that they say the same), and every error's fix is built
from the same bounds and units.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from functools import cache, cached_property
from typing import Annotated, Any, ClassVar, Literal, get_args, get_origin, get_type_hints

from frutebox_infra.catalog.schema import MAX_CONTEXT_TOKENS, Cloud, Runtime
from frutebox_infra.plumbing.validation import ALIAS, Check
from frutebox_infra.seeding.bringup import DOWNLOAD_MB_PER_S
from frutebox_infra.stack.windows import EXAMPLE as WINDOW_EXAMPLE
from frutebox_infra.stack.windows import FIX as WINDOW_FIX
from frutebox_infra.stack.windows import checked_window

PROJECT = "frutebox-infra"
SECRET_KEYS = ("runpodApiKey", "hfToken", "servingKey")
"""Secret config: never parsed here, only noticed as present so the plan knows a token exists.
Not declared in Pulumi.yaml: Pulumi makes a declared secret key required."""

PulumiType = Literal["string", "integer", "boolean", "array", "object"]


_STACK_KEY = "stack_key"
"""The dataclass field metadata that makes a field a stack key (its help, type and unit)."""


def _key(
    alias: str,
    description: str,
    *,
    pulumi: PulumiType,
    unit: str = "",
    example: str,
    fix: str = "",
    pulumi_default: Any = None,
) -> dict[str, Any]:
    """A stack key's field metadata: its camelCase name, help, Pulumi type and unit in one
    place; its bounds are the field's `Check`, its default the field's."""
    facts = {
        "description": description,
        "pulumi": pulumi,
        "unit": unit,
        "example": example,
        "fix": fix,
        "pulumi_default": pulumi_default,
    }
    return {ALIAS: alias, _STACK_KEY: facts}


VolumeTier = Literal["STANDARD", "HIGH_PERFORMANCE"]
RankBy = Literal["usdPerHour", "usdPerMillionTokens"]
Exposure = Literal["public", "private"]
MAX_DECODE_FLOOR = 1000
"""tok/s per stream: no GPU decodes a stream much faster, so a larger floor is a typo."""
ENGINE_NAMES = tuple(str(r) for r in Runtime)


def _known_engine(value: str | None, _: object) -> str | None:
    if value is not None and value not in ENGINE_NAMES:
        raise ValueError(f"is not an engine; the engines are {', '.join(ENGINE_NAMES)}")
    return value


@dataclass(frozen=True, kw_only=True)
class ModelOverride:
    """Per-model serving targets that win over the registry's defaults; strict, since Pulumi
    does not type them: `context: "4096"` is text, not a number."""

    context: Annotated[int, Check(strict=True, ge=1, le=MAX_CONTEXT_TOKENS)] | None = None
    concurrency: Annotated[int, Check(strict=True, ge=1, le=1024)] | None = None
    gpu: Annotated[str, Check(min_length=1)] | None = None
    """Pin one RunPod GPU type id."""
    min_concurrent_sequences: Annotated[int, Check(strict=True, ge=1, le=1024)] | None = field(
        default=None, metadata={ALIAS: "minConcurrentSequences"}
    )
    own_pod: bool = field(default=False, metadata={ALIAS: "ownPod"})
    """Never share a pod (with colocate on)."""
    gpu_count: Annotated[int, Check(strict=True, ge=1, le=8)] | None = field(
        default=None, metadata={ALIAS: "gpuCount"}
    )
    """Pin the GPUs per pod."""
    engine: Annotated[str, Check(after=_known_engine)] | None = None
    """Pin one of the model's runtimes (registry/models.yaml)."""
    armed_window: Annotated[str, Check(after=checked_window)] | None = field(
        default=None, metadata={ALIAS: "armedWindow"}
    )
    min_decode_tok_s: Annotated[float, Check(strict=True, ge=0, le=MAX_DECODE_FLOOR)] | None = (
        field(default=None, metadata={ALIAS: "minDecodeTokensPerSecond"})
    )


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
    "armedWindow": WINDOW_FIX,
}
"""Every override key and what it takes; engines that cannot honour one refuse it."""


def _zero_scales(value: int | None, _: object) -> int | None:
    if value is not None and 0 < value < 30:
        raise ValueError("must be 0 (scale with the weights) or at least 30 seconds")
    return value or None


def _power_of_two(value: int, _: object) -> int:
    # POST /v2/pods: cpu.vcpuCount "must be a power of two".
    if value & (value - 1):
        raise ValueError("must be a power of two (2, 4, 8, 16 or 32)")
    return value


def _zero_scales_seeding(value: int | None, _: object) -> int | None:
    if value is not None and 0 < value < 300:
        raise ValueError("must be 0 (scale with the weights) or at least 300 seconds")
    return value or None


_Tokens = Annotated[int, Check(ge=0, le=MAX_CONTEXT_TOKENS)]
"""A request length, where 0 (read as None) means not stated."""


def _zero_unstated(value: int | None) -> int | None:
    return value or None


def _lengths_together(value: int | None, earlier: Mapping[str, Any]) -> int | None:
    if "prompt_tokens" not in earlier:
        return value  # promptTokens itself was refused, and says so
    prompt = earlier["prompt_tokens"]
    if (prompt is None) != (value is None):
        given, missing = ("outputTokens", "promptTokens") if prompt is None else (
            "promptTokens", "outputTokens")  # fmt: skip
        raise ValueError(
            f"{given} is set without {missing}: the speed estimate needs both lengths of a"
            " request, or neither"
        )
    return value


def _unique(value: tuple[str, ...], _: object) -> tuple[str, ...]:
    dupes = sorted(m for m, n in Counter(value).items() if n > 1)
    if dupes:
        raise ValueError(f"model(s) armed twice: {', '.join(dupes)}")
    return value


@dataclass(frozen=True, kw_only=True)
class StackSettings:
    """One stack's config, camelCase as written in `stacks/Pulumi.<stack>.yaml`.

    Values arrive already typed the way Pulumi's config allows (stack_file.py); overrides,
    which Pulumi does not type, are strict: `context: true` is not a number.
    """

    __pydantic_config__: ClassVar[dict[str, Any]] = {"validate_default": True}
    """Defaults are checked too: an outputTokens without promptTokens is refused."""

    models: Annotated[tuple[str, ...], Check(after=_unique)] = field(
        default=(),
        metadata=_key(
            "models",
            "Armed model ids (see `frutebox models`); one GPU pod each unless colocate shares one.",
            pulumi="array",
            example="[qwen3-8b, sdxl-1.0]",
            fix="a YAML list of ids from `frutebox models`, e.g. [qwen3-8b, sdxl-1.0]",
        ),
    )
    data_center: Annotated[str, Check(min_length=1, max_length=64)] = field(
        metadata=_key(
            "dataCenter",
            "RunPod data centre for the weights volume and every pod (e.g. EU-RO-1).",
            pulumi="string",
            example="EU-RO-1",
            fix="a RunPod data centre id from registry/datacenters.yaml, e.g. EU-RO-1",
        ),
    )
    budget_usd_per_hour: Annotated[float, Check(gt=0, le=10_000)] = field(
        metadata=_key(
            "budgetUsdPerHour",
            "Most the stack's pods may cost per hour, worst allowed placement (USD).",
            pulumi="string",
            unit="USD per hour",
            example='"40"',
        ),
    )
    max_fallback_premium: Annotated[float, Check(ge=1.0, le=10.0)] = field(
        default=1.5,
        metadata=_key(
            "maxFallbackPremium",
            "Most a fallback placement may cost, as a multiple of the cheapest (>= 1).",
            pulumi="string",
            unit="x the cheapest",
            example='"1.5"',
        ),
    )
    cloud: Cloud = field(
        default=Cloud.SECURE,
        metadata=_key(
            "cloud",
            "RunPod cloud; network volumes mount only on SECURE.",
            pulumi="string",
            example="SECURE",
            fix="SECURE (network volumes mount only there) or COMMUNITY",
        ),
    )
    # Public by default: today's behaviour, each model's port published through RunPod's proxy
    # behind its gateway and the stack's key.
    exposure: Exposure = field(
        default="public",
        metadata=_key(
            "exposure",
            "Who can reach the served models: public (a published port on RunPod's proxy,"
            " behind the stack's key) or private (global networking, no port published:"
            " only the account's own GPU pods, at <podId>.runpod.internal:<port>).",
            pulumi="string",
            example="public",
            fix="public (RunPod's proxy, behind the stack's key) or private (only the account's"
            " own pods, through global networking)",
        ),
    )
    container_disk_gb: Annotated[int, Check(ge=1, le=2048)] = field(
        default=50,
        metadata=_key(
            "containerDiskGb",
            "Container disk per pod, GB (ephemeral; weights live on the volume).",
            pulumi="integer",
            unit="GB",
            example="50",
        ),
    )
    volume_headroom: Annotated[float, Check(ge=0.0, le=10.0)] = field(
        default=0.2,
        metadata=_key(
            "volumeHeadroom",
            "Free space kept on the weights volume, as a fraction of the armed weights.",
            pulumi="string",
            unit="x the armed weights",
            example='"0.2" for 20%',
        ),
    )
    min_volume_gb: Annotated[int, Check(ge=10, le=4096)] = field(
        default=10,
        metadata=_key(
            "minVolumeGb",
            "Smallest volume size, GB; raise it to pre-size for models you will arm.",
            pulumi="integer",
            unit="GB",
            example="10",
        ),
    )
    min_concurrent_sequences: Annotated[int, Check(ge=1, le=1024)] = field(
        default=1,
        metadata=_key(
            "minConcurrentSequences",
            "Full-context sequences a placement must hold to count as fitting.",
            pulumi="integer",
            unit="sequences",
            example="1",
        ),
    )
    spec_decode: bool = field(
        default=True,
        metadata=_key(
            "specDecode",
            "Speculative decoding where the model and engine support it.",
            pulumi="boolean",
            example="true",
            fix="true or false, unquoted (YAML's yes/no/on/off are text to Pulumi)",
        ),
    )
    # Off by default: a shared pod is one failure domain, and turning it on moves models
    # that already run onto other pods.
    colocate: bool = field(
        default=False,
        metadata=_key(
            "colocate",
            "Small models of one engine (Ollama, ComfyUI) share a pod when that is cheaper.",
            pulumi="boolean",
            example="false",
            fix="true or false, unquoted (YAML's yes/no/on/off are text to Pulumi)",
        ),
    )
    health_timeout_seconds: Annotated[int, Check(ge=0, le=86_400, after=_zero_scales)] | None = (
        field(
            default=None,
            metadata=_key(
                "healthTimeoutSeconds",
                "How long a new pod may take to answer its health check before it is terminated;"
                " 0 scales it with the weights to read off the volume (and to download at"
                " downloadMBps unless seeded).",
                pulumi="integer",
                unit="seconds",
                example="1800",
                fix="0 (scale it with the weights), or a whole number of seconds from 30 to 86400,"
                " e.g. 1800",
                pulumi_default=0,
            ),
        )
    )
    download_mb_per_s: Annotated[int, Check(ge=1, le=100_000)] = field(
        default=DOWNLOAD_MB_PER_S,
        metadata=_key(
            "downloadMBps",
            "Download speed (MB/s) assumed for seed times, bring-up costs and deadlines scaled to"
            " the weights.",
            pulumi="integer",
            unit="MB/s",
            example="100",
        ),
    )
    # Empty by default: armed around the clock, as before.
    armed_window: Annotated[str, Check(after=checked_window)] = field(
        default="",
        metadata=_key(
            "armedWindow",
            "When the stack's models are armed (a model's own overrides.armedWindow wins), e.g."
            " Mon-Fri 08:00-20:00 Europe/Berlin; outside it a model has no pod and its weights"
            " stay on the volume. Empty: always armed.",
            pulumi="string",
            example=WINDOW_EXAMPLE,
            fix=WINDOW_FIX,
        ),
    )
    # Off by default: turning it on changes every SGLang and llama.cpp launch (a restart).
    measure_usage: bool = field(
        default=False,
        metadata=_key(
            "measureUsage",
            "Launch engines with their token counters on (SGLang --enable-metrics, llama.cpp"
            " --metrics; vLLM counts by default) so `frutebox usage` can measure tokens served;"
            " SGLang's and, on seeded pods, vLLM's are kept on the volume across restarts.",
            pulumi="boolean",
            example="true",
            fix="true or false, unquoted (YAML's yes/no/on/off are text to Pulumi)",
        ),
    )
    # On by default: a CPU pod at ~$0.06/h downloads instead of GPUs at $0.17-$9.52/h, and a
    # wrong repo, quant or a missing token fails before any GPU pod exists.
    seeding: bool = field(
        default=True,
        metadata=_key(
            "seeding",
            "Seed each model's weights onto the volume from a CPU pod before its GPU pod starts"
            " (false: GPU pods download their own).",
            pulumi="boolean",
            example="true",
            fix="true or false, unquoted (YAML's yes/no/on/off are text to Pulumi)",
        ),
    )
    seed_cpu_flavor: Annotated[str, Check(max_length=64, pattern=r"^([a-z0-9][a-z0-9-]*)?$")] = (
        field(
            default="",
            metadata=_key(
                "seedCpuFlavor",
                "CPU flavor of the seeding pod (registry/gpus.yaml cpu_flavors); empty: the"
                " cheapest offered in the data centre.",
                pulumi="string",
                example="cpu3c",
                fix="a flavor id from registry/gpus.yaml cpu_flavors, e.g. cpu3c, or leave it"
                " unset",
            ),
        )
    )
    seed_vcpus: Annotated[int, Check(ge=2, le=32, after=_power_of_two)] = field(
        default=2,
        metadata=_key(
            "seedVcpus",
            "vCPUs of the seeding pod (a power of two); downloads are bound by the network, not"
            " the CPU.",
            pulumi="integer",
            unit="vCPUs",
            example="2",
            fix="a power of two from 2 to 32 vCPUs, unquoted, e.g. 2",
        ),
    )
    seed_timeout_seconds: (
        Annotated[int, Check(ge=0, le=172_800, after=_zero_scales_seeding)] | None
    ) = field(
        default=None,
        metadata=_key(
            "seedTimeoutSeconds",
            "How long seeding may take before it fails; 0 scales it with the weights to download"
            " at downloadMBps.",
            pulumi="integer",
            unit="seconds",
            example="7200",
            fix="0 (scale it with the weights), or a whole number of seconds from 300 to 172800,"
            " e.g. 7200",
            pulumi_default=0,
        ),
    )
    volume_type: VolumeTier = field(
        default="STANDARD",
        metadata=_key(
            "volumeType",
            "Storage tier of the weights volume, STANDARD or HIGH_PERFORMANCE (priced in preview;"
            " fixed at creation).",
            pulumi="string",
            example="STANDARD",
            fix="STANDARD or HIGH_PERFORMANCE",
        ),
    )
    runpod_api_url: Annotated[str, Check(max_length=2048, pattern=r"^(https?://\S+)?$")] = field(
        default="",
        metadata=_key(
            "runpodApiUrl",
            "RunPod API base URL (default the public API; point at `frutebox emulator` to"
            " rehearse).",
            pulumi="string",
            example="http://127.0.0.1:8765/v2",
            fix="an http(s) URL of the RunPod API, or leave it unset",
        ),
    )
    # 20, the owner's floor for tier S, the frontier models a RunPod fleet serves (its 30 is
    # for the local node, which no stack plans). A floor is a promise to every stream, so a
    # placement below it is refused even where it is cheaper per hour.
    min_decode_tok_s: Annotated[float, Check(ge=0.0, le=MAX_DECODE_FLOOR)] = field(
        default=20.0,
        metadata=_key(
            "minDecodeTokensPerSecond",
            "Least decode speed per stream (tok/s at the configured concurrency) a placement must"
            " reach by the speed model's estimate; 0 turns the floor off.",
            pulumi="string",
            unit="tok/s per stream",
            example='"20"',
        ),
    )
    rank_by: RankBy = field(
        default="usdPerHour",
        metadata=_key(
            "rankBy",
            "How placements that meet the floor are ranked, and fallbacks bounded:"
            " usdPerHour (the pod's price) or usdPerMillionTokens (output tokens at full load).",
            pulumi="string",
            example="usdPerHour",
            fix="usdPerHour or usdPerMillionTokens",
        ),
    )
    prompt_tokens: Annotated[_Tokens | None, Check(before=_zero_unstated)] = field(
        default=None,
        metadata=_key(
            "promptTokens",
            "Prompt length each request brings, for the speed estimate (with outputTokens); 0:"
            " every stream holds the full context and prefill is not counted.",
            pulumi="integer",
            unit="tokens",
            example="1024",
            fix=f"0 (not stated) or a whole number of tokens from 1 to {MAX_CONTEXT_TOKENS},"
            " unquoted, e.g. 1024, together with outputTokens",
            pulumi_default=0,
        ),
    )
    output_tokens: Annotated[
        _Tokens | None, Check(before=_zero_unstated, after=_lengths_together)
    ] = field(
        default=None,
        metadata=_key(
            "outputTokens",
            "Output length of each request, for the speed estimate (with promptTokens); 0: not"
            " stated.",
            pulumi="integer",
            unit="tokens",
            example="1024",
            fix=f"0 (not stated) or a whole number of tokens from 1 to {MAX_CONTEXT_TOKENS},"
            " unquoted, e.g. 1024, together with promptTokens",
            pulumi_default=0,
        ),
    )
    overrides: dict[str, ModelOverride] = field(
        default_factory=dict,
        metadata=_key(
            "overrides",
            f"Per-model overrides, model id -> {{{', '.join(OVERRIDE_FIXES)}}}.",
            pulumi="object",
            example="{qwen3-8b: {context: 16384}}",
            fix=f"a map of model id -> {{{', '.join(OVERRIDE_FIXES)}}}",
        ),
    )
    hf_token_configured: bool = field(default=False, metadata={ALIAS: "hfTokenConfigured"})
    """Derived from the secret's presence, never read from the stack file."""


@dataclass(frozen=True, kw_only=True)
class StackKey:
    """What Pulumi.yaml declares about one key, and what our errors say about it."""

    name: str
    field: str
    pulumi_type: PulumiType
    description: str
    required: bool
    default: Any
    unit: str
    pulumi_default: Any = None
    """What Pulumi.yaml says where the model's default (None: unset) has no Pulumi spelling."""
    stated_fix: str = ""
    """The fix its declaration states; else one is written from its bounds (`fix`)."""
    example: str = ""

    @cached_property
    def fix(self) -> str:
        """What to set instead of a bad value: the stated fix, or its bounds, unit and example."""
        if self.stated_fix:
            return self.stated_fix
        base, bounds = _bounds(_settings_hints()[self.field])
        low, high = bounds.get("ge", bounds.get("gt")), bounds.get("le", bounds.get("lt"))
        whole = base is int
        kind = "a whole number" if whole else "a number"
        span = f"above {low:g}, at most" if "gt" in bounds else f"from {low:g} to"
        unit = f" {self.unit}" if self.unit else ""
        quoted = "" if whole else " (quoted: Pulumi has no decimal type)"
        return f"{kind} {span} {high:g}{unit}{quoted}, e.g. {self.example}"

    @cached_property
    def decimal(self) -> bool:
        """A float: Pulumi passes it as text, which must read as a decimal number."""
        return _bounds(_settings_hints()[self.field])[0] is float


@cache
def _settings_hints() -> dict[str, Any]:
    """StackSettings' field types with their Checks. Evaluated from the annotations' text
    only where an error's fix or a value's parsing asks (a stack not seen before): a preview
    whose stack settings are cached reads neither."""
    return get_type_hints(StackSettings, include_extras=True)


def _bounds(hint: Any) -> tuple[Any, dict[str, Any]]:
    """A field's type without its Check, and the Check's bounds (those of `X | None`'s X)."""
    if get_origin(hint) is Annotated:
        base, *extras = get_args(hint)
        return base, {k: v for c in extras if isinstance(c, Check) for k, v in c.bounds.items()}
    inner = [_bounds(arg)[1] for arg in get_args(hint) if get_origin(arg) is Annotated]
    return hint, inner[0] if inner else {}


def _stack_keys() -> dict[str, StackKey]:
    keys = {}
    for spec in fields(StackSettings):
        facts = spec.metadata.get(_STACK_KEY)
        if facts is None:
            continue  # derived, not a stack key
        alias = spec.metadata[ALIAS]
        required = spec.default is MISSING and spec.default_factory is MISSING
        if required:
            default = None
        elif spec.default_factory is not MISSING:
            default = spec.default_factory()
        else:
            default = spec.default
        keys[alias] = StackKey(
            name=alias,
            field=spec.name,
            pulumi_type=facts["pulumi"],
            description=facts["description"],
            required=required,
            default=default,
            unit=str(facts["unit"]),
            pulumi_default=facts["pulumi_default"],
            stated_fix=str(facts["fix"]),
            example=facts["example"],
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
