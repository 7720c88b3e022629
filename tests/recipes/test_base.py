"""What every recipe shares: slot floors, the volume caches, versions, args that survive a shell
split, and the pod that reads weights a CPU pod seeded."""

from __future__ import annotations

import shlex
from dataclasses import replace

import pytest

from frutebox_infra.catalog.schema import Runtime
from frutebox_infra.planner.resolver import resolve
from frutebox_infra.recipes import RECIPES
from frutebox_infra.recipes.base import (
    VOLUME_PATH,
    ServeOptions,
    env_with_cache,
    slots_problem,
    static_slots,
    version_tuple,
)
from frutebox_infra.recipes.ollama import OLLAMA_HOME
from tests.factories import real_registry, words
from tests.recipes.conftest import BuildPod


def test_versions_compare_numerically() -> None:
    assert version_tuple("0.3.46") > version_tuple("0.3.9")
    assert version_tuple("0.8.0") == (0, 8, 0)


def test_every_cache_is_on_the_volume_and_extra_variables_win() -> None:
    for image in real_registry().images.values():
        env = env_with_cache(image)
        assert all(v.startswith(VOLUME_PATH) for v in env.values()), image.reference
    ollama = real_registry().images[Runtime.OLLAMA]
    assert env_with_cache(ollama, {"OLLAMA_MODELS": "/elsewhere"})["OLLAMA_MODELS"] == "/elsewhere"


@pytest.mark.parametrize(
    ("options", "slots"),
    [
        pytest.param(ServeOptions(), 8, id="engine-default"),
        pytest.param(ServeOptions(min_sequences=12), 12, id="raised-to-the-floor"),
        pytest.param(ServeOptions(concurrency=2, min_sequences=12), 2, id="a-pin-wins"),
    ],
)
def test_static_slots(options: ServeOptions, slots: int) -> None:
    assert static_slots(RECIPES[Runtime.LLAMACPP], options) == slots


def test_a_floor_above_a_pinned_slot_count_is_refused_naming_the_key() -> None:
    recipe = RECIPES[Runtime.OLLAMA]
    model = real_registry().model("qwen3-8b")
    assert model is not None
    assert slots_problem(recipe, model, ServeOptions(concurrency=4, min_sequences=4)) is None
    stack_wide = slots_problem(recipe, model, ServeOptions(concurrency=4, min_sequences=5))
    assert stack_wide is not None and stack_wide[0].startswith("minConcurrentSequences asks for 5")
    pinned = slots_problem(
        recipe, model, ServeOptions(concurrency=4, min_sequences=5, min_sequences_pinned=True)
    )
    assert pinned is not None and "overrides.qwen3-8b.minConcurrentSequences" in pinned[0]
    assert "raise frutebox-infra:overrides.qwen3-8b.concurrency to 5" in pinned[1]


@pytest.mark.parametrize(
    ("model_id", "runtime", "gpu", "offline", "loads_at_start"),
    [
        pytest.param(
            "qwen-3.6-27b",
            Runtime.SGLANG,
            "NVIDIA H200",
            {"HF_HUB_OFFLINE": "1"},
            True,
            id="sglang",
        ),
        pytest.param(
            "apertus-70b", Runtime.VLLM, "NVIDIA H200", {"HF_HUB_OFFLINE": "1"}, True, id="vllm"
        ),
        pytest.param(
            "kimi-k2.6",
            Runtime.LLAMACPP,
            "NVIDIA H200",
            {"LLAMA_ARG_OFFLINE": "1"},
            True,
            id="llama-cpp",
        ),
        pytest.param("qwen3-8b", Runtime.OLLAMA, "NVIDIA RTX A4000", {}, False, id="ollama"),
        pytest.param("sdxl-1.0", Runtime.COMFYUI, "NVIDIA RTX A4000", {}, False, id="comfyui"),
    ],
)
def test_a_seeded_pod_reads_offline_where_its_engine_would_download(
    build_pod: BuildPod,
    model_id: str,
    runtime: Runtime,
    gpu: str,
    offline: dict[str, str],
    loads_at_start: bool,
) -> None:
    recipe = RECIPES[runtime]
    count = 8 if runtime is Runtime.LLAMACPP else 1
    pod = build_pod(model_id, runtime, gpu, count, hf_token_configured=True)
    seeded = build_pod(model_id, runtime, gpu, count, seeded=True, hf_token_configured=True)
    assert recipe.loads_weights_at_start is loads_at_start
    assert dict(seeded.env) == {**pod.env, **offline}
    # --revision and -hf stay: they name what is read. Ollama's launch only checks its release
    # when seeded (the seeding pod placed it), and fetches it otherwise.
    checks = (
        (f" 1 {OLLAMA_HOME} ", f" 0 {OLLAMA_HOME} ") if runtime is Runtime.OLLAMA else ("", "")
    )
    assert seeded.args == pod.args.replace(*checks)
    assert seeded.words == tuple(word.replace(*checks) for word in pod.words)
    assert seeded.archives == pod.archives
    if offline:
        assert seeded.secret_env == ()  # offline, no token is ever sent
        # Every other field as the pod that downloads the weights has it.
        assert seeded == replace(pod, env={**pod.env, **offline}, secret_env=())
        assert type(seeded) is type(pod) and seeded.ports == pod.ports
    else:
        assert seeded == replace(pod, args=seeded.args, words=seeded.words)


@pytest.mark.parametrize(
    "counts",
    [
        pytest.param(range(1, 9), id="every-count"),
        pytest.param((3,), id="a-pinned-count-no-engine-may-take"),
        pytest.param((2,), id="a-pinned-count"),
        pytest.param((), id="none"),
    ],
)
@pytest.mark.parametrize("runtime", sorted(RECIPES))
def test_the_allowed_counts_are_those_without_a_count_problem(
    runtime: Runtime, counts: range | tuple[int, ...]
) -> None:
    recipe = RECIPES[runtime]
    models = [m for m in real_registry().models if recipe.missing(m) is None]
    assert models, runtime
    for m in models:
        expected = tuple(n for n in counts if recipe.count_problem(m, n) is None)
        assert recipe.allowed_counts(m, counts) == expected, m.id


@pytest.mark.parametrize("runtime", sorted(RECIPES))
def test_the_pod_notes_known_unrendered_are_the_notes_of_its_pods(runtime: Runtime) -> None:
    catalog = real_registry()
    options = ServeOptions(hf_token_configured=True)
    placed = [
        p
        for m in catalog.models
        if runtime in m.runtimes
        for p in resolve(catalog, m.id, options, engine=runtime).placements
    ]
    assert placed, runtime
    for p in placed:
        assert p.pod.notes == p.recipe.pod_notes(p.model), (p.model.id, p.label)


@pytest.mark.parametrize("runtime", sorted(RECIPES))
def test_a_pod_is_what_rendering_it_afresh_gives_on_every_gpu_type_and_count(
    runtime: Runtime,
) -> None:
    # Every catalog model of the engine on every GPU type and count, seeded or not, in turn:
    # whatever was asked before, the pod is the one its own placement renders.
    reg = real_registry()
    recipe = RECIPES[runtime]
    image = reg.images[runtime]
    models = [m for m in reg.models if runtime in m.runtimes and recipe.missing(m) is None]
    assert models, runtime
    for m in models:
        serving = recipe.serving(m, ServeOptions(hf_token_configured=True))
        for gpu in reg.gpus:
            for count in recipe.allowed_counts(m, range(1, 9)):
                pod = recipe.pod(m, image, gpu, count, serving)
                assert pod == recipe.render_pod(m, image, gpu, count, serving, False), m.id
                seeded = recipe.pod(m, image, gpu, count, serving, seeded=True)
                assert seeded == recipe.render_pod(m, image, gpu, count, serving, True), m.id


@pytest.mark.parametrize(
    ("model_id", "runtime", "gpu_id", "count"),
    [
        pytest.param("kimi-k2.7-code", Runtime.LLAMACPP, "NVIDIA A100 80GB PCIe", 8, id="llamacpp"),
        pytest.param("qwen3-235b-a22b", Runtime.SGLANG, "NVIDIA H200", 4, id="sglang"),
        pytest.param("pixtral", Runtime.VLLM, "NVIDIA H200", 8, id="vllm-pixtral"),
        pytest.param("mistral-large-3", Runtime.VLLM, "NVIDIA H200", 8, id="vllm-mistral-large-3"),
        pytest.param("apertus-70b", Runtime.VLLM, "NVIDIA H200", 8, id="vllm-apertus-70b"),
    ],
)
def test_args_survive_a_shell_split_round_trip(
    build_pod: BuildPod, model_id: str, runtime: Runtime, gpu_id: str, count: int
) -> None:
    args = build_pod(model_id, runtime, gpu_id, count).args
    assert shlex.join(words(args)) == args


@pytest.mark.parametrize("runtime", sorted(RECIPES))
def test_a_pod_s_words_are_what_splitting_its_args_gives(runtime: Runtime) -> None:
    # The launch check reads a pod's words instead of splitting its args: the two must agree.
    reg = real_registry()
    recipe = RECIPES[runtime]
    image = reg.images[runtime]
    models = [m for m in reg.models if runtime in m.runtimes and recipe.missing(m) is None]
    for m in models:
        serving = recipe.serving(m, ServeOptions(hf_token_configured=True))
        for count in recipe.allowed_counts(m, range(1, 9)):
            pod = recipe.pod(m, image, reg.gpus[0], count, serving)
            assert pod.words and shlex.split(pod.args) == list(pod.words), (m.id, count)


def test_pods_rendered_for_one_model_are_not_another_s() -> None:
    # The rendered pods live on the Serving: asked with another model (or image), it renders
    # that model's own instead of returning the first one's.
    reg = real_registry()
    recipe = RECIPES[Runtime.OLLAMA]
    image, gpu = reg.images[Runtime.OLLAMA], reg.gpus[0]
    first, second = reg.model("qwen3-8b"), reg.model("llama-3.2-1b")
    assert first is not None and second is not None
    serving = recipe.serving(first, ServeOptions())
    one = recipe.pod(first, image, gpu, 1, serving)
    other = recipe.pod(second, image, gpu, 1, serving)
    assert one.ollama_pulls != other.ollama_pulls
    moved = replace(image, port=image.port + 1)
    assert recipe.pod(second, moved, gpu, 1, serving).env != other.env
