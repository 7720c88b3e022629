"""The rehearsal's environment: pulumi on a throwaway backend, RunPod the loopback emulator."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest

from frutebox_infra.commands.rehearse import REHEARSAL_KEY, TIME_SCALE, rehearsal_env
from frutebox_infra.emulator.server import RunningEmulator
from frutebox_infra.runpod.command_io import Settings, scaled_waits
from frutebox_infra.runpod.lifecycle import Timeouts
from frutebox_infra.stack.endpoints import step_endpoint


def test_the_rehearsal_reaches_only_the_emulator_on_its_clock(
    emulator: RunningEmulator, tmp_path: Path
) -> None:
    env = rehearsal_env(emulator, tmp_path / "backend")
    endpoint = step_endpoint(env)
    assert (endpoint.api_url, endpoint.api_key) == (emulator.url, REHEARSAL_KEY)
    assert urlsplit(endpoint.api_url).hostname == "127.0.0.1"
    assert urlsplit(endpoint.proxy_template).hostname == "127.0.0.1"
    assert env["PULUMI_BACKEND_URL"] == f"file://{tmp_path / 'backend'}"
    settings = Settings.from_env(env)
    assert settings.poll_interval_s == Timeouts.poll_interval_s / TIME_SCALE
    assert all(env[k] == v for k, v in scaled_waits(TIME_SCALE).items())


def test_the_rehearsal_asks_no_private_pod(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json
    import subprocess

    from frutebox_infra.commands import rehearse
    from frutebox_infra.runpod.proxy import ProxyClient

    outputs = {
        "pods": {"m": {"podId": "p1", "url": "http://p1.runpod.internal:8080"}},
        "plan": {"exposure": "private", "models": [{"id": "m", "launch": None}]},
    }

    def run(words: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        name = words[3]
        text = json.dumps(outputs[name]) if name in outputs else "the-key"
        return subprocess.CompletedProcess(words, 0, text, "")

    def probe(*_: object, **__: object) -> int:
        raise AssertionError("a private pod's address was asked")

    monkeypatch.setattr(rehearse.subprocess, "run", run)
    monkeypatch.setattr(ProxyClient, "probe", probe)
    rehearse.print_reach("s", {rehearse.PROXY_TEMPLATE_ENV: "http://127.0.0.1:9/{podId}-{port}"})
    said = capsys.readouterr().out
    assert "m: private, not asked: only the account's own pods reach" in said
    assert "http://p1.runpod.internal:8080" in said and "the-key" not in said
