"""Stack settings: the `frutebox-infra:*` config of one stack, validated with named errors."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from frutebox_infra.errors import ConfigError, UsageError
from frutebox_infra.paths import STACKS_DIR
from frutebox_infra.registry import Cloud

PROJECT = "frutebox-infra"
SECRET_KEYS = ("runpodApiKey", "hfToken")
"""Secret config: never parsed here, only noticed as present so the plan knows a token exists."""


VolumeTier = Literal["STANDARD", "HIGH_PERFORMANCE"]


class ModelOverride(BaseModel):
    """Per-model serving targets that win over the registry's defaults."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", populate_by_name=True, allow_inf_nan=False
    )

    context: int | None = Field(default=None, gt=0, le=10_000_000)
    concurrency: int | None = Field(default=None, ge=1, le=1024)
    gpu: str | None = Field(default=None, min_length=1, description="pin one RunPod GPU type id")
    min_concurrent_sequences: int | None = Field(
        default=None, alias="minConcurrentSequences", ge=1, le=1024
    )
    own_pod: bool = Field(
        default=False, alias="ownPod", description="never share a pod (with colocate on)"
    )


class StackSettings(BaseModel):
    """One stack's config, camelCase as written in `stacks/Pulumi.<stack>.yaml`."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", populate_by_name=True, allow_inf_nan=False
    )

    models: tuple[str, ...] = Field(default=(), description="armed model ids")
    data_center: str = Field(alias="dataCenter", min_length=1)
    budget_usd_per_hour: float = Field(alias="budgetUsdPerHour", gt=0)
    max_fallback_premium: float = Field(default=1.5, alias="maxFallbackPremium", ge=1.0, le=10.0)
    cloud: Cloud = Cloud.SECURE
    container_disk_gb: int = Field(default=50, alias="containerDiskGb", ge=1, le=2048)
    volume_headroom: float = Field(default=0.2, alias="volumeHeadroom", ge=0.0, le=10.0)
    min_volume_gb: int = Field(default=10, alias="minVolumeGb", ge=10, le=4096)
    min_concurrent_sequences: int = Field(default=1, alias="minConcurrentSequences", ge=1, le=1024)
    overrides: dict[str, ModelOverride] = Field(default_factory=dict)
    spec_decode: bool = Field(default=True, alias="specDecode")
    colocate: bool = Field(
        default=False,
        description="small models of one engine share a pod when cheaper; off by default: a"
        " shared pod is one failure domain, and turning it on moves running models",
    )
    runpod_api_url: str | None = Field(default=None, alias="runpodApiUrl")
    health_timeout_seconds: int | None = Field(default=None, alias="healthTimeoutSeconds", ge=0)
    """None (or 0 in the stack): each pod's deadline scales with the weights it downloads."""
    download_mb_per_s: int = Field(
        default=100, alias="downloadMBps", ge=1, le=100_000, description="assumed download"
    )
    volume_type: VolumeTier = Field(default="STANDARD", alias="volumeType")
    hf_token_configured: bool = Field(default=False, alias="hfTokenConfigured")
    """Derived from the secret's presence, never read from the stack file."""

    @field_validator("models", mode="before")
    @classmethod
    def _models_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError("must be a list of model ids, e.g. [qwen3-8b, sdxl-1.0]")
        return value

    @field_validator("runpod_api_url")
    @classmethod
    def _unset_when_empty(cls, value: str | None) -> str | None:
        return value or None

    @field_validator("health_timeout_seconds")
    @classmethod
    def _zero_scales(cls, value: int | None) -> int | None:
        return value or None

    @field_validator("models")
    @classmethod
    def _unique(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        dupes = sorted(m for m, n in Counter(value).items() if n > 1)
        if dupes:
            raise ValueError(f"model(s) armed twice: {', '.join(dupes)}")
        return value


def parse_settings(config: Mapping[str, Any], *, where: str) -> StackSettings:
    """Validate a stack's `frutebox-infra:`-stripped config; errors name file, key and fix."""
    values = {k: v for k, v in config.items() if k not in (*SECRET_KEYS, "hfTokenConfigured")}
    values["hfTokenConfigured"] = bool(config.get("hfToken"))
    try:
        return StackSettings.model_validate(values)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"]) or "(config)"
            head = str(err["loc"][0]) if err["loc"] else ""
            if err["type"] == "extra_forbidden" and len(err["loc"]) == 1:
                fix = f"remove it, or use one of: {', '.join(_KNOWN_KEYS)}"
            else:
                fix = _FIXES.get(head, "see its description in Pulumi.yaml")
            lines.append(f"{where}: key '{PROJECT}:{key}': {err['msg']} (fix: {fix})")
        raise ConfigError("invalid stack config:\n  " + "\n  ".join(lines)) from None


_FIXES = {
    "models": "a YAML list of ids from `frutebox models`",
    "dataCenter": "a RunPod data centre id such as EU-RO-1",
    "budgetUsdPerHour": "a positive, finite number of USD per hour",
    "maxFallbackPremium": "a ratio from 1.0 to 10, e.g. 1.5",
    "cloud": "SECURE or COMMUNITY",
    "containerDiskGb": "a whole number of GB from 1 to 2048",
    "volumeHeadroom": "a fraction from 0 to 10, e.g. 0.2 for 20%",
    "minVolumeGb": "a whole number of GB from 10 to 4096 (RunPod's volume sizes)",
    "minConcurrentSequences": "a whole number from 1 to 1024",
    "overrides": "a map of model id -> {context, concurrency, gpu, minConcurrentSequences,"
    " ownPod}",
    "colocate": "true or false",
    "specDecode": "true or false",
    "runpodApiUrl": "the RunPod API base URL, or leave it unset",
    "healthTimeoutSeconds": "a whole number of seconds; 0 scales it with the weights",
    "downloadMBps": "the download speed to assume onto the volume, whole MB/s from 1 (e.g. 100)",
    "volumeType": "STANDARD or HIGH_PERFORMANCE",
}
_KNOWN_KEYS = tuple(
    sorted((f.alias or name) for name, f in StackSettings.model_fields.items()
           if name != "hf_token_configured") + list(SECRET_KEYS)
)  # fmt: skip


def stack_file_name(stack: str) -> str:
    """Pulumi's own naming, inside the project's stackConfigDir."""
    return f"Pulumi.{stack}.yaml"


def stack_file(stack: str, directory: Path = STACKS_DIR) -> Path:
    return directory / stack_file_name(stack)


def read_stack_config(path: Path) -> dict[str, Any]:
    """The project's keys from a stack file, prefix stripped; secure values kept opaque."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(
            f"{path}: cannot read the stack file ({exc.strerror}). Fix: create it, or pick a"
            f" stack that exists ({', '.join(sorted(_stacks(path.parent))) or 'none found'})."
        ) from None
    return stack_config_from_text(text, where=str(path))


def stack_config_from_text(text: str, *, where: str) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: not valid YAML ({exc}). Fix the syntax.") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{where}: expected a mapping with a `config:` key.")
    config = doc.get("config") or {}
    if not isinstance(config, dict):
        raise ConfigError(f"{where}: `config:` must be a mapping of '{PROJECT}:<key>' to values.")
    out: dict[str, Any] = {}
    for key, value in config.items():
        namespace, _, name = str(key).partition(":")
        if namespace != PROJECT or not name:
            continue
        out[name] = True if isinstance(value, dict) and "secure" in value else value
    return out


def load_settings(path: Path) -> StackSettings:
    return parse_settings(read_stack_config(path), where=str(path))


def _stacks(directory: Path) -> list[str]:
    return [p.name[len("Pulumi.") : -len(".yaml")] for p in directory.glob("Pulumi.*.yaml")]
