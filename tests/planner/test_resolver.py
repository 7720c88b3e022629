"""The resolver: why a model cannot be served, in its rules' order, and how it is placed."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any

import pytest

import frutebox_infra.recipes as recipes_pkg
from frutebox_infra.catalog.schema import Cloud, Image, Model, Runtime
from frutebox_infra.estimates.fit import estimate
from frutebox_infra.planner.ranking import fit_request, image_gpu_problem
from frutebox_infra.planner.resolver import Resolution, resolve
from frutebox_infra.recipes import ENGINE_PREFERENCE, SERVABLE_RUNTIMES, Recipe, ServeOptions
from tests.factories import (
    GB,
    GIB,
    flag,
    gpu,
    gqa,
    model,
    ollama_model,
    real_gpu,
    real_images,
    real_registry,
    registry,
    sglang_model,
    vllm_model,
)

TOKEN = ServeOptions(hf_token_configured=True)

AMP24 = gpu("AMP-24", vram_gb=24, fp8=False, secure=0.20)
AMP48 = gpu("AMP-48", vram_gb=48, fp8=False, secure=0.40)
HOP80 = gpu("HOP-80", vram_gb=80, fp8=True, secure=2.00, community=1.50)
HOP141 = gpu("HOP-141", vram_gb=141, fp8=True, secure=4.00)
GPUS = (AMP24, AMP48, HOP80, HOP141)


NO_TOKEN = ServeOptions()


def resolve_one(m: Model, options: ServeOptions = NO_TOKEN, **kw: Any) -> Resolution:
    return resolve(registry([m], kw.pop("gpus", GPUS), **kw), m.id, options)


# ---- why a model cannot be served, one rule at a time ------------------------------------

COMFY_FILES = {"files": [{"path": "x.safetensors", "folder": "checkpoints"}]}

RULES = (
    pytest.param(
        model("closed", runtimes=["sglang"], source_unavailable="API only"),
        "no-open-weights",
        id="no-open-weights",
    ),
    pytest.param(model("sourceless", runtimes=["sglang"]), "no-pinned-source", id="no-source"),
    pytest.param(
        model(
            "tagless",
            runtimes=["ollama"],
            source={"hf_repo": "org/tagless"},
            weights={"vram_gb": 2},
        ),
        "no-ollama-tag",
        id="ollama-without-tag",
    ),
    pytest.param(model("idle", source={"hf_repo": "org/idle"}), "no-runtime", id="no-runtime"),
    pytest.param(
        model(
            "tgi-only",
            runtimes=["tgi"],
            source={"hf_repo": "org/tgi"},
            weights={"vram_gb": 2},
            context=4096,
        ),
        "no-engine",
        id="only-tgi",
    ),
    pytest.param(
        model(
            "diffusers-only",
            capability="image",
            runtimes=["diffusers"],
            source={"hf_repo": "org/d"},
            weights={"vram_gb": 2},
        ),
        "no-engine",
        id="only-diffusers",
    ),
    pytest.param(
        model(
            "comfy-no-files",
            capability="image",
            runtimes=["comfyui"],
            source={"hf_repo": "org/c"},
            weights={"vram_gb": 8},
        ),
        "no-recipe",
        id="comfyui-without-file-list",
    ),
    pytest.param(
        model(
            "gguf-less",
            runtimes=["llamacpp"],
            source={"hf_repo": "org/g"},
            weights={"vram_gb": 8},
            context=4096,
        ),
        "no-recipe",
        id="llamacpp-only-without-gguf",
    ),
    pytest.param(
        model("weightless", runtimes=["sglang"], source={"hf_repo": "org/w"}, context=4096),
        "no-recipe",
        id="sglang-only-without-weights",
    ),
    pytest.param(
        sglang_model("gated-sglang", source={"hf_repo": "org/gated", "gated": True}),
        "gated-no-token",
        id="gated-sglang",
    ),
    pytest.param(
        model(
            "gated-comfy",
            capability="image",
            runtimes=["comfyui"],
            source={"hf_repo": "org/gc", "gated": True, "comfyui": COMFY_FILES},
            weights={"vram_gb": 8, "disk_gb": 4},
        ),
        "gated-no-token",
        id="gated-comfyui",
    ),
)


@pytest.mark.parametrize(("m", "rule"), RULES)
def test_each_rule_is_reported_with_a_fix(m: Model, rule: str) -> None:
    r = resolve_one(m)
    assert r.problem is not None and r.problem.rule == rule
    assert not r.servable and r.placements == ()
    assert m.id in r.problem.message
    assert r.problem.fix
    assert "Fix:" in str(r.problem) and rule in str(r.problem)


def test_an_id_not_in_the_registry_is_a_problem() -> None:
    r = resolve(registry([]), "no-such-model")
    assert r.problem is not None and r.problem.rule == "unknown-model"
    assert "no-such-model" in r.problem.message
    assert "frutebox models" in r.problem.fix


# A model breaking two rules reports the earlier one (the rules' order).
ORDER = (
    pytest.param(
        model("a", runtimes=["sglang"], source_unavailable="closed"),
        "no-open-weights",
        id="closed-beats-no-source",
    ),
    pytest.param(
        model(
            "a",
            runtimes=["sglang"],
            source_unavailable="closed",
            source={"hf_repo": "o/a", "gated": True},
        ),
        "no-open-weights",
        id="closed-beats-gated",
    ),
    pytest.param(model("a"), "no-pinned-source", id="no-source-beats-no-runtime"),
    pytest.param(
        model("a", runtimes=["ollama", "tgi"], source={"hf_repo": "o/a", "gated": True}),
        "no-ollama-tag",
        id="no-tag-beats-gated",
    ),
    pytest.param(
        model("a", source={"hf_repo": "o/a", "gated": True}),
        "no-runtime",
        id="no-runtime-beats-gated",
    ),
    pytest.param(
        model("a", runtimes=["tgi"], source={"hf_repo": "o/a", "gated": True}),
        "no-engine",
        id="no-engine-beats-gated",
    ),
    pytest.param(
        model(
            "a",
            capability="image",
            runtimes=["comfyui"],
            source={"hf_repo": "o/a", "gated": True},
            weights={"vram_gb": 8},
        ),
        "no-recipe",
        id="no-recipe-beats-gated",
    ),
)


@pytest.mark.parametrize(("m", "rule"), ORDER)
def test_the_earlier_rule_wins(m: Model, rule: str) -> None:
    r = resolve_one(m)
    assert r.problem is not None and r.problem.rule == rule


def test_fixing_each_rule_reveals_the_next() -> None:
    steps: list[tuple[dict[str, Any], str | None]] = [
        ({"runtimes": ["ollama"], "source_unavailable": "closed"}, "no-open-weights"),
        ({"runtimes": ["ollama"]}, "no-pinned-source"),
        ({"runtimes": ["ollama"], "source": {"hf_repo": "o/a", "gated": True}}, "no-ollama-tag"),
        ({"runtimes": [], "source": {"hf_repo": "o/a", "gated": True}}, "no-runtime"),
        ({"runtimes": ["tgi"], "source": {"hf_repo": "o/a", "gated": True}}, "no-engine"),
        ({"runtimes": ["sglang"], "source": {"hf_repo": "o/a", "gated": True}}, "no-recipe"),
        (
            {
                "runtimes": ["sglang"],
                "source": {"hf_repo": "o/a", "gated": True},
                "weights": {"vram_gb": 2, "disk_gb": 2},
                "context": 4096,
            },
            "gated-no-token",
        ),
        (
            {
                "runtimes": ["sglang"],
                "source": {"hf_repo": "o/a"},
                "weights": {"vram_gb": 2, "disk_gb": 2},
                "context": 4096,
            },
            None,
        ),
    ]
    for fields, rule in steps:
        r = resolve_one(model("a", **fields))
        assert (r.problem.rule if r.problem else None) == rule, fields


# ---- gated repos ---------------------------------------------------------------------------


def test_a_gated_llama_served_by_its_ollama_tag_needs_no_token() -> None:
    r = resolve(real_registry(), "llama-3.2-1b")
    assert r.servable, r.problem
    assert r.placements[0].pod.secret_env == ()


def test_stable_audio_needs_a_token() -> None:
    r = resolve(real_registry(), "stable-audio-open-1.0")
    assert r.problem is not None and r.problem.rule == "gated-no-token"
    assert "stabilityai/stable-audio-open-1.0" in r.problem.message
    assert "hfToken" in r.problem.fix or "HF_TOKEN" in r.problem.fix


def test_with_a_token_the_gated_model_is_servable_and_the_pod_asks_for_it() -> None:
    r = resolve(real_registry(), "stable-audio-open-1.0", TOKEN)
    assert r.servable, r.problem
    assert r.placements[0].pod.secret_env == ("HF_TOKEN",)


def test_a_gated_gguf_original_is_served_from_its_open_republication() -> None:
    m = model(
        "gguf",
        runtimes=["llamacpp"],
        source={
            "hf_repo": "meta/gated",
            "gated": True,
            "gguf": {"repo": "unsloth/x-GGUF", "quant": "Q4_K_M", "vram_gb": 5, "context": 4096},
        },
    )
    assert resolve_one(m).servable


# ---- what we can serve is exactly what we have recipes for ---------------------------------


def _all_recipe_classes() -> set[type[Recipe]]:
    for info in pkgutil.iter_modules(recipes_pkg.__path__):
        importlib.import_module(f"{recipes_pkg.__name__}.{info.name}")
    found: set[type[Recipe]] = set()
    todo = list(Recipe.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if not inspect.isabstract(cls) and cls.__module__.startswith(recipes_pkg.__name__):
            found.add(cls)
    return found


def test_servable_runtimes_are_derived_from_the_recipe_classes() -> None:
    classes = _all_recipe_classes()
    assert frozenset(cls.runtime for cls in classes) == SERVABLE_RUNTIMES
    assert {type(r) for r in ENGINE_PREFERENCE} == classes
    assert Runtime.TGI not in SERVABLE_RUNTIMES and Runtime.DIFFUSERS not in SERVABLE_RUNTIMES


def test_engine_preference_is_sglang_first_vllm_last() -> None:
    order = [r.runtime for r in ENGINE_PREFERENCE]
    assert order[0] is Runtime.SGLANG and order[-1] is Runtime.VLLM
    assert order.index(Runtime.LLAMACPP) < order.index(Runtime.OLLAMA)


def test_every_servable_runtime_serves_some_catalog_model() -> None:
    served: dict[Runtime, str] = {}
    for m in real_registry().models:
        r = resolve(real_registry(), m.id, TOKEN)
        if r.servable and r.recipe is not None:
            assert r.placements[0].pod.args.strip()
            served.setdefault(r.recipe.runtime, m.id)
    assert set(served) == set(SERVABLE_RUNTIMES), served


@pytest.mark.parametrize("model_id", [m.id for m in real_registry().models])
@pytest.mark.parametrize(
    "options", [pytest.param(ServeOptions(), id="no-token"), pytest.param(TOKEN, id="token")]
)
def test_servable_means_a_command_and_a_placement(model_id: str, options: ServeOptions) -> None:
    r = resolve(real_registry(), model_id, options)
    if r.servable:
        assert r.recipe is not None and r.image is not None
        assert r.placements
        for p in r.placements:
            assert p.pod.args.strip() and p.pod.image
            assert p.fit.fits
    else:
        assert r.problem is not None and r.problem.fix


# ---- engine choice --------------------------------------------------------------------------


def test_sglang_is_preferred_over_llamacpp_for_qwen3_235b() -> None:
    r = resolve(real_registry(), "qwen3-235b-a22b")
    assert r.engine == "sglang"


def test_the_next_engine_serves_when_the_preferred_lacks_facts() -> None:
    m = model(
        "gguf-fallback",
        runtimes=["sglang", "llamacpp"],
        source={
            "hf_repo": "org/x",
            "gguf": {"repo": "org/x-GGUF", "quant": "Q4", "vram_gb": 5, "context": 4096},
        },
    )
    assert resolve_one(m).engine == "llamacpp"


def test_vllm_serves_models_that_declare_only_vllm() -> None:
    for model_id in ("mistral-large-3", "pixtral", "apertus-70b"):
        r = resolve(real_registry(), model_id)
        assert r.servable and r.engine == "vllm", (model_id, r.problem)


# ---- placement -------------------------------------------------------------------------------


def test_fp8_checkpoints_never_land_on_non_fp8_gpus() -> None:
    r = resolve_one(sglang_model("fp8", vram_gb=10, fmt="fp8"))
    assert r.placements and all(p.gpu.fp8 for p in r.placements)
    rejected = {c.gpu.id: c.rejected for c in r.considered}
    assert "FP8" in (rejected["AMP-24"] or "") and "FP8" in (rejected["AMP-48"] or "")
    bf16 = resolve_one(sglang_model("bf16", vram_gb=10, fmt="bf16"))
    assert bf16.placements[0].gpu.id == "AMP-24"


def catalog_models_where(keep: Callable[[Resolution], bool]) -> list[str]:
    """Catalog model ids whose resolution (token configured) `keep` selects."""
    return [m.id for m in real_registry().models if keep(resolve(real_registry(), m.id, TOKEN))]


FP8_CHECKPOINTS = catalog_models_where(lambda r: r.serving is not None and r.serving.require_fp8)
OTHER_SERVABLE = catalog_models_where(
    lambda r: r.servable and r.serving is not None and not r.serving.require_fp8
)
TENSOR_PARALLEL = catalog_models_where(lambda r: r.engine in ("sglang", "vllm"))


def test_the_catalog_has_models_of_each_kind_the_tests_below_check() -> None:
    assert len(FP8_CHECKPOINTS) >= 2 and len(OTHER_SERVABLE) >= 2
    assert len(TENSOR_PARALLEL) >= 2
    assert any(not g.fp8 for g in real_registry().gpus) and any(g.fp8 for g in real_registry().gpus)


@pytest.mark.parametrize("model_id", FP8_CHECKPOINTS)
def test_catalog_fp8_checkpoints_only_on_fp8_gpus(model_id: str) -> None:
    r = resolve(real_registry(), model_id, TOKEN)
    assert r.placements, r.problem
    assert all(p.gpu.fp8 for p in r.placements)
    rejected = {c.gpu.id: c.rejected or "" for c in r.considered}
    assert all("FP8" in rejected[g.id] for g in real_registry().gpus if not g.fp8), rejected


@pytest.mark.parametrize("model_id", OTHER_SERVABLE)
def test_other_catalog_models_are_never_refused_a_gpu_for_fp8(model_id: str) -> None:
    r = resolve(real_registry(), model_id, TOKEN)
    assert r.placements
    assert not [c.gpu.id for c in r.considered if "FP8" in (c.rejected or "")]


def test_placements_are_cheapest_first_then_less_vram() -> None:
    # 30 GB bf16 needs 34.5 GB: one 48 GiB card or two 32 GiB cards, both at $0.40/h.
    big = gpu("ONE-48", vram_gb=48, fp8=False, secure=0.40)
    small = gpu("TWO-32", vram_gb=32, fp8=False, secure=0.20)
    dear = gpu("DEAR-80", vram_gb=80, fp8=True, secure=0.90)
    r = resolve_one(sglang_model("tie", vram_gb=30), gpus=(dear, small, big))
    assert [(p.gpu.id, p.count, p.usd_per_hour) for p in r.placements] == [
        ("ONE-48", 1, 0.40),
        ("TWO-32", 2, 0.40),
        ("DEAR-80", 1, 0.90),
    ]


@pytest.mark.parametrize("model_id", [m.id for m in real_registry().models])
def test_catalog_placements_are_sorted_cheapest_first(model_id: str) -> None:
    placements = resolve(real_registry(), model_id, TOKEN).placements
    keys = [(p.usd_per_hour, p.total_vram_gb) for p in placements]
    assert keys == sorted(keys)
    assert len({p.gpu.id for p in placements}) == len(placements)  # one count per GPU type


@pytest.mark.parametrize("model_id", TENSOR_PARALLEL)
def test_tensor_parallel_flag_matches_every_placement(model_id: str) -> None:
    r = resolve(real_registry(), model_id, TOKEN)
    assert r.model is not None and r.placements, r.problem
    for p in r.placements:
        name = "--tp-size" if r.engine == "sglang" else "--tensor-parallel-size"
        assert flag(p.pod.args, name) == str(p.count)
        assert p.count & (p.count - 1) == 0
        assert p.count >= r.model.min_gpus
        if r.model.architecture is not None:
            assert r.model.architecture.attention_heads % p.count == 0


@pytest.mark.parametrize(
    ("m", "tp_flag"),
    [
        # Coarse: 230 GB x 1.15 = 264.5 GB needs 3 x 80 GiB (85.9 GB each); 3 is not a TP degree.
        pytest.param(sglang_model("coarse3", vram_gb=230), "--tp-size", id="sglang-coarse"),
        pytest.param(
            vllm_model("coarse3", vram_gb=230), "--tensor-parallel-size", id="vllm-coarse"
        ),
        # Exact: 48 heads divide by 3, so only the power-of-two rule forbids 3 GPUs.
        pytest.param(
            sglang_model(
                "exact3",
                vram_gb=180,
                architecture=asdict(gqa(layers=2, heads=48, kv_heads=48, head_dim=64)),
            ),
            "--tp-size",
            id="sglang-exact",
        ),
        pytest.param(
            vllm_model(
                "exact3",
                vram_gb=180,
                architecture=asdict(gqa(layers=2, heads=48, kv_heads=48, head_dim=64)),
            ),
            "--tensor-parallel-size",
            id="vllm-exact",
        ),
    ],
)
def test_a_model_needing_three_gpus_gets_four(m: Model, tp_flag: str) -> None:
    hop = gpu("HOP-80", vram_gb=80, fp8=True, secure=2.0)
    r = resolve_one(m, gpus=(hop,))
    assert [p.count for p in r.placements] == [4]
    assert flag(r.placements[0].pod.args, tp_flag) == "4"
    assert r.placements[0].usd_per_hour == 8.0


@pytest.mark.parametrize(
    ("min_gpus", "count"),
    [
        pytest.param(1, 1, id="min-1"),
        pytest.param(2, 2, id="min-2"),
        pytest.param(4, 4, id="min-4"),
    ],
)
def test_min_gpus_is_a_floor(min_gpus: int, count: int) -> None:
    r = resolve_one(sglang_model("small", vram_gb=5, min_gpus=min_gpus), gpus=(HOP80,))
    assert [p.count for p in r.placements] == [count]
    assert flag(r.placements[0].pod.args, "--tp-size") == str(count)


def test_smallest_count_that_fits_per_gpu_type() -> None:
    # 50 GB x 1.15 = 57.5 GB: 3 x 24 GiB would do on paper, TP takes 4; 2 x 48 GiB; 1 x 80.
    r = resolve_one(sglang_model("fifty", vram_gb=50))
    assert {p.gpu.id: p.count for p in r.placements} == {
        "AMP-24": 4,
        "AMP-48": 2,
        "HOP-80": 1,
        "HOP-141": 1,
    }


EIGHT_BY_80_GIB = 8 * (80 - 1.5) * GIB / GB / 1.15
"""The largest weights (GB) the coarse rule fits on 8 x 80 GiB: llama.cpp's cap per device is
the card less its 1.5 GiB of context and buffers."""


@pytest.mark.parametrize(
    ("vram_gb", "count"),
    [
        pytest.param(EIGHT_BY_80_GIB - 1, 8, id="fits-in-eight"),
        pytest.param(EIGHT_BY_80_GIB + 1, None, id="would-need-nine"),
    ],
)
def test_at_most_eight_gpus(vram_gb: float, count: int | None) -> None:
    r = resolve_one(
        model(
            "llama-big",
            runtimes=["llamacpp"],
            source={"gguf": {"repo": "a/b", "quant": "Q", "vram_gb": vram_gb, "context": 4096}},
        ),
        gpus=(gpu("HOP-80", vram_gb=80),),
    )
    # Without an architecture llama.cpp falls back to the coarse rule: 8 x 78.5 GiB / 1.15.
    assert [p.count for p in r.placements] == ([count] if count else [])
    if count is None:
        assert r.problem is not None and r.problem.rule == "no-placement"


@pytest.mark.parametrize(
    ("max_gpus_per_pod", "max_count", "placed"),
    [
        pytest.param(8, 8, True, id="room-for-four"),
        pytest.param(2, 8, False, id="pod-cap-two"),
        pytest.param(8, 2, False, id="gpu-cap-two"),
    ],
)
def test_gpu_counts_respect_both_caps(max_gpus_per_pod: int, max_count: int, placed: bool) -> None:
    hop = gpu("HOP-80", vram_gb=80, max_count=max_count)
    r = resolve_one(
        sglang_model("needs-four", vram_gb=230), gpus=(hop,), max_gpus_per_pod=max_gpus_per_pod
    )
    assert bool(r.placements) is placed


def test_a_tp_degree_that_does_not_divide_heads_is_never_offered() -> None:
    # 12 heads: TP 8 is impossible, so a model that needs 5+ GPUs has no SGLang placement.
    arch = asdict(gqa(layers=2, heads=12, kv_heads=4, head_dim=64))
    r = resolve_one(
        sglang_model("twelve", vram_gb=300, architecture=arch), gpus=(gpu("HOP-80", vram_gb=80),)
    )
    assert r.placements == ()
    assert r.problem is not None and r.problem.rule == "no-placement"
    assert r.problem.fix


def test_a_pinned_gpu_restricts_to_that_type() -> None:
    reg = real_registry()
    r = resolve(reg, "qwen3-8b", gpu_id="NVIDIA H200")
    assert [p.gpu.id for p in r.placements] == ["NVIDIA H200"]
    assert {c.gpu.id for c in r.considered} == {"NVIDIA H200"}
    pinned_unfit = resolve(reg, "qwen3-235b-a22b", gpu_id="NVIDIA A40")
    assert pinned_unfit.placements == ()
    assert pinned_unfit.problem is not None and "NVIDIA A40" in pinned_unfit.problem.message


def test_community_offers_only_gpus_with_a_community_price() -> None:
    r = resolve(real_registry(), "qwen3-8b", cloud=Cloud.COMMUNITY)
    priced = {
        g.id: g.price_usd_per_hour.community
        for g in real_registry().gpus
        if g.price_usd_per_hour.community is not None
    }
    assert r.placements
    for p in r.placements:
        assert p.gpu.id in priced
        assert p.usd_per_hour == pytest.approx(priced[p.gpu.id] * p.count)
    unpriced = [c for c in r.considered if c.gpu.id not in priced]
    assert unpriced and all(c.rejected and "COMMUNITY" in c.rejected for c in unpriced)


def test_secure_is_priced_at_the_secure_rate() -> None:
    r = resolve_one(sglang_model("priced", vram_gb=10))
    assert [(p.gpu.id, p.usd_per_hour) for p in r.placements][:2] == [
        ("AMP-24", 0.20),
        ("AMP-48", 0.40),
    ]


def test_an_unknown_size_is_a_problem_not_eight_gb() -> None:
    r = resolve(real_registry(), "glm-5.2")
    assert r.problem is not None and r.problem.rule == "no-recipe"
    assert "weights.vram_gb" in r.problem.message
    assert r.placements == ()


# ---- warnings --------------------------------------------------------------------------------


def test_an_unpinned_image_is_warned_about() -> None:
    images: dict[Runtime, Image] = real_images()
    images[Runtime.OLLAMA] = replace(images[Runtime.OLLAMA], tag="latest")
    floating = registry([ollama_model("o")], images=images)
    r = resolve(floating, "o")
    assert r.servable
    assert any("not pinned" in w and "python:latest" in w for w in r.warnings)
    pinned = resolve(registry([ollama_model("o")]), "o")
    assert not any("image" in w and "not pinned" in w for w in pinned.warnings)
    # Each registry's own images, whichever was resolved last.
    assert resolve(floating, "o").warnings == r.warnings


def test_unpinned_weights_are_warned_about() -> None:
    unpinned = sglang_model("drift", source={"hf_repo": "org/drift"})
    assert any("revision" in w for w in resolve_one(unpinned).warnings)
    assert not any("revision" in w for w in resolve_one(sglang_model("pinned")).warnings)


def test_resolution_keeps_every_considered_gpu() -> None:
    r = resolve_one(sglang_model("fp8", vram_gb=10, fmt="fp8"))
    assert {c.gpu.id for c in r.considered} == {g.id for g in GPUS}
    for c in r.considered:
        assert (c.rejected is None) == any(p.gpu.id == c.gpu.id for p in r.placements)


@pytest.mark.parametrize(
    ("model_id", "configured"),
    [
        pytest.param("qwen-3.6-27b", 16, id="sglang-16"),
        pytest.param("kimi-k2.6", 8, id="llamacpp-8-slots"),
        pytest.param("kimi-k2.7-code", 8, id="llamacpp-8-slots-32k"),
    ],
)
def test_fit_reports_sequences_held_against_the_configured_concurrency(
    model_id: str, configured: int
) -> None:
    r = resolve(real_registry(), model_id)
    assert r.placements
    for p in r.placements:
        assert p.fit.exact and p.fit.configured_sequences == configured
        assert p.fit.full_context_sequences is not None and p.fit.full_context_sequences >= 1
        if r.engine == "llamacpp":
            # Every slot is allocated at start: all of them must hold a full context.
            assert p.fit.full_context_sequences >= configured


def test_an_engine_without_an_image_is_a_problem() -> None:
    images = real_images()
    del images[Runtime.SGLANG]
    r = resolve(registry([sglang_model("imageless")], GPUS, images=images), "imageless")
    assert r.problem is not None and "images.yaml" in r.problem.message + r.problem.fix
    assert not r.servable


@pytest.mark.parametrize("runtime", ["sglang", "ollama"])
def test_an_image_whose_entrypoint_the_recipe_does_not_build_for_is_refused(runtime: str) -> None:
    from frutebox_infra.catalog.schema import Runtime
    from tests.factories import ollama_model, real_images, registry, sglang_model

    images = real_images()
    key = Runtime(runtime)
    flipped = "fixed-binary" if images[key].entrypoint == "none" else "none"
    images[key] = replace(images[key], entrypoint=flipped)
    candidate = sglang_model() if runtime == "sglang" else ollama_model()
    result = resolve(registry([candidate], images=images), candidate.id)
    assert result.problem is not None and result.problem.rule == "image-cannot-serve"
    assert flipped in result.problem.message
    assert resolve(registry([candidate]), candidate.id).servable


# ---- the bounds the real engines enforce, on the real catalog ---------------------------

H200_ID = "NVIDIA H200"
RTX_PRO_ID = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
A100_ID = "NVIDIA A100 80GB PCIe"
A40_ID = "NVIDIA A40"
A6000_ID = "NVIDIA RTX A6000"
A4000_ID = "NVIDIA RTX A4000"


def judged(model_id: str, gpu_id: str, count: int) -> tuple[bool, str | None, Any]:
    """One (gpu, count) of a real model judged by every rule the resolver applies."""
    reg = real_registry()
    r = resolve(reg, model_id, TOKEN)
    gpu_ = reg.gpu(gpu_id)
    assert r.model and r.recipe and r.serving and r.image and gpu_
    if r.serving.require_fp8 and not gpu_.fp8:
        return False, "fp8", None
    cannot_drive = image_gpu_problem(r.image, gpu_)
    if cannot_drive:
        return False, cannot_drive, None
    problem = r.recipe.count_problem(r.model, count)
    if problem:
        return False, problem, None
    fit = estimate(fit_request(r.model, r.recipe, r.serving, TOKEN, gpu_), gpu_, count)
    return fit.fits, fit.reason, fit


@pytest.mark.parametrize(
    ("model_id", "gpu_id", "count", "fits"),
    [
        # llama.cpp puts whole layers on each GPU: ~9.6 GB a layer of Kimi-K2.6.
        pytest.param("kimi-k2.6", H200_ID, 4, False, id="kimi-4xH200-16-layers-on-one"),
        pytest.param("kimi-k2.6", RTX_PRO_ID, 6, False, id="kimi-6xRTXPRO-11-layers-on-one"),
        pytest.param("kimi-k2.6", A100_ID, 8, True, id="kimi-8xA100-8-layers-each"),
        # vLLM's 0.9 cap and MoE activations, not raw VRAM, against 675 GB of FP8.
        pytest.param("mistral-large-3", RTX_PRO_ID, 8, False, id="mistral-8xRTXPRO"),
        pytest.param("mistral-large-3", H200_ID, 8, True, id="mistral-8xH200"),
        # apertus-70b at --max-model-len 32768: 4x A40 holds less than one sequence of KV.
        pytest.param("apertus-70b", A40_ID, 4, False, id="apertus-4xA40"),
        pytest.param("apertus-70b", A6000_ID, 4, True, id="apertus-4xA6000"),
        # The ComfyUI image's PyTorch (CUDA 12.8) has kernels for sm_86 and Blackwell sm_120.
        pytest.param("sdxl-1.0", RTX_PRO_ID, 1, True, id="comfyui-on-sm120"),
        pytest.param("sdxl-1.0", A4000_ID, 1, True, id="comfyui-on-sm86"),
    ],
)
def test_real_placements_on_both_sides_of_each_engine_bound(
    model_id: str, gpu_id: str, count: int, fits: bool
) -> None:
    ok, reason, _ = judged(model_id, gpu_id, count)
    assert ok is fits, reason
    assert (reason is None) is fits


def test_kimi_refusal_names_the_most_loaded_gpu() -> None:
    _, reason, fit = judged("kimi-k2.6", H200_ID, 4)
    assert fit.layers_on_worst_gpu == 16
    assert reason is not None and "holds 16 of 61 layers" in reason
    assert fit.weights_gb_per_gpu == pytest.approx(584 * 16 / 61)


def test_an_image_without_kernels_for_a_gpu_is_refused_naming_the_architecture() -> None:
    # The ComfyUI image as it was (CUDA 12.1, PyTorch 2.4 cu121: no Blackwell kernels).
    images = real_images()
    images[Runtime.COMFYUI] = replace(
        images[Runtime.COMFYUI], gpu_architectures=("sm_80", "sm_86", "sm_89", "sm_90")
    )
    sdxl = real_registry().model("sdxl-1.0")
    assert sdxl is not None
    reg = registry([sdxl], [real_gpu(RTX_PRO_ID), real_gpu(A4000_ID)], images=images)
    reason = image_gpu_problem(images[Runtime.COMFYUI], real_gpu(RTX_PRO_ID))
    assert reason is not None and "sm_120" in reason and "no kernels" in reason
    r = resolve(reg, "sdxl-1.0", gpu_id=RTX_PRO_ID)
    assert r.problem is not None and "sm_120" in r.problem.message
    assert resolve(reg, "sdxl-1.0", gpu_id=A4000_ID).servable


@pytest.mark.parametrize(
    "model_id",
    ["sdxl-1.0", "stable-audio-open-1.0", "qwen-image-20b", "ace-step-v1-3.5b", "wan-2.2"],
)
def test_every_comfyui_model_with_a_file_list_is_servable_on_the_pinned_image(
    model_id: str,
) -> None:
    r = resolve(real_registry(), model_id, TOKEN)
    assert r.servable, r.problem
    assert r.image is not None and r.image.repository == "pytorch/pytorch"


def test_apertus_is_never_placed_where_max_model_len_exceeds_its_kv() -> None:
    r = resolve(real_registry(), "apertus-70b")
    assert r.placements
    for p in r.placements:
        assert p.fit.exact
        assert p.fit.kv_tokens is not None and p.fit.kv_tokens >= 32768, p.label
    assert A40_ID not in {p.gpu.id for p in r.placements if p.count == 4}


def test_qwen3_coder_at_tp8_gets_expert_parallelism() -> None:
    r = resolve(real_registry(), "qwen3-coder")
    cheapest = r.placements[0]
    assert cheapest.count == 8
    assert flag(cheapest.pod.args, "--ep-size") == "8"


@pytest.mark.parametrize(
    ("armed", "current", "rule"),
    [
        ("stable-audio-open-1.5", "stable-audio-open-1.0", None),
        ("ace-step-1.5", "ace-step-v1-3.5b", None),
    ],
)
def test_former_ids_still_resolve_with_a_deprecation_warning(
    armed: str, current: str, rule: str | None
) -> None:
    r = resolve(real_registry(), armed, TOKEN)
    assert r.model is not None and r.model.id == current
    assert r.model_id == armed  # the pod keeps its name: no replacement for a rename
    assert (r.problem.rule if r.problem else None) == rule
    if rule is None:
        assert any(f"former id of {current}" in w for w in r.warnings)


def test_a_former_id_may_not_be_reused() -> None:
    with pytest.raises(ValueError, match="former id"):
        registry([model("new", former_ids=["old"]), model("old")])


def test_a_comfyui_file_from_its_own_unpinned_repo_is_warned_about() -> None:
    r = resolve(real_registry(), "stable-audio-open-1.0", TOKEN)
    assert any("t5_base.safetensors from google-t5/t5-base" in w for w in r.warnings)
    sdxl = resolve(real_registry(), "sdxl-1.0", TOKEN)
    assert not any("source.comfyui.files" in w for w in sdxl.warnings)


# ---- more GPUs, and pins ---------------------------------------------------------------------


def test_a_pinned_engine_without_its_facts_is_refused_with_the_gap() -> None:
    m = sglang_model("both", runtimes=["sglang", "llamacpp"])  # no source.gguf
    r = resolve(registry([m]), "both", engine="llamacpp")
    assert r.problem is not None and r.problem.rule == "no-recipe"
    assert "no source.gguf" in r.problem.message and "overrides.both.engine" in r.problem.fix
