"""The registry's shared vocabulary: the enums every fact file uses."""

from __future__ import annotations

from enum import StrEnum


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
