"""The counts keeper run for real: bash runs a measured ComfyUI pod's own exec line with a
stand-in server whose history lives in its memory, as ComfyUI's does; the keeper counts the
prompts that reach the history, on the volume, across container starts and a client's clearing
of the history, and answers the sum on its port; with no directory it execs the server in its
place."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from frutebox_infra.catalog.schema import Runtime
from frutebox_infra.recipes.comfyui import launch
from frutebox_infra.recipes.counts import (
    COMFYUI_COUNTER,
    COUNTS_ENV,
    KEEPER_ENV,
    KEEPER_PORT_OFFSET,
    KEEPER_PY,
    CountsKeeper,
)
from frutebox_infra.recipes.gateway import GatewaySetup, engine_port
from tests.factories import real_images, real_registry
from tests.recipes.test_gateway_hook import keeper_free_port

# ComfyUI's stand-in: its history a dict in memory, oldest first; GET /history?max_items=N the
# last N (PromptQueue.get_history), POST /prompt runs a prompt into it at once, POST /history
# {"clear": true} empties it, as a client may.
COMFY = """
import json, sys, uuid
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs, urlparse
port = int(sys.argv[sys.argv.index("--port") + 1])
history = {}
print("comfyui-starts", flush=True)

class Comfy(BaseHTTPRequestHandler):
    def answer(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urlparse(self.path)
        if url.path != "/history":
            self.send_error(404)
            return
        items = list(history.items())
        n = int(parse_qs(url.query).get("max_items", [len(items)])[0])
        self.answer(dict(items[len(items) - n:] if n else []))

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        if self.path == "/history" and body.get("clear"):
            history.clear()
        elif self.path == "/prompt":
            history[str(uuid.uuid4())] = {"status": {"completed": True}}
        self.answer({})

    def log_message(self, *args):
        pass

HTTPServer(("127.0.0.1", port), Comfy).serve_forever()
"""


def exec_line(port: int) -> str:
    """A measured ComfyUI pod's last line (the keeper, then the server), its engine and keeper
    on free ports."""
    image = replace(real_images()[Runtime.COMFYUI], port=port)
    registry = real_registry()
    assert registry.gateway is not None
    setup = GatewaySetup(release=registry.gateway, routes=registry.engine_routes[Runtime.COMFYUI])
    keeper = CountsKeeper(kind="comfyui-history", engine_port=engine_port(port),
                          read_path="/history", port=port + KEEPER_PORT_OFFSET)  # fmt: skip
    script = launch(image, "sdxl-1.0", gateway=setup, counts=keeper).script
    (line,) = [ln for ln in script.splitlines() if ln.startswith("exec ")]
    return line


def call(port: int, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request(method, path, body=json.dumps(body or {}).encode())
        answer = conn.getresponse()
        return answer.status, answer.read().decode()
    finally:
        conn.close()


def kept_count(port: int) -> float:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            code, text = call(port, "GET", "/metrics")
            if code == 200:
                for line in text.splitlines():
                    if line.startswith(COMFYUI_COUNTER + " "):
                        return float(line.split()[1])
        time.sleep(0.1)
    raise AssertionError("the keeper never answered")


def container(line: str, home: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """One container start: bash runs the pod's exec line in the release's directory."""
    return subprocess.Popen(["bash", "-c", f"home={home}\ncd \"$home\"\n{line}"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip


def stopped(proc: subprocess.Popen[bytes]) -> int:
    """The container's stop signal; its status."""
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=30)


def test_the_keeper_counts_comfyui_s_prompts_on_the_volume_across_starts_and_clears(
    tmp_path: Path,
) -> None:
    port = keeper_free_port()
    engine, keeper = engine_port(port), port + KEEPER_PORT_OFFSET
    home = tmp_path / "comfyui"
    (home / "venv" / "bin").mkdir(parents=True)
    (home / "venv" / "bin" / "python").symlink_to(sys.executable)
    (home / "main.py").write_text(COMFY)
    kept = tmp_path / "volume" / "counters" / "sdxl"
    env = {"PATH": os.environ["PATH"], KEEPER_ENV: KEEPER_PY, COUNTS_ENV: str(kept)}
    line = exec_line(port)
    proc = container(line, home, env)
    try:
        assert kept_count(keeper) == 0.0
        for _ in range(3):
            call(engine, "POST", "/prompt")
        assert kept_count(keeper) == 3.0
        call(engine, "POST", "/history", {"clear": True})  # a client empties the history
        call(engine, "POST", "/prompt")
        assert kept_count(keeper) == 4.0
        call(engine, "POST", "/prompt")  # not read before the stop: written at the signal
        assert stopped(proc) == 128 + signal.SIGTERM
        proc = container(line, home, env)  # the next start's history is empty
        assert kept_count(keeper) == 5.0
        for _ in range(2):
            call(engine, "POST", "/prompt")
        assert kept_count(keeper) == 7.0
    finally:
        proc.kill()
        proc.wait()
    assert len(list(kept.glob("start-*.json"))) == 2
    # No directory named: the keeper execs the server in its place, and nothing answers on
    # the keeper's port.
    proc = container(line, home, {**env, COUNTS_ENV: ""})
    try:
        deadline, serving = time.monotonic() + 30, False
        while not serving and time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                serving = call(engine, "GET", "/history")[0] == 200
            time.sleep(0.1)
        assert serving
        with contextlib.suppress(ConnectionRefusedError):
            raise AssertionError(call(keeper, "GET", "/metrics"))
    finally:
        proc.kill()
        proc.wait()
