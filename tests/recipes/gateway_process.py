"""The real gateway (Caddy, built by tools/setup-gateway) run on loopback in front of a
stand-in engine, with the configuration recipes/gateway.py writes for a pod."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from frutebox_infra.catalog.engine_routes import EngineRoutes
from frutebox_infra.plumbing.paths import REPO_ROOT
from frutebox_infra.recipes.gateway import KEY_ENV, caddyfile


def gateway_binary() -> Path:
    """Caddy at the pinned version, built once (stamped) from tools/gateway."""
    done = subprocess.run(
        [str(REPO_ROOT / "tools" / "setup-gateway")], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"tools/setup-gateway failed:\n{done.stderr}"
    return Path(done.stdout.strip().splitlines()[-1])


@dataclass
class Seen:
    """What the stand-in engine received: method, path and headers of each request."""

    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)


class _Engine(BaseHTTPRequestHandler):
    seen: Seen

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.seen.requests.append((self.command, self.path, headers))
        body = json.dumps({"engine": True, "path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_POST = do_DELETE = do_HEAD = do_PUT = do_PATCH = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Running:
    port: int
    seen: Seen
    started_s: float
    """From starting the gateway to its first answer."""
    config: str

    def ask(
        self, method: str, path: str, headers: Mapping[str, str] | None = None, body: bytes = b""
    ) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            sent = {"Content-Length": str(len(body)), **(headers or {})}
            conn.request(method, path, body=body or None, headers=sent)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()


@contextmanager
def running_gateway(routes: EngineRoutes, key: str, tmp: Path) -> Iterator[Running]:
    """The gateway for `routes` on a free loopback port, in front of an echoing engine."""
    seen = Seen()
    handler = type("Engine", (_Engine,), {"seen": seen})
    engine = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=engine.serve_forever, daemon=True).start()
    port = free_port()
    config = caddyfile(routes, port=port, upstream_port=engine.server_address[1])
    path = tmp / "Caddyfile"
    path.write_text(config)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp), KEY_ENV: key}
    start = time.monotonic()
    proc = subprocess.Popen(
        [str(gateway_binary()), "run", "--config", str(path), "--adapter", "caddyfile"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp,
    )  # fmt: skip
    try:
        started = _wait_until_answering(proc, port, start)
        yield Running(port=port, seen=seen, started_s=started, config=config)
    finally:
        proc.terminate()
        proc.communicate(timeout=10)
        engine.shutdown()
        engine.server_close()


def _wait_until_answering(proc: subprocess.Popen[bytes], port: int, start: float) -> float:
    while time.monotonic() - start < 20:
        if proc.poll() is not None:
            raise AssertionError(f"the gateway exited: {proc.communicate()[1].decode()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return time.monotonic() - start
        except OSError:
            time.sleep(0.005)
    raise AssertionError("the gateway did not listen within 20 s")
