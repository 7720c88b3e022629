"""Can tensor parallelism shard a model's weights, and when must experts be split instead?

Block-quantized FP8 checkpoints store one scale per `block x block` tile, so every tensor-parallel
shard of a quantized matrix must hold whole blocks: a MoE expert's MLP width divided by TP must
be a multiple of the block (Qwen3-Coder-480B: 2560 / 8 = 320 is not a multiple of 128). Engines
then load the model only with expert parallelism, which gives each GPU whole experts instead of
a slice of every expert (SGLang `--ep-size`, vLLM `--enable-expert-parallel`); that needs the
experts to divide evenly over the GPUs. A dense model has no such way out.
"""

from __future__ import annotations

from dataclasses import dataclass

from frutebox_infra.catalog.schema import Model


@dataclass(frozen=True, kw_only=True)
class Sharding:
    """How `tp` GPUs split a model: plain tensor parallelism, experts per GPU, or not at all."""

    expert_parallel: bool = False
    problem: str | None = None


PLAIN = Sharding()
"""Plain tensor parallelism: what most models and counts get."""


def sharding(model: Model, tp: int) -> Sharding:
    """The split `tp` GPUs need for `model`'s weights, from the facts its config.json gives."""
    block = model.weights.fp8_block_size
    arch = model.architecture
    if tp == 1 or block is None or model.weights.format != "fp8" or arch is None:
        return PLAIN
    if arch.moe and arch.moe_intermediate_size is not None:
        width = arch.moe_intermediate_size
        if _whole_blocks(width, tp, block):
            return PLAIN
        if arch.experts is None:
            return Sharding(
                problem=f"expert width {width} / TP {tp} is not a multiple of the FP8 block"
                f" {block} and the registry lacks the expert count that expert parallelism needs"
            )
        if arch.experts % tp:
            return Sharding(
                problem=f"expert width {width} / TP {tp} is not a multiple of the FP8 block"
                f" {block}, and {arch.experts} experts do not divide over {tp} GPUs for expert"
                " parallelism"
            )
        return Sharding(expert_parallel=True)
    if not arch.moe and arch.intermediate_size is not None:
        width = arch.intermediate_size
        if not _whole_blocks(width, tp, block):
            return Sharding(
                problem=f"MLP width {width} / TP {tp} is not a multiple of the FP8 block {block}"
            )
    return PLAIN


def _whole_blocks(width: int, tp: int, block: int) -> bool:
    return width % tp == 0 and (width // tp) % block == 0
