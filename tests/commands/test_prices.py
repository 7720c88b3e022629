"""`frutebox prices`: the comparison, and --write keeping gpus.yaml's layout and comments."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from frutebox_infra.catalog.files import REGISTRY_DIR, load_registry
from frutebox_infra.commands.cli import main
from frutebox_infra.commands.prices import rewrite_prices
from frutebox_infra.emulator.server import RunningEmulator
from tests.emulator_client import LOOPBACK

A4000, H200 = "NVIDIA RTX A4000", "NVIDIA H200"


def test_rewrite_changes_only_the_named_prices_and_sources() -> None:
    text = (REGISTRY_DIR / "gpus.yaml").read_text()
    out = rewrite_prices(text, {A4000: 0.19, H200: 4.99}, "RunPod catalog, Secure, 2026-11-30")
    changed = [(a, b) for a, b in zip(text.splitlines(), out.splitlines(), strict=True) if a != b]
    assert len(changed) == 3  # A4000's flow mapping; H200's block: secure and source lines
    assert "secure: 0.19, community: null" in changed[0][1]
    assert "secure: 4.99" in changed[1][1] and "2026-11-30" in changed[2][1]


def test_prices_write_updates_the_registry(
    emulator: RunningEmulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    registry = tmp_path / "registry"
    shutil.copytree(REGISTRY_DIR, registry)
    monkeypatch.setenv("RUNPOD_API_KEY", "k")
    monkeypatch.setenv("RUNPOD_API_URL", emulator.url)
    LOOPBACK.post(f"{emulator.url}/_emulator/prices", json={"gpuId": A4000, "secure": 0.21})
    assert main(["prices", "--registry-dir", str(registry)]) == 0
    out = capsys.readouterr()
    assert "+23.5%" in out.out and "1 price(s) differ" in out.err
    assert main(["prices", "--write", "--registry-dir", str(registry)]) == 0
    gpu = next(g for g in load_registry(registry).gpus if g.id == A4000)
    assert gpu.price_usd_per_hour.secure == 0.21
    assert gpu.price_usd_per_hour.source.startswith("RunPod catalog, Secure, 20")


def test_prices_without_a_key_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    assert main(["prices"]) == 2


def test_prices_json_is_the_comparison_on_stdout_and_notes_on_stderr(
    emulator: RunningEmulator, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RUNPOD_API_KEY", "k")
    monkeypatch.setenv("RUNPOD_API_URL", emulator.url)
    LOOPBACK.post(f"{emulator.url}/_emulator/prices", json={"gpuId": A4000, "secure": 0.21})
    assert main(["prices", "--format", "json", "--registry-dir", str(REGISTRY_DIR)]) == 0
    out = capsys.readouterr()
    data = json.loads(out.out)
    assert data["version"] == 1
    by_id = {g["id"]: g for g in data["gpus"]}
    assert by_id[A4000]["liveSecureUsdPerHour"] == 0.21 and by_id[A4000]["differs"] is True
    assert [g["id"] for g in data["gpus"] if g["differs"]] == [A4000]
    assert "1 price(s) differ" in out.err


def test_a_revoked_key_names_its_source_and_that_prices_reads(
    emulator: RunningEmulator, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RUNPOD_API_KEY", "k-revoked")
    monkeypatch.setenv("RUNPOD_API_URL", emulator.url)
    LOOPBACK.post(f"{emulator.url}/_emulator/keys", json={"key": "k-revoked", "scope": "revoked"})
    assert main(["prices", "--registry-dir", str(REGISTRY_DIR)]) == 1
    err = capsys.readouterr().err
    assert "does not accept the API key from environment variable RUNPOD_API_KEY" in err
    assert "For `frutebox prices` the key needs read access" in err and "k-revoked" not in err
