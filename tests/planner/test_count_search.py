"""The count search's inner loop against estimating every count, and the GPU table it reads."""

from __future__ import annotations

from dataclasses import replace

import pytest

from frutebox_infra.catalog.schema import Architecture, Cloud, Gpu, Image, Runtime
from frutebox_infra.estimates.fit import FitRequest, MemoryModel, engine_cap_bytes, estimate
from frutebox_infra.planner.count_search import (
    GpuGroup,
    GpuRow,
    GpuTable,
    gpu_price,
    gpu_refusal,
    gpu_table,
    smallest_counts,
    smallest_counts_of,
    top_count,
)
from frutebox_infra.recipes import RECIPES
from tests.estimates.test_fit import QWEN3_8B, QWEN36_27B
from tests.factories import gpu, real_images, real_registry, registry

AMPERE = replace(
    gpu("AMPERE", vram_gb=48, fp8=False, secure=0.5, community=0.3), architecture="sm_86"
)
HOPPER = replace(gpu("HOPPER", vram_gb=80, secure=2.5, community=None), architecture="sm_90")
UNKNOWN = gpu("UNKNOWN", vram_gb=24, fp8=False, secure=0.333, community=0.2, max_count=2)
UNPRICED = gpu("UNPRICED", vram_gb=80, secure=None, community=None)
CARDS = (AMPERE, HOPPER, UNKNOWN, UNPRICED)


def table(max_gpus_per_pod: int = 8) -> GpuTable:
    return GpuTable(registry=registry(gpus=CARDS, max_gpus_per_pod=max_gpus_per_pod))


def image(*architectures: str) -> Image:
    return replace(real_images()[Runtime.VLLM], gpu_architectures=architectures)


@pytest.mark.parametrize(
    ("cloud", "architectures", "fp8_only", "expected"),
    [
        pytest.param(Cloud.SECURE, (), False, ["AMPERE", "HOPPER", "UNKNOWN"], id="priced"),
        pytest.param(Cloud.COMMUNITY, (), False, ["AMPERE", "UNKNOWN"], id="community-priced"),
        pytest.param(Cloud.SECURE, (), True, ["HOPPER"], id="fp8-only"),
        pytest.param(Cloud.SECURE, ("sm_90",), False, ["HOPPER", "UNKNOWN"], id="image-drives"),
        pytest.param(Cloud.SECURE, ("sm_80", "sm_86"), False, ["AMPERE", "UNKNOWN"], id="ampere"),
    ],
)
def test_rows_are_the_priced_gpu_types_the_image_drives_in_registry_order(
    cloud: Cloud, architectures: tuple[str, ...], fp8_only: bool, expected: list[str]
) -> None:
    rows = table().rows(cloud, image(*architectures), fp8_only)
    assert [row.gpu.id for row in rows] == expected
    assert all(CARDS[row.position] is row.gpu for row in rows)


@pytest.mark.parametrize(
    ("max_gpus_per_pod", "tops"),
    [pytest.param(8, [8, 8, 2], id="the-types-own-cap"), pytest.param(4, [4, 4, 2], id="per-pod")],
)
def test_a_row_prices_every_count_up_to_its_top(max_gpus_per_pod: int, tops: list[int]) -> None:
    rows = table(max_gpus_per_pod).rows(Cloud.SECURE, image(), False)
    assert [row.top for row in rows] == tops
    for row in rows:
        price = gpu_price(row.gpu, Cloud.SECURE)
        assert price is not None and len(row.usd) == row.top + 1
        assert row.usd[1:] == tuple(round(price * n, 2) for n in range(1, row.top + 1))
    assert rows[2].usd[2] == 0.67  # 0.666: to the cent, as a plan shows it


@pytest.mark.parametrize(
    ("engine", "arch", "speculative"),
    [
        pytest.param(MemoryModel.SGLANG, QWEN3_8B, True, id="sglang-speculative"),
        pytest.param(MemoryModel.VLLM, QWEN36_27B, False, id="vllm-dense"),
        pytest.param(MemoryModel.VLLM, None, False, id="vllm-unknown-arch-as-moe"),
        pytest.param(MemoryModel.LLAMACPP, QWEN3_8B, False, id="llamacpp"),
    ],
)
def test_caps_are_the_engines_cap_at_every_count(
    engine: MemoryModel, arch: Architecture | None, speculative: bool
) -> None:
    req = request(engine, arch=arch, speculative=speculative)
    caps = table().caps(req)
    tops = table().tops
    for card, top, by_count in zip(CARDS, tops, caps, strict=True):
        assert by_count[1:] == tuple(engine_cap_bytes(req, card, n) for n in range(1, top + 1))


@pytest.mark.parametrize(
    ("runtime", "fp8_only", "groups"),
    [
        pytest.param(Runtime.SGLANG, False, {1: ["AMPERE", "HOPPER", "UNKNOWN"]}, id="sglang"),
        pytest.param(Runtime.VLLM, False, {2: ["AMPERE", "UNKNOWN"], 1: ["HOPPER"]}, id="vllm"),
        pytest.param(Runtime.VLLM, True, {1: ["HOPPER"]}, id="vllm-fp8-cards-only"),
        pytest.param(Runtime.LLAMACPP, False, {2: ["AMPERE", "HOPPER", "UNKNOWN"]}, id="llamacpp"),
    ],
)
def test_rows_are_grouped_by_the_recipes_kv_precision_on_each_type(
    runtime: Runtime, fp8_only: bool, groups: dict[int, list[str]]
) -> None:
    recipe = RECIPES[runtime]
    found = table().by_kv_bytes(recipe, Cloud.SECURE, image(), fp8_only)
    assert {g.kv_bytes: [row.gpu.id for row in g.rows] for g in found} == groups
    for group in found:
        assert all(recipe.kv_dtype_bytes(row.gpu) == group.kv_bytes for row in group.rows)


@pytest.mark.parametrize(
    ("card", "architectures", "fp8_only", "refused"),
    [
        pytest.param(HOPPER, (), True, None, id="fp8-card-for-fp8-weights"),
        pytest.param(AMPERE, (), True, "FP8 checkpoint needs a native-FP8 GPU", id="no-fp8"),
        pytest.param(AMPERE, (), False, None, id="no-fp8-needed"),
        pytest.param(AMPERE, ("sm_90",), False, "has no kernels for sm_86", id="no-kernels"),
        pytest.param(UNKNOWN, ("sm_90",), False, None, id="unknown-architecture-is-no-refusal"),
    ],
)
def test_a_gpu_type_is_refused_before_any_fit_for_fp8_weights_or_the_images_kernels(
    card: Gpu, architectures: tuple[str, ...], fp8_only: bool, refused: str | None
) -> None:
    found = gpu_refusal(image(*architectures), card, fp8_only=fp8_only)
    if refused is None:
        assert found is None
    else:
        assert found is not None and refused in found


@pytest.mark.parametrize(
    ("max_count", "per_pod", "top"),
    [pytest.param(2, 8, 2, id="the-type-caps"), pytest.param(8, 4, 4, id="the-pod-caps")],
)
def test_the_top_count_is_the_lower_of_the_two_caps(max_count: int, per_pod: int, top: int) -> None:
    reg = registry(gpus=CARDS, max_gpus_per_pod=per_pod)
    assert top_count(reg, gpu(max_count=max_count)) == top


def test_a_registry_s_table_is_of_that_registry_s_gpus_whichever_was_asked_before() -> None:
    first, second = real_registry(), registry(gpus=CARDS, max_gpus_per_pod=4)
    for reg in (first, second, first, second):
        found = gpu_table(reg)
        assert found.gpus == reg.gpus
        assert found.tops == tuple(top_count(reg, g) for g in reg.gpus)


def request(
    engine: MemoryModel = MemoryModel.VLLM,
    *,
    weights_gb: float = 10.0,
    arch: Architecture | None = QWEN3_8B,
    min_sequences: int = 1,
    static: bool = False,
    speculative: bool = False,
) -> FitRequest:
    return FitRequest(
        engine=engine,
        weights_gb=weights_gb,
        context_tokens=32768,
        configured_sequences=16,
        min_sequences=min_sequences,
        kv_dtype_bytes=2,
        architecture=arch,
        static_allocation=static,
        speculative=speculative,
    )


def first_fitting(req: FitRequest, card: Gpu, allowed: tuple[int, ...], top: int) -> int | None:
    """The smallest allowed count that fits, estimating every count in full."""
    return next((n for n in allowed if n <= top and estimate(req, card, n).fits), None)


SEARCHED = [
    pytest.param(request(engine, weights_gb=w, arch=arch, static=engine is MemoryModel.LLAMACPP,
                         min_sequences=seqs), id=f"{engine}-{w:g}gb-{name}-{seqs}seq")
    for engine in MemoryModel
    for w in (1.0, 15.99, 40.0, 79.9, 150.0, 600.0)
    for name, arch in (("gqa", QWEN3_8B), ("hybrid", QWEN36_27B), ("coarse", None))
    for seqs in (1, 8)
]  # fmt: skip
ALLOWED = [(1, 2, 3, 4, 5, 6, 7, 8), (1, 2, 4, 8), (2, 4), (1,)]


def row_of(card: Gpu, top: int) -> GpuRow:
    return GpuRow.at_prices(CARDS.index(card), card, top, tuple(float(n) for n in range(top + 1)))


@pytest.mark.parametrize("req", SEARCHED)
def test_the_smallest_count_is_the_first_the_estimate_says_fits(req: FitRequest) -> None:
    search = table()
    rows = [row_of(card, top) for card, top in zip(CARDS, search.tops, strict=True)]
    for allowed in ALLOWED:
        found = smallest_counts(req, rows, search.caps(req), allowed)
        expected = [(row.gpu, first_fitting(req, row.gpu, allowed, row.top)) for row in rows]
        assert [(CARDS[f.position], f.count) for f in found] == [
            (card, count) for card, count in expected if count is not None
        ], allowed
        assert all(
            f.usd_per_hour == f.count and f.vram_gb == CARDS[f.position].vram_gb * f.count
            for f in found
        )


@pytest.mark.parametrize(
    ("top", "expected"),
    [pytest.param(4, [4], id="at-the-top"), pytest.param(3, [], id="above-the-top")],
)
def test_no_count_above_the_top_is_asked(top: int, expected: list[int]) -> None:
    req = request(MemoryModel.VLLM, weights_gb=200.0)  # more than 2 x 80 GB
    assert first_fitting(req, HOPPER, (1, 2, 4, 8), 8) == 4
    found = smallest_counts(req, [row_of(HOPPER, top)], table().caps(req), (1, 2, 4, 8))
    assert [f.count for f in found] == expected


@pytest.mark.parametrize("req", SEARCHED)
def test_a_groups_search_finds_what_the_search_per_type_finds(req: FitRequest) -> None:
    for per_pod in (8, 4):
        search = table(per_pod)
        rows = tuple(row_of(card, top) for card, top in zip(CARDS, search.tops, strict=True))
        for allowed in ALLOWED:
            found = smallest_counts_of(search, req, GpuGroup(kv_bytes=2, rows=rows), allowed)
            expected = smallest_counts(req, rows, search.caps(req), allowed)
            assert sorted(found) == sorted(expected), (per_pod, allowed)
