"""The speed model follows the physics: bandwidth, batching, context, parallelism, experts."""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

import pytest

from frutebox_infra.catalog.schema import Gpu, Model, Runtime, SpecDecode
from frutebox_infra.catalog.speed_facts import GpuSpeed, SpeedFacts
from frutebox_infra.estimates.speed import (
    Decode,
    ModelTerms,
    Placement,
    SpeedEstimate,
    SpeedUnknown,
    Workload,
    accepted_tokens,
    distinct_experts,
    estimate_speed,
    usd_per_million_tokens,
)
from frutebox_infra.plumbing.validation import validate
from tests.factories import gpu, model, real_registry

ENGINE = {
    "bandwidth_efficiency": 0.8,
    "compute_efficiency": 0.5,
    "step_overhead_us": 200,
    "layer_overhead_us": 10,
    "fitted_on": ["test"],
    "source": "test",
}
FACTS = validate(
    SpeedFacts,
    {
        "engines": {
            "sglang": ENGINE,
            "vllm": ENGINE,
            "llamacpp": ENGINE,
            "ollama": {"kernels_of": "llamacpp", "source": "test"},
        },
        "links": {
            "nvlink": {
                "collective_latency_us": 10,
                "link_efficiency": 0.8,
                "fitted_on": ["test"],
                "source": "test",
            },
            "pcie": {
                "collective_latency_us": 30,
                "link_efficiency": 0.5,
                "fitted_on": ["test"],
                "source": "test",
            },
        },
        "speculative": {"mtp": {"token_acceptance": 0.6, "draft_step_cost": 0.1, "source": "t"}},
    },
)
"""Identical figures for every engine: differences between engines are the parallelism's."""


def fast_gpu(bandwidth_gb_s: float = 3000, *, tflops: float = 1000, link: str = "nvlink") -> Gpu:
    speed = validate(
        GpuSpeed,
        {
            "memory_bandwidth_gb_s": bandwidth_gb_s,
            "bf16_dense_tflops": tflops,
            "fp8_dense_tflops": 2 * tflops,
            "interconnect": {"kind": link, "generation": 4, "gb_s_per_direction": 450},
            "datasheet": "test",
        },
    )
    return replace(gpu(vram_gb=80), speed=speed)


DENSE = model(
    "dense-70b",
    weights={"format": "bf16", "vram_gb": 140},
    architecture={
        "attention": "gqa",
        "layers": 80,
        "attention_heads": 64,
        "kv_heads": 8,
        "head_dim": 128,
        "hidden_size": 8192,
        "source": "test",
    },
    parameters={"total_billions": 70, "source": "test"},
)
MOE_ARCH = {
    "attention": "gqa",
    "layers": 48,
    "attention_heads": 32,
    "kv_heads": 4,
    "head_dim": 128,
    "moe": True,
    "experts": 128,
    "experts_per_token": 8,
    "moe_intermediate_size": 1536,
    "hidden_size": 4096,
    "source": "test",
}
# 48 layers x 128 experts x 3 x 4096 x 1536 = 116B routed; 12B active implies 4.6B shared.
MOE = model(
    "moe-120b",
    weights={"format": "bf16", "vram_gb": 242},
    architecture=MOE_ARCH,
    parameters={"total_billions": 121, "active_billions": 12, "source": "test"},
)


def run(
    m: Model = DENSE,
    *,
    engine: Runtime = Runtime.SGLANG,
    on: Gpu | None = None,
    count: int = 2,
    concurrency: int = 1,
    context: int = 1024,
    **placement: Any,
) -> SpeedEstimate:
    weights_gb = m.weights.vram_gb or 0.0
    p = Placement(
        engine=engine,
        gpu=on or fast_gpu(),
        gpu_count=count,
        weights_gb=weights_gb,
        precision=m.weights.format,
        **placement,
    )
    result = estimate_speed(m, p, Workload(concurrency=concurrency, context_tokens=context), FACTS)
    assert isinstance(result, SpeedEstimate), result
    return result


@pytest.mark.parametrize(
    ("slow", "fast"),
    [
        pytest.param(1000, 2000, id="2x-bandwidth"),
        pytest.param(2000, 4800, id="h200-class"),
    ],
)
def test_faster_memory_decodes_faster(slow: float, fast: float) -> None:
    a = run(on=fast_gpu(slow)).decode_tok_s_per_stream
    b = run(on=fast_gpu(fast)).decode_tok_s_per_stream
    # Memory-bound: faster, but not by more than the bandwidth ratio (the overheads stay).
    assert a < b < a * fast / slow


@pytest.mark.parametrize(("fewer", "more"), [(1, 4), (4, 16), (16, 64)])
def test_more_streams_give_more_aggregate_and_less_per_stream(fewer: int, more: int) -> None:
    a, b = run(concurrency=fewer), run(concurrency=more)
    assert b.decode_tok_s_aggregate > a.decode_tok_s_aggregate
    assert b.decode_tok_s_per_stream < a.decode_tok_s_per_stream


@pytest.mark.parametrize(("short", "long"), [(1024, 8192), (8192, 65536)])
def test_longer_context_decodes_slower(short: int, long: int) -> None:
    a = run(concurrency=8, context=short).decode_tok_s_per_stream
    b = run(concurrency=8, context=long).decode_tok_s_per_stream
    assert b < a


def test_tensor_parallelism_adds_bandwidth_a_layer_split_does_not() -> None:
    one = run(count=1).decode_tok_s_per_stream
    tp4 = run(count=4).decode_tok_s_per_stream
    split4 = run(engine=Runtime.LLAMACPP, count=4).decode_tok_s_per_stream
    split1 = run(engine=Runtime.LLAMACPP, count=1).decode_tok_s_per_stream
    # Tensor parallelism reads a quarter per GPU but pays all-reduces: faster, below 4x.
    assert one * 2 < tp4 < one * 4
    # A layer split takes turns: the same single-GPU bandwidth, plus a hand-off per boundary.
    assert split1 == pytest.approx(one)
    assert split4 < split1
    assert split4 > split1 * 0.95


def test_a_layer_split_says_the_gpus_take_turns() -> None:
    assert any("take turns" in a for a in run(engine=Runtime.OLLAMA, count=3).assumptions)
    assert not any("take turns" in a for a in run(engine=Runtime.LLAMACPP, count=1).assumptions)


def test_pcie_tensor_parallelism_pays_more_than_nvlink() -> None:
    nvlink = run(on=fast_gpu(link="nvlink"), count=8).decode_tok_s_per_stream
    pcie = run(on=fast_gpu(link="pcie"), count=8).decode_tok_s_per_stream
    assert pcie < nvlink


def test_a_moe_decodes_at_its_active_weights_not_its_total() -> None:
    moe = run(MOE, count=4).decode_tok_s_per_stream
    dense_same_bytes = model(
        "dense-121b",
        weights={"format": "bf16", "vram_gb": 242},
        architecture={**MOE_ARCH, "moe": False, "experts": None, "experts_per_token": None},
        parameters={"total_billions": 121, "source": "test"},
    )
    assert moe > 3 * run(dense_same_bytes, count=4).decode_tok_s_per_stream


@pytest.mark.parametrize(
    ("tokens", "low", "high"),
    [
        pytest.param(1, 8, 8, id="one-token-touches-k"),
        pytest.param(16, 80, 90, id="a-batch-touches-more"),
        pytest.param(1024, 127.9, 128, id="a-large-batch-touches-all"),
    ],
)
def test_a_batch_touches_more_experts(tokens: int, low: float, high: float) -> None:
    assert low <= distinct_experts(128, 8, tokens) <= high


def test_a_large_batch_of_a_moe_reads_nearly_every_expert() -> None:
    # Per token the batch of 256 costs far less than batch 1 (weights shared), but the step
    # reads every expert: it is slower than batch 1 by much more than the KV alone explains.
    one, many = run(MOE, count=4), run(MOE, count=4, concurrency=256, context=64)
    assert many.decode_step_ms > 3 * one.decode_step_ms
    assert many.decode_tok_s_aggregate > 20 * one.decode_tok_s_aggregate


@pytest.mark.parametrize(
    ("concurrency", "bound"),
    [pytest.param(1, "memory", id="one-stream"), pytest.param(2048, "compute", id="2048")],
)
def test_a_large_batch_is_compute_bound(concurrency: int, bound: str) -> None:
    result = run(on=fast_gpu(tflops=100), concurrency=concurrency, context=16)
    assert result.bound == bound


def test_expert_parallelism_at_one_stream_waits_for_the_busiest_gpu() -> None:
    tp = run(MOE, count=8).decode_step_ms
    ep = run(MOE, count=8, expert_parallel=True).decode_step_ms
    assert ep > tp


def test_prefill_is_compute_bound_and_scales_with_active_weights() -> None:
    dense = run(on=fast_gpu(tflops=200)).prefill_tok_s
    moe = run(MOE, on=fast_gpu(tflops=200)).prefill_tok_s
    assert dense < moe < dense * 70 / 12 * 1.2


@pytest.mark.parametrize(
    ("acceptance", "faster"),
    [pytest.param(0.3, False, id="poor-drafts-cost"), pytest.param(0.8, True, id="good-drafts")],
)
def test_speculative_decoding_pays_off_only_when_drafts_are_accepted(
    acceptance: float, faster: bool
) -> None:
    plain = run(count=1).decode_tok_s_per_stream
    spec = run(
        count=1,
        speculative=SpecDecode.MTP,
        speculative_steps=7,
        speculative_acceptance=acceptance,
    )
    assert (spec.decode_tok_s_per_stream > plain) is faster
    assert any("tokens per step" in a for a in spec.assumptions)


def test_a_method_without_an_acceptance_assumption_is_estimated_without_it() -> None:
    plain = run(count=1)
    eagle = run(count=1, speculative=SpecDecode.EAGLE3, speculative_steps=7)
    assert eagle.decode_tok_s_per_stream == plain.decode_tok_s_per_stream
    assert any("no acceptance assumption for eagle3" in a for a in eagle.assumptions)


@pytest.mark.parametrize(
    ("acceptance", "drafted", "tokens"),
    [(0.6, 3, 2.176), (0.0001, 7, 1.0001), (0.9, 1, 1.9)],
)
def test_accepted_tokens_per_verify_step(acceptance: float, drafted: int, tokens: float) -> None:
    assert accepted_tokens(acceptance, drafted) == pytest.approx(tokens, rel=1e-3)


def test_prefill_of_the_other_streams_slows_each_one() -> None:
    base = Placement(
        engine=Runtime.VLLM, gpu=fast_gpu(), gpu_count=2, weights_gb=140, precision="bf16"
    )
    pure = estimate_speed(DENSE, base, Workload(concurrency=16, context_tokens=2048), FACTS)
    loaded = estimate_speed(
        DENSE,
        base,
        Workload(concurrency=16, context_tokens=2048, prompt_tokens=8192, output_tokens=256),
        FACTS,
    )
    assert isinstance(pure, SpeedEstimate) and isinstance(loaded, SpeedEstimate)
    assert loaded.decode_tok_s_per_stream < pure.decode_tok_s_per_stream
    assert loaded.decode_tok_s_aggregate < pure.decode_tok_s_aggregate


@pytest.mark.parametrize(
    ("usd_per_hour", "tok_s", "usd"),
    [
        pytest.param(3.6, 1000.0, 1.0, id="a-dollar"),
        pytest.param(3.6, 10.0, 100.0, id="slow-is-dear"),
        pytest.param(None, 1000.0, None, id="unpriced"),
        pytest.param(3.6, 0.0, None, id="no-throughput"),
    ],
)
def test_usd_per_million_output_tokens(
    usd_per_hour: float | None, tok_s: float, usd: float | None
) -> None:
    got = usd_per_million_tokens(usd_per_hour, tok_s)
    assert got == (pytest.approx(usd) if usd is not None else None)


def test_the_estimate_prices_its_aggregate() -> None:
    result = run(concurrency=8, usd_per_hour=7.2)
    assert result.usd_per_million_output_tokens == pytest.approx(
        7.2 / (result.decode_tok_s_aggregate * 3600) * 1e6
    )


NO_PARAMS = model("bare", weights={"vram_gb": 10}, architecture=DENSE.architecture)
NO_ARCH = model("blind", weights={"vram_gb": 10}, parameters={"total_billions": 5, "source": "t"})
NO_HIDDEN = model(
    "narrow",
    weights={"vram_gb": 10},
    architecture={**asdict(DENSE.architecture), "hidden_size": None},  # type: ignore[union-attr]
    parameters={"total_billions": 5, "source": "t"},
)
NO_TOPK = model(
    "routerless",
    weights={"vram_gb": 10},
    architecture={**MOE_ARCH, "experts_per_token": None},
    parameters={"total_billions": 121, "active_billions": 12, "source": "t"},
)


@pytest.mark.parametrize(
    ("m", "engine", "on", "facts", "words"),
    [
        pytest.param(NO_PARAMS, Runtime.SGLANG, None, FACTS, "parameter counts", id="no-params"),
        pytest.param(NO_ARCH, Runtime.SGLANG, None, FACTS, "architecture", id="no-arch"),
        pytest.param(NO_HIDDEN, Runtime.SGLANG, None, FACTS, "hidden_size", id="no-hidden"),
        pytest.param(NO_TOPK, Runtime.SGLANG, None, FACTS, "expert structure", id="no-top-k"),
        pytest.param(DENSE, Runtime.SGLANG, gpu(), FACTS, "gpus.yaml", id="gpu-unsourced"),
        pytest.param(DENSE, Runtime.COMFYUI, None, FACTS, "comfyui", id="diffusion-engine"),
        pytest.param(DENSE, Runtime.SGLANG, None, None, "speed.yaml", id="no-speed-file"),
    ],
)
def test_unknown_facts_give_no_estimate(
    m: Model, engine: Runtime, on: Gpu | None, facts: SpeedFacts | None, words: str
) -> None:
    p = Placement(
        engine=engine,
        gpu=on or fast_gpu(),
        gpu_count=2,
        weights_gb=m.weights.vram_gb or 1.0,
        precision=m.weights.format,
    )
    result = estimate_speed(m, p, Workload(concurrency=1, context_tokens=1024), facts)
    assert isinstance(result, SpeedUnknown)
    assert words in result.reason


def test_the_control_for_unknown_facts_estimates() -> None:
    # The table above fails only on the missing fact: the complete model estimates.
    assert run(DENSE).decode_tok_s_per_stream > 0


@pytest.mark.parametrize(
    ("precision", "ratio"),
    [pytest.param("fp8", 2.0, id="fp8-cores"), pytest.param("gguf", 1.0, id="gguf")],
)
def test_fp8_weights_prefill_on_fp8_tensor_cores(precision: str, ratio: float) -> None:
    """Same weight bytes, so only the compute-bound prefill tells the precisions apart."""

    def prefill(fmt: str) -> float:
        p = Placement(
            engine=Runtime.SGLANG,
            gpu=fast_gpu(tflops=50),
            gpu_count=1,
            weights_gb=140,
            precision=fmt,
        )  # type: ignore[arg-type]
        result = estimate_speed(
            DENSE, p, Workload(concurrency=1, context_tokens=1024, prompt_tokens=8192), FACTS
        )
        assert isinstance(result, SpeedEstimate)
        return result.prefill_tok_s

    assert prefill(precision) / prefill("bf16") == pytest.approx(ratio, rel=0.05)


@pytest.mark.parametrize(
    ("model_id", "engine", "gpu_name", "count", "low", "high"),
    [
        pytest.param("kimi-k2.6", Runtime.LLAMACPP, "H200 SXM", 5, 5, 200, id="kimi-layer-split"),
        pytest.param("qwen3-235b-a22b", Runtime.SGLANG, "H100 SXM", 4, 10, 300, id="qwen3-235b"),
        pytest.param("qwen3-8b", Runtime.OLLAMA, "RTX A5000", 1, 20, 400, id="ollama-8b"),
    ],
)
def test_the_catalog_models_get_plausible_estimates(
    model_id: str, engine: Runtime, gpu_name: str, count: int, low: float, high: float
) -> None:
    reg = real_registry()
    m, g = reg.model(model_id), reg.gpu(gpu_name)
    assert m is not None and g is not None
    weights = m.weights.vram_gb or (m.source.gguf.vram_gb if m.source and m.source.gguf else 0)
    p = Placement(
        engine=engine,
        gpu=g,
        gpu_count=count,
        weights_gb=weights or 0.0,
        precision="gguf" if engine != Runtime.SGLANG else "fp8",
    )
    result = estimate_speed(m, p, Workload(concurrency=1, context_tokens=4096), reg.speed)
    assert isinstance(result, SpeedEstimate), result
    assert low < result.decode_tok_s_per_stream < high


@pytest.mark.parametrize("model_id", ["mistral-large-3", "deepseek-v4.1-flash", "glm-5.2"])
def test_catalog_models_with_unsourced_facts_get_no_estimate(model_id: str) -> None:
    reg = real_registry()
    m, g = reg.model(model_id), reg.gpu("H200 SXM")
    assert m is not None and g is not None
    p = Placement(
        engine=Runtime.SGLANG,
        gpu=g,
        gpu_count=8,
        weights_gb=m.weights.vram_gb or 700,
        precision="fp8",
    )
    result = estimate_speed(m, p, Workload(concurrency=1, context_tokens=4096), reg.speed)
    assert isinstance(result, SpeedUnknown)
    assert "registry/models.yaml" in result.reason


def test_a_decode_is_what_the_whole_estimate_says_on_each_gpu_type() -> None:
    load = Workload(concurrency=8, context_tokens=4096)
    terms = ModelTerms(
        DENSE,
        Placement(
            engine=Runtime.SGLANG, gpu=fast_gpu(), gpu_count=2, weights_gb=140, precision="bf16"
        ),
        FACTS,
        load,
    )
    slow, fast = fast_gpu(1000), fast_gpu(4000)
    rates = [terms.decode_rate(g, 2, 2, False) for g in (slow, fast)]
    for g, rate in zip((slow, fast), rates, strict=True):
        decode = terms.decode(g, 2, 2, False)
        assert isinstance(decode, Decode)
        whole = decode.estimate(1.5)
        alone = estimate_speed(
            DENSE,
            Placement(
                engine=Runtime.SGLANG,
                gpu=g,
                gpu_count=2,
                weights_gb=140,
                precision="bf16",
                usd_per_hour=1.5,
            ),
            load,
            FACTS,
        )
        assert whole == alone and whole.decode_tok_s_per_stream == rate
        dearer = decode.estimate(3.0)  # the same decode at another price
        assert dearer.usd_per_million_output_tokens == pytest.approx(
            2 * (whole.usd_per_million_output_tokens or 0)
        )
    assert isinstance(rates[0], float) and isinstance(rates[1], float) and rates[0] < rates[1]


@pytest.mark.parametrize(
    ("prompt", "output"),
    [pytest.param(None, None, id="no-lengths"), pytest.param(8192, 256, id="with-lengths")],
)
@pytest.mark.parametrize("speculative", [SpecDecode.NONE, SpecDecode.MTP])
def test_the_decode_rate_alone_is_the_whole_estimate_s(
    prompt: int | None, output: int | None, speculative: SpecDecode
) -> None:
    load = Workload(concurrency=8, context_tokens=4096, prompt_tokens=prompt, output_tokens=output)
    steps = 3 if speculative is SpecDecode.MTP else 0
    p = Placement(
        engine=Runtime.SGLANG,
        gpu=fast_gpu(),
        gpu_count=4,
        weights_gb=140,
        precision="bf16",
        speculative=speculative,
        speculative_steps=steps,
    )
    rate = ModelTerms(DENSE, p, FACTS, load).decode_rate(p.gpu, 4, 2, False)
    whole = estimate_speed(DENSE, p, load, FACTS)
    assert isinstance(whole, SpeedEstimate) and whole.decode_tok_s_per_stream == rate
    plain = estimate_speed(
        DENSE,
        replace(p, speculative=SpecDecode.NONE),
        Workload(concurrency=8, context_tokens=4096),
        FACTS,
    )
    assert isinstance(plain, SpeedEstimate)
    assert (rate != plain.decode_tok_s_per_stream) is (prompt is not None or steps > 0)
