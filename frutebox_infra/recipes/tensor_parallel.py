"""Tensor parallelism: which GPU counts an engine can split a model's heads across."""

from __future__ import annotations

from frutebox_infra.recipes.base import is_power_of_two
from frutebox_infra.registry import Model


def tp_problem(model: Model, tp: int) -> str | None:
    """Why tensor-parallel degree `tp` cannot serve `model`, or None.

    The degree must be a power of two and divide the attention heads; GQA kv heads are
    either divided evenly or replicated whole (tp a multiple of the kv head count).
    """
    if not is_power_of_two(tp):
        return f"tensor parallelism {tp} is not a power of two"
    arch = model.architecture
    if arch is None:
        return None
    if arch.attention_heads % tp:
        return f"tensor parallelism {tp} does not divide {arch.attention_heads} attention heads"
    kv = arch.kv_heads
    if arch.attention != "mla" and kv is not None and kv % tp and tp % kv:
        return f"tensor parallelism {tp} neither divides nor is a multiple of {kv} kv heads"
    return None
