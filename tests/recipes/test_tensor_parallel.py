"""Tensor parallelism: a power of two that divides the heads; kv heads divided or copied."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from frutebox_infra.catalog.schema import Architecture
from frutebox_infra.recipes.base import is_power_of_two
from frutebox_infra.recipes.tensor_parallel import tp_problem
from tests.factories import gqa, sglang_model

MLA = Architecture(
    attention="mla",
    layers=61,
    attention_heads=64,
    kv_lora_rank=512,
    qk_rope_head_dim=64,
    source="test",
)


@pytest.mark.parametrize(
    ("n", "expected"),
    [pytest.param(n, n in (1, 2, 4, 8, 16), id=str(n)) for n in range(0, 17)],
)
def test_is_power_of_two(n: int, expected: bool) -> None:
    assert is_power_of_two(n) is expected


@pytest.mark.parametrize(
    ("arch", "tp", "ok"),
    [
        pytest.param(None, 3, False, id="unknown-arch-3"),
        pytest.param(None, 4, True, id="unknown-arch-4"),
        pytest.param(gqa(heads=48, kv_heads=48), 3, False, id="3-divides-heads-but-is-not-2^n"),
        pytest.param(gqa(heads=48, kv_heads=48), 6, False, id="6-divides-heads-but-is-not-2^n"),
        pytest.param(gqa(heads=12, kv_heads=4), 4, True, id="4-divides-12-heads"),
        pytest.param(gqa(heads=12, kv_heads=4), 8, False, id="8-does-not-divide-12-heads"),
        pytest.param(gqa(heads=32, kv_heads=8), 8, True, id="kv-divided"),
        pytest.param(gqa(heads=32, kv_heads=4), 8, True, id="kv-copied"),
        pytest.param(gqa(heads=24, kv_heads=6), 2, True, id="kv-6-over-2"),
        pytest.param(gqa(heads=24, kv_heads=6), 4, False, id="kv-6-neither-divides-nor-copies-4"),
        pytest.param(MLA, 8, True, id="mla-latent-copied"),
    ],
)
def test_tp_problem(arch: Architecture | None, tp: int, ok: bool) -> None:
    m = sglang_model("tp", architecture=asdict(arch) if arch else None)
    problem = tp_problem(m, tp)
    assert (problem is None) is ok
    if not ok:
        assert problem and str(tp) in problem
