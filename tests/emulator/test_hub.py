"""The emulated Hugging Face Hub and Ollama library: every registry model's weights, and the
refusals a pod gets, said as the seeder says them."""

from __future__ import annotations

import pytest

from frutebox_infra.emulator.errors import ApiProblem
from frutebox_infra.emulator.hub import Hub, full_tag
from frutebox_infra.seeding import seeder
from tests.factories import real_registry

HUB = Hub.from_registry(real_registry())
QWEN = "Qwen/Qwen3.6-27B-FP8"
QWEN_COMMIT = "c79abb8dddf284f31fd5a44fed917f261c72948b"


def fresh() -> Hub:
    return Hub.from_registry(real_registry())


def test_a_safetensors_repo_holds_the_models_weights_at_its_pinned_commit() -> None:
    commit, files = HUB.snapshot(QWEN, QWEN_COMMIT, token=False)
    assert commit == QWEN_COMMIT and HUB.snapshot(QWEN, "main", token=False)[0] == commit
    shards = {p: s for p, s in files.items() if p.endswith(".safetensors")}
    model = real_registry().model("qwen-3.6-27b")
    assert model is not None and model.weights.disk_gb is not None
    assert sum(shards.values()) == pytest.approx(model.weights.disk_gb * 1e9, rel=1e-6)
    assert "config.json" in files


def test_a_gguf_repo_splits_the_quant_under_50_gb_beside_another_quant() -> None:
    _, files = HUB.snapshot("unsloth/Kimi-K2.6-GGUF", "main", token=False)
    quant = [p for p in files if p.startswith("UD-Q4_K_XL/")]
    assert len(quant) == 12 and all(files[p] < 50e9 for p in quant)
    assert sum(files[p] for p in quant) == pytest.approx(584e9, rel=1e-6)
    chosen = seeder.gguf_files([{"path": p} for p in files], "UD-Q4_K_XL")
    assert sorted(f["path"] for f in chosen) == sorted(quant)  # the decoy quant is left out


def test_comfyui_files_and_ollama_tags_are_there_too() -> None:
    _, size = HUB.file(
        "stabilityai/stable-diffusion-xl-base-1.0", "main", "sd_xl_base_1.0.safetensors",
        token=False,
    )  # fmt: skip
    assert size == int(6.94e9)
    tag = HUB.ollama("qwen3:8b")
    assert tag.name == full_tag("qwen3:8b") == "library/qwen3:8b"
    assert sum(size for _, size in tag.blobs) == int(5.2e9) + 500


@pytest.mark.parametrize(
    ("call", "reason"),
    [
        pytest.param(lambda h: h.snapshot("no/such", "main", token=False),
                     "no/such was not found, or it is private or gated and no token was sent",
                     id="missing-repo-anonymous"),
        pytest.param(lambda h: h.snapshot("no/such", "main", token=True),
                     "no/such does not exist", id="missing-repo-with-token"),
        pytest.param(lambda h: h.snapshot(QWEN, "v9", token=True),
                     f"revision v9 does not exist in {QWEN}", id="missing-revision"),
        pytest.param(lambda h: h.file(QWEN, "main", "nope.bin", token=False),
                     f"nope.bin does not exist in {QWEN} at main", id="missing-file"),
        pytest.param(lambda h: h.snapshot("stabilityai/stable-audio-open-1.0", "main",
                                          token=False),
                     "is gated and no Hugging Face token was sent", id="gated-without-token"),
        pytest.param(lambda h: h.ollama("qwen3:999b"), "the Ollama library has no qwen3:999b",
                     id="missing-ollama-tag"),
    ],
)  # fmt: skip
def test_a_refusal_is_the_seeders_own_reason_and_fix(call: object, reason: str) -> None:
    with pytest.raises(seeder.Failed) as caught:
        call(HUB)  # type: ignore[operator]
    assert reason in caught.value.reason and caught.value.fix


def test_a_gated_repo_answers_a_token() -> None:
    commit, files = HUB.snapshot("stabilityai/stable-audio-open-1.0", "main", token=True)
    assert files and len(commit) == 40


def test_out_of_band_changes_remove_or_gate_a_source() -> None:
    hub = fresh()
    hub.change({"repo": QWEN, "removeFile": "config.json"})
    assert "config.json" not in hub.snapshot(QWEN, "main", token=False)[1]
    hub.change({"repo": QWEN, "gated": True})
    with pytest.raises(seeder.Failed, match="gated"):
        hub.snapshot(QWEN, "main", token=False)
    hub.change({"repo": QWEN, "remove": True})
    with pytest.raises(seeder.Failed, match="does not exist"):
        hub.snapshot(QWEN, "main", token=True)
    hub.change({"ollamaTag": "qwen3:8b"})
    with pytest.raises(seeder.Failed):
        hub.ollama("qwen3:8b")
    with pytest.raises(ApiProblem) as caught:
        hub.change({"repo": "never/was"})
    assert caught.value.status == 400
