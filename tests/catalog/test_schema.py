"""The registry: the catalog holds the brief's facts in the files' own spellings; a bad file
names file, entry and field."""

from __future__ import annotations

import textwrap
from dataclasses import asdict
from pathlib import Path

import pytest
from pydantic import ValidationError

from frutebox_infra.catalog.files import RegistryFiles, load_registry, parse_registry
from frutebox_infra.catalog.schema import GgufSource, Image, Runtime, SpecDecode
from frutebox_infra.plumbing.errors import ConfigError
from frutebox_infra.plumbing.validation import validate
from tests.factories import files_with, real_files, real_registry

BRIEF_MODELS = (
    "qwen3-235b-a22b",
    "qwen-3.6-27b",
    "qwen3-coder",
    "kimi-k2.7-code",
    "kimi-k2.6",
    "qwen3-8b",
    "llama-3.2-1b",
    "mistral-large-3",
    "pixtral",
    "apertus-70b",
    "deepseek-v4.1-flash",
    "glm-5.2",
    "sdxl-1.0",
    "stable-audio-open-1.0",
    "qwen-image-20b",
    "ace-step-v1-3.5b",
    "wan-2.2",
    "flux.1-schnell",
    "sd-3.5-large",
)


@pytest.mark.parametrize("model_id", BRIEF_MODELS)
def test_every_named_model_is_in_the_catalog(model_id: str) -> None:
    assert real_registry().model(model_id) is not None


# (RunPod GPU type id, VRAM GB, native FP8) as the owner's brief states them.
BRIEF_GPUS = (
    ("NVIDIA RTX A4000", 16, False),
    ("NVIDIA RTX A5000", 24, False),
    ("NVIDIA A40", 48, False),
    ("NVIDIA RTX A6000", 48, False),
    ("NVIDIA A100 80GB PCIe", 80, False),
    ("NVIDIA A100-SXM4-80GB", 80, False),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", 96, True),
    ("NVIDIA H100 80GB HBM3", 80, True),
    ("NVIDIA H200", 141, True),
)


def test_gpu_ids_are_exactly_the_runpod_ids() -> None:
    assert {g.id for g in real_registry().gpus} == {gpu_id for gpu_id, _, _ in BRIEF_GPUS}


@pytest.mark.parametrize(
    ("gpu_id", "vram_gb", "fp8"), [pytest.param(*g, id=g[0]) for g in BRIEF_GPUS]
)
def test_gpu_memory_and_fp8_are_the_spec_facts(gpu_id: str, vram_gb: int, fp8: bool) -> None:
    gpu = real_registry().gpu(gpu_id)
    assert gpu is not None
    assert (gpu.vram_gb, gpu.fp8) == (vram_gb, fp8)
    # The driver reports marketed "GB" as GiB, less what ECC and the driver reserve.
    assert 0.9 * vram_gb * 1024 <= gpu.memory_mib <= 1.02 * vram_gb * 1024


@pytest.mark.parametrize(
    ("gpu_id", "usd"),
    [
        pytest.param("NVIDIA RTX A4000", 0.17, id="a4000"),
        pytest.param("NVIDIA RTX A5000", 0.26, id="a5000"),
        pytest.param("NVIDIA A40", 0.40, id="a40"),
        pytest.param("NVIDIA RTX A6000", 0.49, id="a6000"),
        pytest.param("NVIDIA A100 80GB PCIe", 1.19, id="a100-pcie"),
        pytest.param("NVIDIA A100-SXM4-80GB", 1.29, id="a100-sxm"),
        pytest.param("NVIDIA RTX PRO 6000 Blackwell Server Edition", 2.09, id="rtx-pro-6000"),
        pytest.param("NVIDIA H100 80GB HBM3", 2.69, id="h100"),
        pytest.param("NVIDIA H200", 4.59, id="h200"),
    ],
)
def test_the_price_the_brief_observed_is_recorded(gpu_id: str, usd: float) -> None:
    # The registry corrects the brief's H100 figure (it is the COMMUNITY rate, with a dated
    # source); every price the brief states must still be on record in one of the two clouds.
    price = real_registry().gpu(gpu_id).price_usd_per_hour  # type: ignore[union-attr]
    assert usd in (price.secure, price.community)
    assert price.secure is not None and price.secure >= usd


def test_at_most_eight_gpus_per_pod() -> None:
    reg = real_registry()
    assert reg.max_gpus_per_pod == 8
    assert all(g.max_count <= 8 for g in reg.gpus)


@pytest.mark.parametrize(
    ("model_id", "repo", "vram_gb", "context", "min_gpus", "parser"),
    [
        pytest.param(
            "qwen3-235b-a22b", "Qwen/Qwen3-235B-A22B-FP8", 239, 32768, 2, "qwen3", id="qwen3-235b"
        ),
        pytest.param(
            "qwen-3.6-27b", "Qwen/Qwen3.6-27B-FP8", 31, 32768, 1, "qwen3", id="qwen-3.6-27b"
        ),
    ],
)
def test_sglang_fp8_recipes_carry_the_seed_facts(
    model_id: str, repo: str, vram_gb: float, context: int, min_gpus: int, parser: str
) -> None:
    m = real_registry().model(model_id)
    assert m is not None and m.source is not None
    assert m.source.hf_repo == repo
    assert m.weights.format == "fp8"
    assert m.weights.vram_gb == vram_gb
    assert (m.context, m.min_gpus) == (context, min_gpus)
    assert m.reasoning_parser == {Runtime.SGLANG: parser}
    assert Runtime.SGLANG in m.runtimes


@pytest.mark.parametrize(
    ("model_id", "repo", "quant", "context"),
    [
        pytest.param(
            "kimi-k2.7-code",
            "unsloth/Kimi-K2.7-Code-GGUF",
            "UD-Q8_K_XL",
            32768,
            id="kimi-k2.7-code",
        ),
        pytest.param("kimi-k2.6", "unsloth/Kimi-K2.6-GGUF", "UD-Q4_K_XL", 16384, id="kimi-k2.6"),
        pytest.param(
            "qwen3-235b-a22b",
            "unsloth/Qwen3-235B-A22B-GGUF",
            "UD-Q4_K_XL",
            16384,
            id="qwen3-235b-gguf",
        ),
    ],
)
def test_gguf_sources_carry_the_seed_facts(
    model_id: str, repo: str, quant: str, context: int
) -> None:
    m = real_registry().model(model_id)
    assert m is not None and m.source is not None and m.source.gguf is not None
    gguf = m.source.gguf
    assert (gguf.repo, gguf.quant) == (repo, quant)
    assert (gguf.context or m.context) == context
    assert (gguf.vram_gb or m.weights.vram_gb) is not None


def test_kimi_quants_are_served_by_llamacpp_only() -> None:
    for model_id in ("kimi-k2.7-code", "kimi-k2.6"):
        m = real_registry().model(model_id)
        assert m is not None
        assert m.runtimes == (Runtime.LLAMACPP,)


@pytest.mark.parametrize(
    ("model_id", "tag"),
    [
        pytest.param("qwen3-8b", "qwen3:8b", id="qwen3"),
        pytest.param("llama-3.2-1b", "llama3.2:1b", id="llama"),
    ],
)
def test_ollama_models_have_their_library_tag(model_id: str, tag: str) -> None:
    m = real_registry().model(model_id)
    assert m is not None and m.source is not None
    assert m.source.ollama_tag == tag
    assert m.source.ollama_tag != model_id


@pytest.mark.parametrize("model_id", ["mistral-large-3", "pixtral", "apertus-70b"])
def test_eu_models_declare_only_vllm(model_id: str) -> None:
    m = real_registry().model(model_id)
    assert m is not None
    assert m.runtimes == (Runtime.VLLM,)


# The brief's ComfyUI recipes: (id, repo or None for the pinned original, revision, files, VRAM,
# disk)
COMFY = (
    (
        "sdxl-1.0",
        None,
        None,
        [("sd_xl_base_1.0.safetensors", "checkpoints", "sd_xl_base_1.0.safetensors")],
        10,
        6.94,
    ),
    (
        "stable-audio-open-1.0",
        None,
        None,
        [
            ("model.safetensors", "checkpoints", "stable_audio_open_1.0.safetensors"),
            ("model.safetensors", "text_encoders", "t5_base.safetensors"),
        ],
        6,
        5.74,
    ),
    (
        "qwen-image-20b",
        "Comfy-Org/Qwen-Image_ComfyUI",
        "1f12b17be14c89b026c51a91d67c32f84bb047bc",
        [
            (
                "split_files/diffusion_models/qwen_image_fp8_e4m3fn.safetensors",
                "diffusion_models",
                "qwen_image_fp8_e4m3fn.safetensors",
            ),
            (
                "split_files/text_encoders/qwen_2.5_vl_7b_fp8_scaled.safetensors",
                "text_encoders",
                "qwen_2.5_vl_7b_fp8_scaled.safetensors",
            ),
            ("split_files/vae/qwen_image_vae.safetensors", "vae", "qwen_image_vae.safetensors"),
        ],
        24,
        30.06,
    ),
    (
        "ace-step-v1-3.5b",
        "Comfy-Org/ACE-Step_ComfyUI_repackaged",
        "e39503e8265a02363b8c6d3fed3732944f4fc67f",
        [
            (
                "all_in_one/ace_step_v1_3.5b.safetensors",
                "checkpoints",
                "ace_step_v1_3.5b.safetensors",
            )
        ],
        8,
        7.70,
    ),
    (
        "wan-2.2",
        "Comfy-Org/Wan_2.2_ComfyUI_Repackaged",
        "ee6f4a40737a995bf5818954cfce6d59443b0f04",
        [
            (
                "split_files/diffusion_models/wan2.2_t2v_high_noise_14B_fp8_scaled.safetensors",
                "diffusion_models",
                "wan2.2_t2v_high_noise_14B_fp8_scaled.safetensors",
            ),
            (
                "split_files/diffusion_models/wan2.2_t2v_low_noise_14B_fp8_scaled.safetensors",
                "diffusion_models",
                "wan2.2_t2v_low_noise_14B_fp8_scaled.safetensors",
            ),
            (
                "split_files/text_encoders/umt5_xxl_fp8_e4m3fn_scaled.safetensors",
                "text_encoders",
                "umt5_xxl_fp8_e4m3fn_scaled.safetensors",
            ),
            # The A14B experts decode with the Wan 2.1 VAE; wan2.2_vae is the 5B model's.
            ("split_files/vae/wan_2.1_vae.safetensors", "vae", "wan_2.1_vae.safetensors"),
        ],
        24,
        35.57,
    ),
)


@pytest.mark.parametrize(
    ("model_id", "repo", "revision", "files", "vram_gb", "disk_gb"),
    [pytest.param(*c, id=c[0]) for c in COMFY],
)
def test_comfyui_recipes_are_the_checked_file_lists(
    model_id: str,
    repo: str | None,
    revision: str | None,
    files: list[tuple[str, str, str]],
    vram_gb: float,
    disk_gb: float,
) -> None:
    m = real_registry().model(model_id)
    assert m is not None and m.source is not None and m.source.comfyui is not None
    recipe = m.source.comfyui
    assert recipe.repo == repo
    if repo is not None:
        assert recipe.revision == revision
        # A repackaging is recorded beside the pinned original, never in its place.
        assert m.source.hf_repo is not None and m.source.hf_repo != repo
    assert [(f.path, f.folder, f.stored_name) for f in recipe.files] == files
    assert (m.weights.vram_gb, m.weights.disk_gb) == (vram_gb, disk_gb)


def test_stable_audio_is_gated() -> None:
    m = real_registry().model("stable-audio-open-1.0")
    assert m is not None and m.source is not None and m.source.gated


@pytest.mark.parametrize(
    ("model_id", "layers", "kv_lora_rank", "rope"),
    [
        pytest.param("kimi-k2.7-code", 61, 512, 64, id="k2.7"),
        pytest.param("kimi-k2.6", 61, 512, 64, id="k2.6"),
    ],
)
def test_kimi_architecture_is_mla(model_id: str, layers: int, kv_lora_rank: int, rope: int) -> None:
    arch = real_registry().model(model_id).architecture  # type: ignore[union-attr]
    assert arch is not None and arch.attention == "mla"
    assert (arch.layers, arch.kv_lora_rank, arch.qk_rope_head_dim) == (layers, kv_lora_rank, rope)


def test_qwen36_architecture_is_hybrid_16_of_64() -> None:
    arch = real_registry().model("qwen-3.6-27b").architecture  # type: ignore[union-attr]
    assert arch is not None and arch.attention == "hybrid"
    assert (arch.layers, arch.full_attention_layers, arch.kv_heads, arch.head_dim) == (
        64,
        16,
        4,
        256,
    )
    assert arch.state_bytes_per_sequence


@pytest.mark.parametrize("model_id", ["qwen3-235b-a22b", "qwen3-8b", "qwen3-coder"])
def test_qwen3_head_dim_comes_from_config_not_hidden_over_heads(model_id: str) -> None:
    arch = real_registry().model(model_id).architecture  # type: ignore[union-attr]
    assert arch is not None and arch.head_dim == 128


def test_images_are_the_spec_repositories_and_pinned() -> None:
    images = real_registry().images
    assert images[Runtime.SGLANG].repository == "lmsysorg/sglang"
    assert images[Runtime.LLAMACPP].repository == "ghcr.io/ggml-org/llama.cpp"
    # Ollama runs from its pinned release archive in the official slim Python image (no
    # ENTRYPOINT), so that its launch can start the gateway (issue 36): not ollama/ollama,
    # whose ENTRYPOINT is /bin/ollama.
    ollama = images[Runtime.OLLAMA]
    assert ollama.repository == "python" and ollama.entrypoint == "none"
    assert ollama.engine_archive is not None and ollama.engine_version == "0.35.1"
    assert f"/v{ollama.engine_version}/" in ollama.engine_archive.url
    # ComfyUI runs on the official PyTorch image; the recipe installs ComfyUI itself.
    assert images[Runtime.COMFYUI].repository == "pytorch/pytorch"
    assert (images[Runtime.SGLANG].port, images[Runtime.LLAMACPP].port) == (8080, 8080)
    assert images[Runtime.OLLAMA].port == 11434
    assert (images[Runtime.COMFYUI].port, images[Runtime.COMFYUI].health_path) == (
        8188,
        "/system_stats",
    )
    for image in images.values():
        assert image.tag and image.tag != "latest" and image.pinned, image.reference


# ---- bad files -------------------------------------------------------------------------------

GOOD_MODEL = """\
  - id: good
    name: Good
    capability: chat
    runtimes: [sglang]
"""


def _models(body: str) -> str:
    return "models:\n" + GOOD_MODEL + textwrap.indent(textwrap.dedent(body), "  ")


BAD_MODELS = (
    pytest.param(
        """\
        - id: bad
          name: Bad
          capability: chat
          weights: {vram_gb: lots}
        """,
        ("models.yaml", "'bad'", "weights.vram_gb"),
        id="wrong-type",
    ),
    pytest.param(
        """\
        - id: bad
          name: Bad
          capability: chat
          contxt: 4096
        """,
        ("models.yaml", "'bad'", "contxt"),
        id="unknown-key",
    ),
    pytest.param(
        """\
        - id: bad
          name: Bad
          capability: chat
          architecture: {attention: mla, layers: 61, attention_heads: 64, kv_lora_rank: 512,
                         source: x}
        """,
        ("models.yaml", "'bad'", "architecture", "qk_rope_head_dim"),
        id="mla-missing-rope",
    ),
    pytest.param(
        """\
        - id: bad
          name: Bad
          capability: chat
          architecture: {attention: hybrid, layers: 64, attention_heads: 24, kv_heads: 4,
                         head_dim: 256, source: x}
        """,
        ("models.yaml", "'bad'", "architecture", "full_attention_layers"),
        id="hybrid-missing-full-layers",
    ),
    pytest.param(
        """\
        - id: bad
          name: Bad
          capability: chat
          architecture: {attention: gqa, layers: 32, attention_heads: 32, kv_heads: 8, source: x}
        """,
        ("models.yaml", "'bad'", "architecture", "head_dim"),
        id="gqa-missing-head-dim",
    ),
    pytest.param(
        """\
        - id: bad
          name: Bad
          capability: chat
          runtimes: [sglang, triton]
        """,
        ("models.yaml", "'bad'", "runtimes"),
        id="unknown-runtime",
    ),
    pytest.param(
        """\
        - id: good
          name: Good again
          capability: chat
        """,
        ("models.yaml", "good", "duplicate"),
        id="duplicate-id",
    ),
)


@pytest.mark.parametrize(("body", "expected"), BAD_MODELS)
def test_a_bad_model_names_file_model_and_field(body: str, expected: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError) as err:
        parse_registry(files_with(models=_models(body)))
    message = str(err.value)
    for part in expected:
        assert part in message, f"{part!r} missing from: {message}"


def test_the_good_model_alone_is_valid() -> None:
    # The control for the table above: only the added entry makes it fail.
    registry = parse_registry(files_with(models="models:\n" + GOOD_MODEL))
    assert [m.id for m in registry.models] == ["good"]


def test_the_enums_spell_the_registry_values() -> None:
    assert Runtime("llamacpp") is Runtime.LLAMACPP and str(Runtime.SGLANG) == "sglang"
    assert SpecDecode("p-eagle") is SpecDecode.P_EAGLE
    with pytest.raises(ValueError):
        Runtime("llama.cpp")


def test_a_bad_gpu_names_gpus_yaml_the_gpu_and_the_field() -> None:
    gpus = """\
max_gpus_per_pod: 8
gpus:
  - id: NVIDIA H200
    name: H200 SXM
    vram_gb: lots
    memory_mib: 143771
    fp8: true
    max_count: 8
    price_usd_per_hour: {secure: 4.59, source: x}
"""
    with pytest.raises(ConfigError) as err:
        parse_registry(files_with(gpus=gpus))
    message = str(err.value)
    for part in ("gpus.yaml", "'NVIDIA H200'", "vram_gb"):
        assert part in message, message


def test_a_duplicate_gpu_id_names_gpus_yaml() -> None:
    entry = """\
  - id: NVIDIA H200
    name: H200 SXM
    vram_gb: 141
    memory_mib: 143771
    fp8: true
    max_count: 8
    price_usd_per_hour: {secure: 4.59, source: x}
"""
    with pytest.raises(ConfigError) as err:
        parse_registry(files_with(gpus="max_gpus_per_pod: 8\ngpus:\n" + entry + entry))
    message = str(err.value)
    assert "NVIDIA H200" in message and "duplicate" in message
    assert "gpus.yaml" in message, f"a duplicate GPU is blamed on the wrong file: {message}"


def test_a_bad_image_names_images_yaml_the_engine_and_the_field() -> None:
    text = real_files().texts["images.yaml"].replace("port: 8080", "port: eighty", 1)
    with pytest.raises(ConfigError) as err:
        parse_registry(files_with(images=text))
    message = str(err.value)
    for part in ("images.yaml", "sglang", "port"):
        assert part in message, message


def test_too_many_gpus_per_pod_is_refused() -> None:
    text = real_files().texts["gpus.yaml"].replace("max_gpus_per_pod: 8", "max_gpus_per_pod: 9")
    with pytest.raises(ConfigError) as err:
        parse_registry(files_with(gpus=text))
    assert "gpus.yaml" in str(err.value) and "max_gpus_per_pod" in str(err.value)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        pytest.param("models:\n  - id: a\n    name: b\n    notes: x: y\n", 4, id="colon"),
        pytest.param("models:\n  - id: a\n\tname: tab\n", 3, id="tab"),
    ],
)
def test_malformed_yaml_names_file_and_line(text: str, line: int) -> None:
    with pytest.raises(ConfigError) as err:
        parse_registry(files_with(models=text))
    message = str(err.value)
    assert "models.yaml" in message
    assert f"line {line}" in message, message


def test_a_file_that_is_not_a_mapping_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"datacenters\.yaml"):
        parse_registry(files_with(datacenters="- EU-RO-1\n"))


def test_a_missing_section_names_it() -> None:
    with pytest.raises(ConfigError, match="gpus"):
        parse_registry(files_with(gpus="max_gpus_per_pod: 8\n"))


# ---- every number bounded, with its unit; errors name file, entry, field and fix -----------

BROKEN_FACTS = [
    pytest.param(
        "gpus", "vram_gb: 16\n", "vram_gb: 16376\n", "'vram_gb' = 16376", id="vram-in-mib"
    ),
    pytest.param("gpus", "vram_gb: 24\n", "vram_gb: 200\n", "disagree", id="vram-vs-driver"),
    pytest.param("gpus", "fp8: false", "fp8: 0", "fp8", id="fp8-a-number"),
    pytest.param("gpus", "secure: 0.17", "secure: 1e9", "USD per GPU-hour", id="absurd-price"),
    pytest.param("models", "context: 32768", "context: true", "'context'", id="context-true"),
    pytest.param("models", "context: 32768", "context: 99999999", "tokens", id="context-huge"),
    pytest.param(
        "gpus", "memory_bandwidth_gb_s: 448", "memory_bandwidth_gb_s: 0", "GB/s", id="no-bandwidth"
    ),
    pytest.param(
        "gpus", "bf16_dense_tflops: 76.7", "bf16_dense_tflops: 1e9", "TFLOPS", id="absurd-tflops"
    ),
    pytest.param(
        "gpus",
        "      fp8_dense_tflops: 1007.6\n",
        "",
        "speed.fp8_dense_tflops is missing",
        id="fp8-gpu-without-fp8-figure",
    ),
    pytest.param(
        "models",
        "total_billions: 235\n",
        "total_billions: 23.5\n",
        "disagree with the architecture",
        id="moe-total-vs-experts",
    ),
    pytest.param(
        "speed",
        "bandwidth_efficiency: 0.818",
        "bandwidth_efficiency: 1.5",
        "speed.engines.llamacpp.bandwidth_efficiency",
        id="efficiency-above-one",
    ),
    pytest.param(
        "speed",
        "collective_latency_us: 34.5",
        "collective_latency_us: -1",
        "µs",
        id="negative-latency",
    ),
    pytest.param(
        "datacenters", "max_gb: 4096", "max_gb: 5", "max_gb 5 GB is below min_gb", id="max-lt-min"
    ),
    pytest.param(
        "datacenters", "min_gb: 10", "min_gb: -1", "network_volume.min_gb", id="volume-field"
    ),
    pytest.param(
        "datacenters",
        "usd_per_gb_month: 0.07",
        "usd_per_gb_month: 70",
        "USD per GB-month",
        id="volume-price",
    ),
]


@pytest.mark.parametrize(("stem", "old", "new", "words"), BROKEN_FACTS)
def test_a_wrong_fact_is_named_with_its_field_unit_and_fix(
    stem: str, old: str, new: str, words: str
) -> None:
    text = real_files().texts[f"{stem}.yaml"]
    assert old in text
    with pytest.raises(ConfigError) as err:
        parse_registry(files_with(**{stem: text.replace(old, new, 1)}))
    message = str(err.value)
    assert f"registry/{stem}.yaml" in message and words in message and "Fix:" in message


@pytest.mark.parametrize(
    ("data", "words"),
    [
        pytest.param("gpus: [caf\xe9]\n".encode("latin-1"), "byte 0xE9", id="latin-1"),
        pytest.param("gpus: []\n".encode("utf-16"), "UTF-16", id="utf-16"),
        pytest.param(b"gpus: " + b"[" * 5000 + b"]" * 5000, "not valid YAML", id="deep"),
        pytest.param(b"gpus: !!set {a}", "!!set", id="tag"),
    ],
)
def test_a_registry_file_that_cannot_be_read_is_named(
    tmp_path: Path, data: bytes, words: str
) -> None:
    for name, text in real_files().texts.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "gpus.yaml").write_bytes(data)
    with pytest.raises(ConfigError) as err:
        load_registry(tmp_path)
    assert "gpus.yaml" in str(err.value) and words in str(err.value)


def test_every_real_gpu_and_image_records_its_architectures() -> None:
    reg = real_registry()
    assert all(g.architecture for g in reg.gpus)
    for runtime, image in reg.images.items():
        assert image.gpu_architectures, runtime
        assert image.gpu_architectures_source, runtime


def test_every_comfyui_recipe_declares_the_comfyui_that_added_its_loader() -> None:
    for m in real_registry().models:
        comfy = m.source.comfyui if m.source else None
        if comfy is not None:
            assert comfy.min_comfyui is not None, m.id


@pytest.mark.parametrize(
    ("archs", "ok"),
    [pytest.param(["sm_90", "sm_120"], True, id="sm-names"), pytest.param(["hopper"], False)],
)
def test_image_architectures_are_compute_capabilities(archs: list[str], ok: bool) -> None:
    image = asdict(real_registry().images[Runtime.SGLANG])
    image["gpu_architectures"] = archs
    if ok:
        assert validate(Image, image).gpu_architectures == tuple(archs)
    else:
        with pytest.raises(ValidationError, match="compute capability"):
            validate(Image, image)


def test_a_registry_from_before_speed_facts_still_loads_without_them() -> None:
    # A git ref older than registry/speed.yaml: the plan of that side has no speed estimates.
    texts = {k: v for k, v in real_files().texts.items() if k != "speed.yaml"}
    assert parse_registry(RegistryFiles(texts=texts)).speed is None
    assert real_registry().speed is not None


def test_every_real_gpu_records_its_speed_facts() -> None:
    for g in real_registry().gpus:
        assert g.speed is not None and g.speed.datasheet, g.id
        assert (g.speed.fp8_dense_tflops is not None) == g.fp8, g.id


@pytest.mark.parametrize(
    ("kind", "gpu_ids"),
    [
        pytest.param(
            "nvlink",
            {"NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA H200"},
            id="sxm-parts-on-nvlink",
        ),
        pytest.param(
            "pcie",
            {
                "NVIDIA RTX A4000",
                "NVIDIA RTX A5000",
                "NVIDIA A40",
                "NVIDIA RTX A6000",
                "NVIDIA A100 80GB PCIe",
                "NVIDIA RTX PRO 6000 Blackwell Server Edition",
            },
            id="pcie-cards-on-pcie",
        ),
    ],
)
def test_a_pods_gpus_meet_over_nvlink_only_on_sxm_parts(kind: str, gpu_ids: set[str]) -> None:
    reg = real_registry()
    assert {g.id for g in reg.gpus if g.speed and g.speed.interconnect.kind == kind} == gpu_ids


# ---- CPU flavors and the seeder's image ------------------------------------------------------


def test_cpu_flavors_are_priced_per_vcpu_for_secure_cloud() -> None:
    flavors = {f.id: f for f in real_registry().cpu_flavors}

    assert set(flavors) == {"cpu3c", "cpu3g"}
    assert flavors["cpu3c"].usd_per_hour(2) == 0.06
    assert flavors["cpu3g"].ram_gb_per_vcpu == 4


def test_the_seeder_image_is_pinned_and_needs_no_cuda() -> None:
    image = real_registry().seeder_image

    assert image is not None and image.reference == "python:3.12.8-slim-bookworm"
    assert image.entrypoint == "none"


def _with_flavor(old: str, new: str) -> str:
    text = real_files().texts["gpus.yaml"]
    assert old in text, old
    return text.replace(old, new, 1)


@pytest.mark.parametrize(
    ("old", "new", "parts"),
    [
        pytest.param("vcpu_min: 2\n    vcpu_max: 32\n    ram_gb_per_vcpu: 2",
                     "vcpu_min: 3\n    vcpu_max: 32\n    ram_gb_per_vcpu: 2",
                     ("cpu flavor 'cpu3c'", "powers of two"), id="vcpus-not-a-power-of-two"),
        pytest.param("vcpu_min: 2\n    vcpu_max: 32\n    ram_gb_per_vcpu: 2",
                     "vcpu_min: 1\n    vcpu_max: 32\n    ram_gb_per_vcpu: 2",
                     ("cpu flavor 'cpu3c'", "vcpu_min", "vCPUs"), id="one-vcpu"),
        pytest.param("usd_per_vcpu_hour: 0.03", "usd_per_vcpu_hour: 30",
                     ("cpu flavor 'cpu3c'", "usd_per_vcpu_hour", "USD per vCPU-hour"),
                     id="price-above-bound"),
        pytest.param("  - id: cpu3g", "  - id: cpu3c", ("duplicate", "cpu3c"), id="duplicate"),
        pytest.param("    disk_gb_per_vcpu: 10\n    usd_per_vcpu_hour: 0.03",
                     "    disk_gb_per_vcpu: 10\n    usd_per_vcpu_hour: 0.03\n"
                     "    data_centers: [EU-RO-1, XX-NOWHERE-9]",
                     ("XX-NOWHERE-9", "datacenters.yaml"), id="unknown-data-centre"),
    ],
)  # fmt: skip
def test_a_bad_cpu_flavor_names_gpus_yaml_the_flavor_and_the_field(
    old: str, new: str, parts: tuple[str, ...]
) -> None:
    with pytest.raises(ConfigError) as err:
        parse_registry(files_with(gpus=_with_flavor(old, new)))
    message = str(err.value)
    for part in ("gpus.yaml", *parts):
        assert part in message, message


def test_a_bad_seeder_image_is_named_as_images_yaml_seeder() -> None:
    text = real_files().texts["images.yaml"].replace("tag: 3.12.8-slim-bookworm", "tag: ''")
    with pytest.raises(ConfigError) as err:
        parse_registry(files_with(images=text))
    assert "images.yaml" in str(err.value) and "'seeder.tag'" in str(err.value)


def test_a_registry_from_before_seeding_still_parses() -> None:
    """An old git ref (frutebox diff --base) has neither section."""
    gpus = real_files().texts["gpus.yaml"].split("\n# CPU pod flavors")[0]
    images = real_files().texts["images.yaml"].split("\n# The seeder:")[0]

    registry = parse_registry(files_with(gpus=gpus, images=images))

    assert registry.cpu_flavors == () and registry.seeder_image is None
    assert registry.models == real_registry().models


def test_a_comfyui_recipe_needs_a_repo_somewhere() -> None:
    text = (
        real_files()
        .texts["models.yaml"]
        .replace("      hf_repo: stabilityai/stable-diffusion-xl-base-1.0\n", "", 1)
    )
    with pytest.raises(ConfigError, match="its files come from nowhere"):
        parse_registry(files_with(models=text))


# ---- reasoning parsers: per engine, checked against registry/engine_options/ -------------------


def models_with_parser(parser: str) -> str:
    text = real_files().texts["models.yaml"]
    old = "    reasoning_parser: {sglang: qwen3}\n"
    assert old in text
    return text.replace(old, f"    reasoning_parser: {parser}\n", 1)


@pytest.mark.parametrize(
    ("parser", "words"),
    [
        pytest.param("qwen3", "say which engine takes 'qwen3'", id="one-value-for-both"),
        pytest.param(
            "{sglang: deepseek_v41}", "'deepseek_v41' is not a parser", id="vllm-spelling"
        ),
        pytest.param(
            "{vllm: deepseek-v41}", "'deepseek-v41' is not a parser", id="sglang-spelling"
        ),
        pytest.param("{llamacpp: kimi_k2}", "has no --reasoning-parser flag", id="no-such-flag"),
    ],
)
def test_a_reasoning_parser_is_per_engine_and_one_the_engine_knows(parser: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_registry(files_with(models=models_with_parser(parser)))
    message = str(err.value)
    assert "models.yaml" in message and words in message and "Fix:" in message


@pytest.mark.parametrize("parser", ["{sglang: qwen3, vllm: qwen3}", "{sglang: deepseek-v41}", "{}"])
def test_parsers_the_engines_know_are_taken(parser: str) -> None:
    reg = parse_registry(files_with(models=models_with_parser(parser)))
    assert reg.model("qwen3-235b-a22b") is not None


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        pytest.param(None, True, id="one-precision"),
        pytest.param(0.0, False, id="zero"),
        pytest.param(1.0625, True, id="q8_0"),
        pytest.param(4.0, True, id="fp32-at-most"),
        pytest.param(4.01, False, id="above-fp32"),
    ],
)
def test_a_gguf_quant_states_its_shared_weights_precision(value: float | None, ok: bool) -> None:
    gguf: dict[str, object] = {"repo": "org/m-GGUF", "quant": "Q", "vram_gb": 12}
    if value is not None:
        gguf["non_expert_bytes_per_weight"] = value
    if ok:
        assert validate(GgufSource, gguf).non_expert_bytes_per_weight == value
    else:
        with pytest.raises(ValidationError):
            validate(GgufSource, gguf)
