"""The fit model: KV bytes per token, engine memory pools, and the worked checks."""

from __future__ import annotations

import dataclasses
from dataclasses import replace

import pytest

from frutebox_infra.catalog.schema import Architecture
from frutebox_infra.estimates.fit import (
    HEADROOM,
    Fit,
    FitRequest,
    MemoryModel,
    count_share,
    estimate,
    fewest_gpus,
    fits,
    kv_bytes_per_token,
    sglang_static_fraction,
    share_rule,
)
from tests.factories import GB, GIB, MIB, gpu, gqa, kimi_k2_mla, real_gpu, real_registry

H100 = "NVIDIA H100 80GB HBM3"
H200 = "NVIDIA H200"
A5000 = "NVIDIA RTX A5000"

KIMI_K2 = kimi_k2_mla()
QWEN3_235B = gqa(layers=94, heads=64, kv_heads=4, head_dim=128, moe=True)
QWEN3_32B = gqa(layers=64, heads=64, kv_heads=8, head_dim=128)
QWEN3_8B = gqa(layers=36, heads=32, kv_heads=8, head_dim=128)
QWEN36_27B = Architecture(
    attention="hybrid",
    layers=64,
    attention_heads=24,
    kv_heads=4,
    head_dim=256,
    full_attention_layers=16,
    state_bytes_per_sequence=150 * 2**20,
    source="test",
)


def request(
    engine: MemoryModel = MemoryModel.VLLM,
    *,
    weights_gb: float = 10.0,
    context: int = 32768,
    configured: int = 16,
    min_sequences: int = 1,
    kv_bytes: int = 2,
    arch: Architecture | None = QWEN3_8B,
    static: bool = False,
) -> FitRequest:
    return FitRequest(
        engine=engine,
        weights_gb=weights_gb,
        context_tokens=context,
        configured_sequences=configured,
        min_sequences=min_sequences,
        kv_dtype_bytes=kv_bytes,
        architecture=arch,
        static_allocation=static,
    )


# ---- KV bytes per token -------------------------------------------------------------------


def test_kimi_k2_mla_is_68_6_kib_per_token_in_bf16() -> None:
    per_token = kv_bytes_per_token(KIMI_K2, 1, 2)
    assert per_token == 61 * (512 + 64) * 2
    assert round(per_token / 1024, 1) == 68.6


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_mla_is_not_divided_by_tensor_parallelism(tp: int) -> None:
    assert kv_bytes_per_token(KIMI_K2, tp, 2) == kv_bytes_per_token(KIMI_K2, 1, 2)


def test_mla_is_far_below_what_the_gqa_formula_would_claim() -> None:
    # 64 heads x 128 dims of K and V per layer would be ~25x the compressed latent.
    as_if_gqa = 2 * 61 * 64 * 128 * 2
    assert as_if_gqa / kv_bytes_per_token(KIMI_K2, 1, 2) > 20


def test_the_real_kimi_entries_use_mla() -> None:
    for model_id in ("kimi-k2.6", "kimi-k2.7-code"):
        arch = real_registry().model(model_id).architecture  # type: ignore[union-attr]
        assert arch is not None
        assert round(kv_bytes_per_token(arch, 8, 2) / 1024, 1) == 68.6


def test_qwen3_235b_is_188_kib_per_token_in_bf16() -> None:
    per_token = kv_bytes_per_token(QWEN3_235B, 1, 2)
    assert per_token == 2 * 94 * 4 * 128 * 2
    assert round(per_token / 1024) == 188
    arch = real_registry().model("qwen3-235b-a22b").architecture  # type: ignore[union-attr]
    assert arch is not None and kv_bytes_per_token(arch, 1, 2) == per_token


@pytest.mark.parametrize(
    ("kv_heads", "tp", "heads_per_rank"),
    [
        pytest.param(8, 1, 8, id="tp1"),
        pytest.param(8, 2, 4, id="sharded-2"),
        pytest.param(8, 8, 1, id="sharded-8"),
        pytest.param(4, 4, 1, id="exactly-one-each"),
        pytest.param(4, 8, 1, id="replicated-fewer-kv-than-ranks"),
        pytest.param(1, 8, 1, id="mqa-replicated"),
    ],
)
def test_gqa_kv_heads_per_rank_are_copied_when_fewer_than_ranks(
    kv_heads: int, tp: int, heads_per_rank: int
) -> None:
    arch = gqa(layers=10, heads=32, kv_heads=kv_heads, head_dim=128)
    assert kv_bytes_per_token(arch, tp, 2) == 2 * 10 * heads_per_rank * 128 * 2


def test_head_dim_is_the_config_value_not_hidden_over_heads() -> None:
    # Qwen3-8B: hidden 4096 / 32 heads = 128 coincides; Qwen3-32B: 5120 / 64 = 80, not 128.
    assert kv_bytes_per_token(QWEN3_32B, 1, 2) == 2 * 64 * 8 * 128 * 2


def test_hybrid_counts_only_full_attention_layers() -> None:
    per_token = kv_bytes_per_token(QWEN36_27B, 1, 2)
    assert per_token == 2 * 16 * 4 * 256 * 2
    as_if_all = replace(QWEN36_27B, attention="gqa")
    assert kv_bytes_per_token(as_if_all, 1, 2) == 4 * per_token


@pytest.mark.parametrize(
    "engine", [pytest.param(e, id=e.value) for e in MemoryModel if e is not MemoryModel.DIFFUSION]
)
@pytest.mark.parametrize(
    "arch",
    [pytest.param(QWEN3_8B, id="gqa"), pytest.param(QWEN36_27B, id="hybrid"),
     pytest.param(KIMI_K2, id="mla")],
)  # fmt: skip
def test_the_share_rule_is_the_share_at_every_count(
    engine: MemoryModel, arch: Architecture
) -> None:
    rule = share_rule(request(engine, arch=arch))
    for count in range(1, 9):
        # Fresh requests: one that asks the rule, one whose share is worked out and kept.
        assert rule(request(engine, arch=arch), arch, count) == count_share(
            request(engine, arch=arch), arch, count
        )
    split = share_rule(request(MemoryModel.LLAMACPP, arch=arch))(
        request(MemoryModel.LLAMACPP, arch=arch), arch, 3
    )
    heads = share_rule(request(MemoryModel.VLLM, arch=arch))(
        request(MemoryModel.VLLM, arch=arch), arch, 3
    )
    assert split.worst_layers is not None and heads.worst_layers is None


def hybrid_with_and_without_state(engine: MemoryModel) -> tuple[Fit, Fit]:
    """Qwen3.6-27B on one H200, with its recurrent state and as if it had none."""
    without_state = replace(QWEN36_27B, state_bytes_per_sequence=0)
    req = request(engine, weights_gb=31, context=32768, kv_bytes=1, arch=QWEN36_27B)
    with_state = estimate(req, real_gpu(H200), 1)
    return with_state, estimate(
        dataclasses.replace(req, architecture=without_state), real_gpu(H200), 1
    )


def test_hybrid_on_vllm_adds_its_per_sequence_state() -> None:
    with_fit, bare_fit = hybrid_with_and_without_state(MemoryModel.VLLM)
    assert with_fit.kv_bytes_per_token == bare_fit.kv_bytes_per_token
    assert with_fit.kv_tokens == bare_fit.kv_tokens
    per_sequence = 32768 * bare_fit.kv_bytes_per_token + 150 * 2**20  # type: ignore[operator]
    pool = bare_fit.kv_tokens * bare_fit.kv_bytes_per_token  # type: ignore[operator]
    assert with_fit.full_context_sequences == pytest.approx(pool / per_sequence, rel=1e-4)
    assert with_fit.full_context_sequences < bare_fit.full_context_sequences  # type: ignore[operator]


def test_sglang_splits_a_hybrid_pool_between_state_and_kv() -> None:
    # SGLang's --mamba-full-memory-ratio 0.9: KV gets 1/1.9 of the pool, the state the rest.
    split, whole = hybrid_with_and_without_state(MemoryModel.SGLANG)
    assert split.kv_tokens == pytest.approx(whole.kv_tokens / 1.9, rel=1e-6)  # type: ignore[operator]
    assert split.full_context_sequences == pytest.approx(
        whole.full_context_sequences / 1.9,  # type: ignore[operator]
        rel=1e-6,
    )


def test_qwen36_on_one_rtx_pro_6000_holds_about_28_sequences_not_47() -> None:
    """Issue 14: the fit gave KV the whole pool (46.9 sequences); SGLang's split leaves ~28."""
    qwen = real_registry().model("qwen-3.6-27b")
    assert qwen is not None and qwen.architecture is not None
    req = request(MemoryModel.SGLANG, weights_gb=31, context=32768, kv_bytes=1,
                  arch=qwen.architecture)  # fmt: skip
    fit = estimate(req, real_gpu("NVIDIA RTX PRO 6000 Blackwell Server Edition"), 1)
    assert 26 < fit.full_context_sequences < 30  # type: ignore[operator]


@pytest.mark.parametrize(
    "arch",
    [
        pytest.param(KIMI_K2, id="mla"),
        pytest.param(QWEN3_235B, id="gqa"),
        pytest.param(QWEN36_27B, id="hybrid"),
    ],
)
@pytest.mark.parametrize("tp", [1, 2, 8])
def test_fp8_kv_halves_bf16(arch: Architecture, tp: int) -> None:
    assert kv_bytes_per_token(arch, tp, 1) * 2 == kv_bytes_per_token(arch, tp, 2)


# ---- engine memory pools --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gpu_id", "fraction"),
    [pytest.param(H100, 0.835, id="h100-80"), pytest.param(H200, 0.907, id="h200")],
)
def test_sglang_static_fraction(gpu_id: str, fraction: float) -> None:
    assert sglang_static_fraction(real_gpu(gpu_id).memory_mib, 1) == pytest.approx(
        fraction, abs=0.0015
    )


def test_sglang_pool_is_its_fraction_of_free_memory_minus_weights() -> None:
    # The static fraction applies to what is free when SGLang starts (the card less ~1 GiB of
    # CUDA context), not to the card's total.
    h100 = real_gpu(H100)
    fit = estimate(request(MemoryModel.SGLANG, weights_gb=40, kv_bytes=1), h100, 1)
    fraction = sglang_static_fraction(h100.memory_mib, 1)
    free = h100.memory_mib * MIB - 1 * GIB
    assert fit.memory_budget_gb_per_gpu == pytest.approx(free * fraction / GB)
    pool = free * fraction - 40 * GB
    assert fit.kv_tokens == int(pool // fit.kv_bytes_per_token)  # type: ignore[operator]


def test_vllm_budget_is_ninety_percent_of_the_card_in_bytes() -> None:
    # 81559 MiB x 0.9 is 76.97 GB; a GiB-as-GB slip would say 71.7.
    fit = estimate(request(MemoryModel.VLLM, weights_gb=20), real_gpu(H100), 1)
    assert fit.memory_budget_gb_per_gpu == pytest.approx(81559 * MIB * 0.9 / GB)
    assert round(fit.memory_budget_gb_per_gpu, 2) == 76.97


def test_vllm_reserves_more_activation_memory_for_moe() -> None:
    dense = estimate(request(weights_gb=20, arch=QWEN3_32B), real_gpu(H100), 1)
    moe = estimate(request(weights_gb=20, arch=replace(QWEN3_32B, moe=True)), real_gpu(H100), 1)
    lost = (dense.kv_tokens - moe.kv_tokens) * dense.kv_bytes_per_token  # type: ignore[operator]
    assert lost == pytest.approx(2.5 * GIB, rel=1e-3)


# ---- the brief's worked checks --------------------------------------------------------------


def test_qwen3_32b_bf16_on_one_h100_with_vllm_does_not_hold_one_sequence() -> None:
    fit = estimate(request(weights_gb=65.5, arch=QWEN3_32B), real_gpu(H100), 1)
    assert fit.exact
    assert fit.full_context_sequences is not None and fit.full_context_sequences < 1
    assert not fit.fits
    assert fit.reason


def test_qwen3_32b_bf16_on_two_h100_with_vllm_holds_eight_to_nine() -> None:
    fit = estimate(request(weights_gb=65.5, arch=QWEN3_32B), real_gpu(H100), 2)
    assert fit.fits
    assert fit.weights_gb_per_gpu == pytest.approx(32.75)
    assert 8 <= fit.full_context_sequences < 10  # type: ignore[operator]


def test_qwen3_32b_on_two_h100_with_fp8_kv_holds_about_seventeen() -> None:
    fit = estimate(request(weights_gb=65.5, arch=QWEN3_32B, kv_bytes=1), real_gpu(H100), 2)
    assert fit.full_context_sequences == pytest.approx(17, abs=1)


def test_qwen3_8b_bf16_on_a_24gb_card_with_sglang_holds_about_one() -> None:
    fit = estimate(
        request(MemoryModel.SGLANG, weights_gb=16.4, arch=QWEN3_8B, kv_bytes=2), real_gpu(A5000), 1
    )
    # ~0.93: the fraction of the memory free at start leaves it just short of one.
    assert fit.full_context_sequences == pytest.approx(1, abs=0.1)


# ---- bounds, each on both sides -------------------------------------------------------------


@pytest.mark.parametrize(
    "engine",
    [
        pytest.param(MemoryModel.SGLANG, id="sglang"),
        pytest.param(MemoryModel.VLLM, id="vllm"),
        pytest.param(MemoryModel.LLAMACPP, id="llamacpp"),
    ],
)
def test_one_full_context_sequence_is_the_floor(engine: MemoryModel) -> None:
    h100 = real_gpu(H100)
    probe = estimate(request(engine, weights_gb=30, context=1000), h100, 1)
    assert probe.kv_tokens is not None and probe.kv_tokens > 1000
    at_capacity = estimate(request(engine, weights_gb=30, context=probe.kv_tokens), h100, 1)
    beyond = estimate(request(engine, weights_gb=30, context=probe.kv_tokens + 1), h100, 1)
    assert at_capacity.fits and at_capacity.full_context_sequences >= 1  # type: ignore[operator]
    assert not beyond.fits and beyond.full_context_sequences < 1  # type: ignore[operator]


@pytest.mark.parametrize(
    ("min_sequences", "fits"),
    [pytest.param(4, True, id="held"), pytest.param(5, False, id="not-held")],
)
def test_min_sequences_is_a_floor(min_sequences: int, fits: bool) -> None:
    h100 = real_gpu(H100)
    probe = estimate(request(weights_gb=30, context=1000), h100, 1)
    context = probe.kv_tokens // 4  # type: ignore[operator]
    fit = estimate(request(weights_gb=30, context=context, min_sequences=min_sequences), h100, 1)
    assert fit.fits is fits


@pytest.mark.parametrize(
    ("slots_held", "fits"),
    [pytest.param(8, True, id="all-slots"), pytest.param(7, False, id="one-slot-short")],
)
def test_llamacpp_static_allocation_needs_every_slot_at_full_context(
    slots_held: int, fits: bool
) -> None:
    h100 = real_gpu(H100)
    probe = estimate(request(MemoryModel.LLAMACPP, weights_gb=30, context=1000), h100, 1)
    context = probe.kv_tokens // slots_held  # type: ignore[operator]
    static = request(
        MemoryModel.LLAMACPP, weights_gb=30, context=context, configured=8, static=True
    )
    assert estimate(static, h100, 1).fits is fits
    # Without static allocation one sequence is enough, so the same pod would "fit".
    assert estimate(dataclasses.replace(static, static_allocation=False), h100, 1).fits


def test_llamacpp_judges_the_gpu_holding_the_most_layers() -> None:
    # 61 layers on 2 GPUs: one holds 31 of them, with their weights and their KV.
    h100 = real_gpu(H100)
    one = estimate(request(MemoryModel.LLAMACPP, weights_gb=30, arch=KIMI_K2), h100, 1)
    two = estimate(request(MemoryModel.LLAMACPP, weights_gb=30, arch=KIMI_K2), h100, 2)
    assert two.layers_on_worst_gpu == 31 and one.layers_on_worst_gpu == 61
    assert two.weights_gb_per_gpu == pytest.approx(30 * 31 / 61)
    assert two.kv_bytes_per_token == pytest.approx(one.kv_bytes_per_token * 31 / 61, abs=1)  # type: ignore[operator]
    assert two.kv_tokens > 2 * one.kv_tokens  # type: ignore[operator]


# ---- coarse fallback and units --------------------------------------------------------------

# A card of exactly 10,000 MiB = 10.486 GB; llama.cpp keeps 1.5 GiB per device, leaving
# 8.875 GB. The headroom rule fits weights up to 8.875 / 1.15 = 7.718 GB. Reading MiB as MB,
# or GB as GiB, moves that edge below 7.7 GB.
TEN_THOUSAND_MIB = gpu("TEN-K", vram_gb=10, memory_mib=10_000)


@pytest.mark.parametrize(
    ("weights_gb", "fits"),
    [pytest.param(7.7, True, id="7.7GB-fits"), pytest.param(7.8, False, id="7.8GB-does-not")],
)
def test_coarse_rule_is_weights_times_headroom_in_consistent_units(
    weights_gb: float, fits: bool
) -> None:
    fit = estimate(
        request(MemoryModel.LLAMACPP, weights_gb=weights_gb, arch=None), TEN_THOUSAND_MIB, 1
    )
    assert fit.fits is fits
    assert fit.exact is False
    assert fit.full_context_sequences is None and fit.kv_bytes_per_token is None
    assert fit.needed_gb == pytest.approx(weights_gb * HEADROOM)
    assert fit.available_gb == pytest.approx((10_000 * MIB - 1.5 * GIB) / GB)


@pytest.mark.parametrize(
    ("engine", "available_bytes"),
    [
        pytest.param(
            MemoryModel.VLLM, 81559 * MIB * 0.9 - 8.5 * GIB, id="vllm-cap-and-moe-reserve"
        ),
        pytest.param(
            MemoryModel.SGLANG,
            (81559 * MIB - 1 * GIB) * sglang_static_fraction(81559, 1),
            id="sglang-fraction-of-free",
        ),
        pytest.param(MemoryModel.LLAMACPP, 81559 * MIB - 1.5 * GIB, id="llamacpp-per-device"),
    ],
)
def test_coarse_rule_compares_with_the_engines_cap_never_raw_vram(
    engine: MemoryModel, available_bytes: float
) -> None:
    h100 = real_gpu(H100)
    edge_gb = available_bytes / GB / HEADROOM
    below = estimate(request(engine, weights_gb=edge_gb - 0.05, arch=None), h100, 1)
    above = estimate(request(engine, weights_gb=edge_gb + 0.05, arch=None), h100, 1)
    assert below.fits and not above.fits
    assert above.available_gb == pytest.approx(available_bytes / GB)
    assert above.available_gb < 81559 * MIB / GB
    assert above.reason is not None and "coarse" in above.reason


@pytest.mark.parametrize(
    ("count", "fits"), [pytest.param(3, False, id="three-short"), pytest.param(4, True, id="four")]
)
def test_coarse_rule_counts_every_gpu(count: int, fits: bool) -> None:
    fit = estimate(request(MemoryModel.LLAMACPP, weights_gb=25, arch=None), TEN_THOUSAND_MIB, count)
    assert fit.fits is fits
    assert fit.weights_gb_per_gpu == pytest.approx(25 / count)


@pytest.mark.parametrize(
    ("count", "weights_gb", "fits"),
    [
        pytest.param(1, 10.4, True, id="fits-one"),
        pytest.param(1, 10.5, False, id="too-big"),
        pytest.param(2, 10.4, False, id="never-two-gpus"),
    ],
)
def test_diffusion_runs_on_one_gpu(count: int, weights_gb: float, fits: bool) -> None:
    fit = estimate(
        request(MemoryModel.DIFFUSION, weights_gb=weights_gb, arch=None), TEN_THOUSAND_MIB, count
    )
    assert fit.fits is fits
    assert fit.exact is False


def test_weights_are_reported_in_gb_per_gpu() -> None:
    fit = estimate(request(weights_gb=65.5, arch=QWEN3_32B), real_gpu(H200), 2)
    assert fit.weights_gb_per_gpu == pytest.approx(32.75)
    assert fit.gpu_count == 2


@pytest.mark.parametrize("engine", [MemoryModel.SGLANG, MemoryModel.VLLM, MemoryModel.LLAMACPP])
@pytest.mark.parametrize("weights_gb", [10.0, 60.0, 72.0, 75.0, 90.0])
def test_needed_versus_available_tells_the_same_story_as_fits(
    engine: MemoryModel, weights_gb: float
) -> None:
    # The message a user reads ("X GB needed vs Y GB available") must agree with the verdict,
    # engine reserves (vLLM's activations) included.
    fit = estimate(
        request(engine, weights_gb=weights_gb, static=engine is MemoryModel.LLAMACPP),
        real_gpu(H100),
        1,
    )
    assert fit.fits is (fit.needed_gb <= fit.available_gb + 1e-9)


# ---- the search's shortcuts agree with the estimate -------------------------------------------

ENGINES = [MemoryModel.SGLANG, MemoryModel.VLLM, MemoryModel.LLAMACPP, MemoryModel.DIFFUSION]
SHORTCUT_REQUESTS = [
    pytest.param(
        request(engine, weights_gb=w, arch=arch, static=static), id=f"{engine}-{w:g}gb-{name}"
    )
    for engine in ENGINES
    for w in (1.0, 15.0, 15.99, 16.0, 40.0, 79.9, 150.0, 600.0)
    for name, arch, static in (
        ("gqa", QWEN3_8B, False),
        ("mla-static", KIMI_K2, True),
        ("hybrid", QWEN36_27B, False),
        ("coarse", None, False),
    )
]  # fmt: skip
SHORTCUT_GPUS = [gpu("G16", vram_gb=16), gpu("G80", vram_gb=80), real_gpu(H200)]


@pytest.mark.parametrize("req", SHORTCUT_REQUESTS)
def test_fits_says_what_the_estimate_says_at_every_count(req: FitRequest) -> None:
    for card in SHORTCUT_GPUS:
        verdicts = [(fits(req, card, n), estimate(req, card, n).fits) for n in range(1, 9)]
        assert all(a is b for a, b in verdicts), (card.id, verdicts)


@pytest.mark.parametrize("req", SHORTCUT_REQUESTS)
def test_nothing_fits_below_the_fewest_gpus_the_weights_allow(req: FitRequest) -> None:
    for card in SHORTCUT_GPUS:
        floor = fewest_gpus(req, card)
        assert floor >= 1
        assert not [n for n in range(1, floor) if estimate(req, card, n).fits], card.id


@pytest.mark.parametrize(
    ("weights_gb", "floor"),
    [
        pytest.param(1.0, 1, id="well-under-one-card"),
        pytest.param(16.0, 1, id="one-card-exactly-is-not-excluded"),
        pytest.param(34.0, 1, id="just-over-two-cards-rounds-down"),
        pytest.param(35.0, 2, id="past-two-cards"),
        pytest.param(600.0, 34, id="many-cards"),
    ],
)
def test_the_fewest_gpus_is_the_weights_over_the_card_rounded_down(
    weights_gb: float, floor: int
) -> None:
    card = gpu("G16", vram_gb=16)  # 16 GiB: 17.18 GB
    assert fewest_gpus(request(weights_gb=weights_gb), card) == floor
