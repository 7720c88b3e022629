"""The gateway's start as a pod's launch runs it, run here by bash with the real gateway: the
release is fetched (from a loopback stand-in of its URL) and checked against its SHA-512, the
gateway serves before the engine's exec, and every failure exits before the engine starts."""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from frutebox_infra.catalog.schema import Runtime
from frutebox_infra.recipes.gateway import KEY_ENV, GatewaySetup, gateway_env, gateway_start
from tests.factories import real_registry
from tests.recipes.gateway_process import free_port as any_free_port
from tests.recipes.gateway_process import gateway_binary

KEY = "launch-" + "k" * 40
ENGINE_LINE = "exec echo the-engine-starts"


def free_port() -> int:
    """A free port whose engine port (+10000, recipes/gateway.py) is a port too."""
    while (port := any_free_port()) + 10_000 > 65_535:
        pass
    return port


@contextmanager
def release_server(directory: Path) -> Iterator[str]:
    """The release URL's stand-in: files of `directory` on loopback."""

    class Quiet(SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(directory), **kwargs)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The release archive as published: the program as the member `caddy`."""
    path = tmp_path_factory.mktemp("release") / "caddy.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        tar.add(gateway_binary(), arcname="caddy")
    return path


def setup_for(archive: Path, url: str, tmp: Path, *, sha512: str | None = None) -> GatewaySetup:
    registry = real_registry()
    assert registry.gateway is not None
    release = replace(
        registry.gateway,
        url=f"{url}/{archive.name}",
        sha512=sha512 or hashlib.sha512(archive.read_bytes()).hexdigest(),
    )
    return GatewaySetup(release=release, routes=registry.engine_routes[Runtime.SGLANG],
                        volume_dir=str(tmp / "volume"), run_dir=str(tmp / "run"))  # fmt: skip


def run_launch(
    setup: GatewaySetup, port: int, *, key: str = KEY, fetch: bool = True
) -> subprocess.CompletedProcess[str]:
    script = "\n".join(
        ["set -eo pipefail", *gateway_start(setup, python=sys.executable, fetch=fetch),
         ENGINE_LINE]
    )  # fmt: skip
    env = {"PATH": os.environ["PATH"], "HOME": str(Path(setup.run_dir).parent),
           **gateway_env(setup, port), KEY_ENV: key}  # fmt: skip
    # Into files, not pipes: the gateway left running keeps a pipe open, as a pod's would.
    out, err = Path(setup.run_dir).parent / "out", Path(setup.run_dir).parent / "err"
    with out.open("w") as stdout, err.open("w") as stderr:
        code = subprocess.run(["bash", "-c", script], env=env, stdout=stdout, stderr=stderr,
                              timeout=60, check=False).returncode  # fmt: skip
    return subprocess.CompletedProcess([], code, out.read_text(), err.read_text())


@contextmanager
def stopped_after(done: subprocess.CompletedProcess[str]) -> Iterator[None]:
    """Stops the gateway `caddy start` left running (it says its pid)."""
    try:
        yield
    finally:
        found = re.search(r"pid=(\d+)", done.stdout + done.stderr)
        if found:
            os.kill(int(found.group(1)), signal.SIGTERM)


def status(port: int, path: str, headers: dict[str, str] | None = None) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path, headers=headers or {})
        return conn.getresponse().status
    finally:
        conn.close()


def test_the_launch_fetches_checks_and_starts_the_gateway_before_the_engine(
    archive: Path, tmp_path: Path
) -> None:
    port = free_port()
    with release_server(archive.parent) as url:
        setup = setup_for(archive, url, tmp_path)
        done = run_launch(setup, port)
        with stopped_after(done):
            assert done.returncode == 0, done.stderr
            assert "the-engine-starts" in done.stdout
            # The checked archive stays on the volume for the next pod; the gateway serves.
            assert hashlib.sha512(Path(setup.archive).read_bytes()).hexdigest() == (
                setup.release.sha512
            )
            assert status(port, "/health") == 401
            assert status(port, "/server_info", {"Authorization": f"Bearer {KEY}"}) == 403
            assert status(port, "/health", {"Authorization": f"Bearer {KEY}"}) == 502  # no engine


def test_an_archive_on_the_volume_is_checked_and_used_without_a_fetch(
    archive: Path, tmp_path: Path
) -> None:
    with release_server(archive.parent) as url:
        setup = setup_for(archive, url, tmp_path)
    Path(setup.volume_dir).mkdir(parents=True)
    Path(setup.archive).write_bytes(archive.read_bytes())
    port = free_port()
    done = run_launch(setup, port, fetch=False)  # the URL no longer answers
    with stopped_after(done):
        assert done.returncode == 0, done.stderr
        assert status(port, "/health") == 401


@pytest.mark.parametrize(
    "spoil",
    ["no-key", "short-key", "wrong-checksum", "missing-no-fetch", "tampered-on-volume",
     "port-taken"],
)  # fmt: skip
def test_a_gateway_that_cannot_start_stops_the_launch_before_the_engine(
    spoil: str, archive: Path, tmp_path: Path
) -> None:
    port = free_port()
    key, fetch, sha512 = KEY, True, None
    if spoil == "no-key":
        key = ""
    elif spoil == "short-key":
        key = "k" * 31
    elif spoil == "wrong-checksum":
        sha512 = hashlib.sha512(b"another release").hexdigest()
    elif spoil == "missing-no-fetch":
        fetch = False
    with release_server(archive.parent) as url:
        setup = setup_for(archive, url, tmp_path, sha512=sha512)
        if spoil == "tampered-on-volume":
            Path(setup.volume_dir).mkdir(parents=True)
            Path(setup.archive).write_bytes(archive.read_bytes() + b"x")
            fetch = False
        with socket.socket() as taken:
            if spoil == "port-taken":
                taken.bind(("0.0.0.0", port))
                taken.listen()
            done = run_launch(setup, port, key=key, fetch=fetch)
    with stopped_after(done):
        assert done.returncode == 1, (done.stdout, done.stderr)
        assert "the-engine-starts" not in done.stdout
        assert KEY not in done.stdout + done.stderr
    if spoil == "wrong-checksum":
        assert not Path(setup.archive).exists()  # a file that fails its check is never kept
