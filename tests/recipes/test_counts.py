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
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from frutebox_infra.catalog.schema import Runtime
from frutebox_infra.recipes.archives import ArchiveInstall
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
from frutebox_infra.recipes.ollama import COUNTED_ROUTES, launch_script
from tests.factories import real_images, real_registry
from tests.recipes.test_gateway_hook import ended, keeper_free_port

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
        self.answer(dict(items[max(0, len(items) - n):] if n else []))

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        if self.path == "/history" and body.get("clear"):
            history.clear()
        elif self.path == "/history":
            for prompt_id in body.get("delete", []):
                history.pop(prompt_id, None)
        elif self.path == "/prompt":
            prompt_id = str(uuid.uuid4())
            history[prompt_id] = {"status": {"completed": True}}
            self.answer({"prompt_id": prompt_id})
            return
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
    keeper = CountsKeeper(kind="comfyui-history", engine_port=engine_port(port), directory="",
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


def comfy_home(tmp: Path) -> Path:
    """The installed release as the launch finds it: its venv's python, its main.py."""
    home = tmp / "comfyui"
    (home / "venv" / "bin").mkdir(parents=True)
    (home / "venv" / "bin" / "python").symlink_to(sys.executable)
    (home / "main.py").write_text(COMFY)
    return home


def container(line: str, home: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """One container start: bash runs the pod's exec line in the release's directory."""
    return subprocess.Popen(["bash", "-c", f"home={home}\ncd \"$home\"\n{line}"], env=env,
                            start_new_session=True,
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
    home = comfy_home(tmp_path)
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
        ended(proc)
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
        ended(proc)


# Ollama's stand-in: `serve` on OLLAMA_HOST; /api/generate streams NDJSON unless "stream":
# false, its last object carrying eval_count and eval_duration (ns); /v1/chat/completions
# answers usage.completion_tokens, and a stream only when the client asks for it.
OLLAMA = """#!PYTHON
import json, os, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
host, port = os.environ["OLLAMA_HOST"].split(":")
assert sys.argv[1:] == ["serve"], sys.argv

class Ollama(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        asked = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        n = asked.get("options", {}).get("num_predict") or asked.get("max_tokens") or 3
        stream = asked.get("stream", self.path.startswith("/api/"))
        if self.path == "/api/generate":
            parts = [{"response": "w", "done": False} for _ in range(n)]
            last = {"response": "", "done": True, "eval_count": n, "eval_duration": n * 10**8}
            parts.append(last)
        elif stream:
            parts = ["data: " + json.dumps({"choices": [{"delta": {"content": "w"}}]})
                     for _ in range(n)]
            if asked.get("stream_options", {}).get("include_usage"):
                usage = {"choices": [], "usage": {"completion_tokens": n}}
                parts.append("data: " + json.dumps(usage))
            parts.append("data: [DONE]")
        else:
            message = {"message": {"content": "w" * n}}
            parts = [{"choices": [message], "usage": {"completion_tokens": n}}]
        lines = [p if isinstance(p, str) else json.dumps(p) for p in parts]
        if not stream:
            data = lines[-1].encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for line in lines:
            data = (line + "\\n").encode()
            self.wfile.write(b"%x\\r\\n%s\\r\\n" % (len(data), data))
            self.wfile.flush()
        self.wfile.write(b"0\\r\\n\\r\\n")

    def log_message(self, *args):
        pass

ThreadingHTTPServer((host, int(port)), Ollama).serve_forever()
""".replace("PYTHON", sys.executable)


def post(port: int, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", path, body=json.dumps(body).encode())
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


def listening(port: int) -> None:
    """Waits for a server on 127.0.0.1:`port`."""
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on {port}"
            time.sleep(0.1)


def ollama_counts(port: int) -> dict[str, float]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            code, text = call(port, "GET", "/metrics")
            if code == 200:
                return {
                    line.split()[0]: float(line.split()[1])
                    for line in text.splitlines()
                    if line and not line.startswith("#")
                }
        time.sleep(0.1)
    raise AssertionError("the keeper never answered")


def test_history_a_client_deletes_is_never_counted_again(tmp_path: Path) -> None:
    port = keeper_free_port()
    engine, keeper = engine_port(port), port + KEEPER_PORT_OFFSET
    home = comfy_home(tmp_path)
    env = {"PATH": os.environ["PATH"], KEEPER_ENV: KEEPER_PY, COUNTS_ENV: str(tmp_path / "k")}
    proc = container(exec_line(port), home, env)
    try:
        assert kept_count(keeper) == 0.0
        for _ in range(60):
            call(engine, "POST", "/prompt")
        assert kept_count(keeper) == 60.0
        newest = [json.loads(call(engine, "POST", "/prompt")[1])["prompt_id"] for _ in range(10)]
        assert kept_count(keeper) == 70.0
        # Deleting the newest lets older prompts, read before, back into the keeper's window.
        call(engine, "POST", "/history", {"delete": newest})
        assert kept_count(keeper) == 70.0
    finally:
        ended(proc)


def test_the_keeper_counts_what_ollama_s_answers_carry_and_passes_them_on_unchanged(
    tmp_path: Path,
) -> None:
    port = keeper_free_port()
    engine, keeper_port = engine_port(port), port + KEEPER_PORT_OFFSET
    program = tmp_path / "ollama"
    program.write_text(OLLAMA)
    program.chmod(0o755)
    counts = CountsKeeper(kind="ollama-answers", engine_port=engine, read_path="", directory="",
                          port=keeper_port, proxies=COUNTED_ROUTES)  # fmt: skip
    archive = real_images()[Runtime.OLLAMA].engine_archive
    assert archive is not None
    install = ArchiveInstall(archive=archive, version="ollama-test", home=str(tmp_path))
    (line,) = [ln for ln in launch_script(install, counts).splitlines() if ln.startswith("exec ")]
    line = line.replace(shlex.quote(f"{tmp_path}/bin/ollama"), shlex.quote(str(program)))
    kept = tmp_path / "volume" / "counters" / "qwen3-8b"
    env = {"PATH": os.environ["PATH"], KEEPER_ENV: KEEPER_PY, COUNTS_ENV: str(kept),
           "OLLAMA_HOST": f"127.0.0.1:{engine}"}  # fmt: skip
    proc = subprocess.Popen(["bash", "-c", line], env=env, start_new_session=True)
    try:
        assert set(ollama_counts(keeper_port).values()) == {0.0}
        listening(engine)
        code, streamed = post(keeper_port, "/api/generate", {"options": {"num_predict": 5}})
        assert code == 200 and streamed.count(b"\n") == 6  # every line passed on, in order
        assert json.loads(streamed.splitlines()[-1])["eval_count"] == 5
        whole_answer = {"stream": False, "options": {"num_predict": 2}}
        assert post(keeper_port, "/api/generate", whole_answer)[0] == 200
        code, whole = post(keeper_port, "/v1/chat/completions", {"max_tokens": 4})
        assert json.loads(whole)["usage"]["completion_tokens"] == 4
        asked = {"max_tokens": 3, "stream": True, "stream_options": {"include_usage": True}}
        assert post(keeper_port, "/v1/chat/completions", asked)[0] == 200
        # A stream whose client asked for no usage says nothing of its length: counted apart.
        unsized = {"max_tokens": 6, "stream": True}
        assert post(keeper_port, "/v1/chat/completions", unsized)[0] == 200
        assert call(keeper_port, "POST", "/api/pull")[0] == 404  # only the counted routes
        assert ollama_counts(keeper_port) == {
            "ollama:answers_without_count_total": 1.0,
            "ollama:eval_count_total": 5.0 + 2 + 4 + 3,
            "ollama:eval_duration_seconds_total": pytest.approx(0.7),
        }
        post(keeper_port, "/api/generate", {"options": {"num_predict": 1}})  # then the stop
        assert stopped(proc) == 128 + signal.SIGTERM
        proc = subprocess.Popen(["bash", "-c", line], env=env, start_new_session=True)
        listening(engine)
        assert ollama_counts(keeper_port)["ollama:eval_count_total"] == 15.0
    finally:
        ended(proc)
