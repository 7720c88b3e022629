"""The emulator command: loopback only, its URL first on stdout, state kept across restarts."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from frutebox_infra.emulator.catalog import Catalog
from frutebox_infra.emulator.clock import ManualClock
from frutebox_infra.emulator.realism import Realism
from frutebox_infra.emulator.server import UsageError, build, is_loopback, main, start
from tests.emulator_client import LOOPBACK
from tests.factories import ROOT

AUTH = {"Authorization": "Bearer t"}


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("192.168.1.2", False),
        ("example.org", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_non_loopback_host_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--host", "0.0.0.0", "--port", "0"]) == 2
    assert "loopback" in capsys.readouterr().err
    with pytest.raises(UsageError):
        build(host="10.0.0.1")


def test_a_bad_stock_spec_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--stock", "NVIDIA A40=many"]) == 2
    assert "GPU_ID=N" in capsys.readouterr().err


def test_state_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    first = start(
        state_file=path,
        catalog=Catalog.builtin(),
        realism=Realism.fast(),
        stock={("NVIDIA A40", "EU-RO-1"): 3},
    )
    created = LOOPBACK.post(
        f"{first.url}/v2/pods",
        headers=AUTH,
        json={
            "name": "p",
            "image": "i",
            "gpu": {"id": "NVIDIA A40", "count": 2},
        },
    ).json()
    first.stop()
    assert json.loads(path.read_text())["pods"][0]["id"] == created["id"]
    second = start(state_file=path, catalog=Catalog.builtin(), realism=Realism.fast())
    try:
        pods = LOOPBACK.get(f"{second.url}/v2/pods", headers=AUTH).json()["pods"]
        assert [p["id"] for p in pods] == [created["id"]]
        assert second.app.account.stock[("NVIDIA A40", "EU-RO-1")] == 1
    finally:
        second.stop()


def test_a_corrupt_state_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text('{"pods": 1}')
    with pytest.raises(UsageError, match="not an emulator state file"):
        build(state_file=path, catalog=Catalog.builtin(), realism=Realism.fast())


def test_the_module_prints_its_url_first_and_serves_until_terminated(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "frutebox_infra.emulator",
            "--port",
            "0",
            "--stock",
            "NVIDIA A40=1@EU-RO-1",
            "--proxy-base",
            "http://127.0.0.1:1/base",
            "--kind",
            "fast",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        pods = LOOPBACK.get(f"{url}/v2/pods", headers=AUTH, timeout=5)
        assert pods.json() == {"pods": []}
        state = LOOPBACK.get(f"{url}/_emulator/state", timeout=5).json()
        assert state["proxyUrlTemplate"] == "http://127.0.0.1:1/base/proxy/{podId}-{port}"
        assert {(c["gpuId"], c["dataCenterId"]) for c in state["stock"] if c["available"]} == {
            ("NVIDIA A40", "EU-RO-1")
        }
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=10)
        stderr = process.stderr.read() if process.stderr else ""
    assert code == 0, stderr
    assert "RUNPOD_PROXY_URL_TEMPLATE" in stderr


def test_the_server_runs_on_the_clock_it_is_given(tmp_path: Path) -> None:
    clock = ManualClock()
    path = tmp_path / "state.json"
    realism = Realism.realistic(time_scale=10.0)
    first = start(state_file=path, catalog=Catalog.builtin(), realism=realism, clock=clock)
    try:
        body = {"name": "p", "image": "i", "gpu": {"id": "NVIDIA A40", "count": 1}}
        created = LOOPBACK.post(f"{first.url}/v2/pods", headers=AUTH, json=body).json()
        assert created["createdAt"] == "2026-11-30T12:00:00Z"
        assert LOOPBACK.get(f"{first.url}/v2/pods", headers=AUTH).json()["pods"] == []
    finally:
        first.stop()
    clock.advance(0.5)  # the 5 s listing lag, at x10
    second = start(state_file=path, catalog=Catalog.builtin(), realism=realism, clock=clock)
    try:
        pods = LOOPBACK.get(f"{second.url}/v2/pods", headers=AUTH).json()["pods"]
        assert [p["id"] for p in pods] == [created["id"]]
    finally:
        second.stop()


def test_the_realistic_account_knows_the_seeder_image_and_collides_on_seed_names() -> None:
    from frutebox_infra.deploy.requests import seed_pod_name
    from frutebox_infra.emulator.server import realistic_for
    from tests.factories import real_registry

    registry = real_registry()
    realism = realistic_for(registry)
    assert registry.seeder_image is not None
    assert registry.seeder_image.reference in (realism.known_images or ())
    assert seed_pod_name("prod", "kimi-k2.6") in realism.foreign_pod_names
