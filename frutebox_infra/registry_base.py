"""The registry's shared vocabulary: the record base class and the enums every fact file uses."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, get_args

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator


class Frozen(BaseModel):
    """Registry records are facts: immutable, and unknown keys are typos."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, defer_build=True)

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


class SpecDecode(StrEnum):
    """How a model drafts tokens speculatively (registry `speed.spec_decode`)."""

    NONE = "none"
    MTP = "mtp"
    DRAFT = "draft"
    EAGLE3 = "eagle3"
    P_EAGLE = "p-eagle"
