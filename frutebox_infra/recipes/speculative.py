"""Speculative-decoding flags: the method is the model's fact, the flags are the engine's."""

from __future__ import annotations

import json
from dataclasses import dataclass

from frutebox_infra.catalog.schema import Model, Runtime, SpecDecode


@dataclass(frozen=True, kw_only=True)
class Speculation:
    """Engine flags for speculative decoding (empty when off) and why it is off, if it is."""

    flags: tuple[str, ...] = ()
    note: str | None = None

    @property
    def active(self) -> bool:
        return bool(self.flags)


OFF = Speculation()
"""No flags and nothing to say: what most models get."""


def eagle3_env_name(model_id: str) -> str:
    """`FRUTEBOX_EAGLE3_HEAD_<ID>`: the id upper-cased, `-` and `.` as `_`."""
    return "FRUTEBOX_EAGLE3_HEAD_" + model_id.upper().replace("-", "_").replace(".", "_")


def speculation(
    model: Model, engine: Runtime, *, enabled: bool, eagle3_head: str | None
) -> Speculation:
    """Flags only for a method the engine can run with the pieces we have; otherwise say why."""
    method = model.speed.spec_decode
    if method is SpecDecode.NONE:
        return OFF
    if not enabled:
        return Speculation(note="speculative decoding off (FRUTEBOX_SPEC_DECODE=false)")
    if engine not in (Runtime.SGLANG, Runtime.VLLM) or method is SpecDecode.MTP:
        # llama.cpp and MTP heads need no flag: the target model drafts for itself.
        return OFF
    steps = model.speed.K
    if method is SpecDecode.DRAFT:
        draft = model.speed.draft_model
        if not draft:
            return Speculation(
                note="speculative decoding off: method 'draft' needs speed.draft_model"
            )
        if engine is Runtime.SGLANG:
            return Speculation(flags=_sglang("STANDALONE", draft, steps))
        return Speculation(flags=_vllm({"method": "draft_model", "model": draft}, steps))
    head = model.speed.draft_model or eagle3_head
    if not head:
        return Speculation(
            note=f"speculative decoding off: method '{method}' needs an EAGLE-3 head; set"
            f" speed.draft_model in registry/models.yaml or {eagle3_env_name(model.id)}"
        )
    if engine is Runtime.SGLANG:
        note = None
        if method is SpecDecode.P_EAGLE:
            note = "P-EAGLE parallel drafting exists only on vLLM: SGLang runs plain EAGLE-3"
        return Speculation(flags=_sglang("EAGLE3", head, steps), note=note)
    config: dict[str, object] = {"method": "eagle3", "model": head}
    if method is SpecDecode.P_EAGLE:
        config["parallel_drafting"] = True
    return Speculation(flags=_vllm(config, steps))


def _sglang(algorithm: str, draft: str, steps: int) -> tuple[str, ...]:
    return (
        "--speculative-algorithm",
        algorithm,
        "--speculative-draft-model-path",
        draft,
        "--speculative-num-steps",
        str(steps),
    )


def _vllm(config: dict[str, object], steps: int) -> tuple[str, ...]:
    config = {**config, "num_speculative_tokens": steps}
    return ("--speculative-config", json.dumps(config, separators=(",", ":")))
