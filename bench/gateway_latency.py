"""What the gateway in front of every engine costs: its start-up and the latency it adds.

The real gateway (Caddy at the pinned version, built by tools/setup-gateway) runs on loopback
with the configuration a pod runs (recipes/gateway.py, from registry/routes.yaml) in front of
an echoing stand-in engine. Start-up is from exec to the first answered request; latency is a
keyed chat request's round trip through the gateway against the same request sent straight to
the engine (a connection per request to the engine; one kept alive to the gateway). Budgets a
user feels: start-up well under the engine's own (SGLang, vLLM and llama.cpp take minutes to
load; Ollama about a second), so under 1 s; added latency under 2 ms at the median, against
tens of ms through RunPod's proxy.

vLLM's pods start the gateway from a start hook its image's Python runs (recipes/gateway.py
start_hook): what that adds to the engine's own interpreter start is timed too, the release
archive already on the "volume" (the hook checks its SHA-512, unpacks the program, runs
`caddy start` and writes the engine's config file), against the same interpreter without it.

A measured Ollama pod's gateway sends its counted routes through the counts keeper
(recipes/counts.py), which passes each answer on and counts what it carries: the same chat
request through the gateway and the keeper is timed too. Budget: the keeper adds under 2 ms at
the median, like the gateway.

Run: .venv/bin/python bench/gateway_latency.py [--quick]   (about 30 s)
  --quick: 3 start-ups and 200 requests each way, the same code path in a few seconds, for CI.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from support.common import Results

from frutebox_infra.catalog.files import load_registry
from frutebox_infra.catalog.schema import Runtime
from frutebox_infra.plumbing.paths import REPO_ROOT
from frutebox_infra.recipes.counts import COUNTS_ENV, KEEPER_PY, CountsKeeper
from frutebox_infra.recipes.gateway import (
    HOOK_MODULE,
    KEY_ENV,
    GatewaySetup,
    caddyfile,
    gateway_env,
    start_hook,
)

KEY = "bench-" + "k" * 40
BODY = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'
STARTUP_BUDGET_S = 1.0
ADDED_P50_BUDGET_MS = 2.0


class Engine(BaseHTTPRequestHandler):
    """An engine that answers at once; HTTP/1.0, so each request is a connection of its own
    upstream (the standard library's HTTP/1.1 server drops kept-alive proxy connections)."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b'{"choices":[{"message":{"role":"assistant","content":"ok"}}]}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def gateway_binary() -> str:
    done = subprocess.run(
        [str(REPO_ROOT / "tools" / "setup-gateway")], capture_output=True, text=True, check=True
    )
    return done.stdout.strip().splitlines()[-1]


def start(binary: str, config: Path, port: int) -> tuple[subprocess.Popen[bytes], float]:
    """The gateway started, and the seconds from exec to its first answer (a 401)."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(config.parent), KEY_ENV: KEY}
    began = time.perf_counter()
    proc = subprocess.Popen(
        [binary, "run", "--config", str(config), "--adapter", "caddyfile"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=config.parent,
    )  # fmt: skip
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", "/health")
            conn.getresponse().read()
            conn.close()
            return proc, time.perf_counter() - began
        except OSError:
            if proc.poll() is not None or time.perf_counter() - began > 20:
                raise SystemExit("the gateway did not start") from None
            time.sleep(0.002)


def hook_startups_s(binary: str, n: int, tmp: Path) -> tuple[list[float], list[float]]:
    """Interpreter starts (`python -c pass`) with the start hook, and without: seconds each."""
    registry = load_registry()
    assert registry.gateway is not None
    archive = tmp / "release.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(binary, arcname=registry.gateway.member)
    sha512 = hashlib.sha512(archive.read_bytes()).hexdigest()
    release = replace(registry.gateway, sha512=sha512)
    setup = GatewaySetup(release=release, routes=registry.engine_routes[Runtime.VLLM],
                         volume_dir=str(tmp / "volume"), run_dir=str(tmp / "run"))  # fmt: skip
    Path(setup.volume_dir).mkdir()
    Path(setup.archive).write_bytes(archive.read_bytes())  # already on the volume
    engine_config = tmp / "shm" / "vllm.yaml"
    hook = start_hook(setup, engine_config=str(engine_config),
                      engine_config_text="disable-fastapi-docs: true\n", fetch=False)  # fmt: skip
    directory = tmp / "hook"
    directory.mkdir()
    (directory / HOOK_MODULE).write_text(hook.text)
    hooked, bare = [], []
    for _ in range(n):
        while (port := free_port()) + 10_000 > 65_535:  # its engine's port must be one too
            pass
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp), KEY_ENV: KEY,
               **gateway_env(setup, port)}  # fmt: skip
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
        bare.append(time.perf_counter() - began)
        began = time.perf_counter()
        with_hook = {**env, "PYTHONPATH": str(directory)}
        # Into a file, not a pipe: the gateway left running would hold a pipe open.
        with (tmp / "hook.log").open("w+") as log:
            code = subprocess.run([sys.executable, "-c", "pass"], env=with_hook, stdout=log,
                                  stderr=log, check=False).returncode  # fmt: skip
            log.seek(0)
            said = log.read()
        hooked.append(time.perf_counter() - began)
        if code != 0 or not engine_config.exists():
            raise SystemExit(f"the start hook failed: {said}")
        found = re.search(r"pid=(\d+)", said)
        assert found, said
        os.kill(int(found.group(1)), signal.SIGTERM)
        time.sleep(0.2)
    return hooked, bare


def keeper(engine_port: int, tmp: Path) -> tuple[subprocess.Popen[bytes], CountsKeeper]:
    """The counts keeper as a measured Ollama pod runs it, passing chat requests on to the
    stand-in engine (its own child a sleeper: the engine here runs apart)."""
    while (port := free_port()) + 20_000 > 65_535:
        pass
    counts = CountsKeeper(kind="ollama-answers", engine_port=engine_port, read_path="",
                          directory=str(tmp / "counts"),
                          port=port, proxies=("/v1/chat/completions",))  # fmt: skip
    env = {"PATH": os.environ.get("PATH", ""), COUNTS_ENV: str(tmp / "counts")}
    proc = subprocess.Popen([sys.executable, "-I", "-c", KEEPER_PY, str(tmp / "counts"),
                             counts.params, "sleep", "3600"], env=env)  # fmt: skip
    began = time.perf_counter()
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, counts
        except OSError:
            if proc.poll() is not None or time.perf_counter() - began > 20:
                raise SystemExit("the counts keeper did not start") from None
            time.sleep(0.01)


def round_trips_ms(port: int, n: int, keyed: bool) -> list[float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Content-Type": "application/json"}
    if keyed:
        headers["Authorization"] = f"Bearer {KEY}"
    times = []
    for _ in range(n + 20):
        began = time.perf_counter()
        conn.request("POST", "/v1/chat/completions", body=BODY, headers=headers)
        response = conn.getresponse()
        response.read()
        assert response.status == 200, response.status
        times.append((time.perf_counter() - began) * 1000)
    conn.close()
    return times[20:]  # the first requests warm the connections up


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    starts, requests = (3, 200) if args.quick else (15, 3000)
    results = Results(__file__, args.quick)
    binary = gateway_binary()
    routes = load_registry().engine_routes[Runtime.VLLM]
    engine = ThreadingHTTPServer(("127.0.0.1", 0), Engine)
    threading.Thread(target=engine.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "Caddyfile"
        port = free_port()
        config.write_text(caddyfile(routes, port=port, upstream_port=engine.server_address[1]))
        startups = []
        for _ in range(starts):
            proc, seconds = start(binary, config, port)
            startups.append(seconds)
            proc.terminate()
            proc.wait(timeout=10)
        proc, _ = start(binary, config, port)
        try:
            direct = round_trips_ms(engine.server_address[1], requests, keyed=False)
            through = round_trips_ms(port, requests, keyed=True)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
        counter, counts = keeper(engine.server_address[1], Path(tmp))
        config.write_text(caddyfile(routes, port=port, upstream_port=engine.server_address[1],
                                    counts=counts))  # fmt: skip
        proc, _ = start(binary, config, port)
        try:
            kept = round_trips_ms(port, requests, keyed=True)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            counter.terminate()
            counter.wait(timeout=10)
        hooked, bare = hook_startups_s(binary, starts, Path(tmp))
    engine.shutdown()
    startup = statistics.median(startups)
    added = statistics.median(through) - statistics.median(direct)
    results.heading(f"gateway {binary.rsplit('/', 1)[-1]} in front of a stand-in engine")
    results.table(
        ["measure", "median", "p99", "runs"],
        [
            ["start-up, exec to first answer", f"{startup * 1000:.0f} ms",
             f"{max(startups) * 1000:.0f} ms (max)", str(starts)],
            ["chat round trip, straight to the engine", f"{statistics.median(direct):.3f} ms",
             f"{pct(direct, 0.99):.3f} ms", str(requests)],
            ["chat round trip, through the gateway", f"{statistics.median(through):.3f} ms",
             f"{pct(through, 0.99):.3f} ms", str(requests)],
            ["chat round trip, through the gateway and the counts keeper (measured Ollama)",
             f"{statistics.median(kept):.3f} ms", f"{pct(kept, 0.99):.3f} ms", str(requests)],
            ["interpreter start, with the start hook (vLLM)",
             f"{statistics.median(hooked) * 1000:.0f} ms",
             f"{max(hooked) * 1000:.0f} ms (max)", str(starts)],
            ["interpreter start, without it", f"{statistics.median(bare) * 1000:.0f} ms",
             f"{max(bare) * 1000:.0f} ms (max)", str(starts)],
        ],
    )  # fmt: skip
    results.print(f"added by the gateway: {added:.3f} ms at the median")
    keeper_added = statistics.median(kept) - statistics.median(through)
    results.print(
        f"added by the counts keeper (measured Ollama): {keeper_added:.3f} ms at the median"
    )
    hook_added = statistics.median(hooked) - statistics.median(bare)
    results.print(f"added to a vLLM pod's start by its start hook: {hook_added * 1000:.0f} ms")
    ok_start = "within" if startup <= STARTUP_BUDGET_S else "OVER"
    ok_added = "within" if added <= ADDED_P50_BUDGET_MS else "OVER"
    results.print(f"budget start-up ≤ {STARTUP_BUDGET_S:.0f} s: {ok_start}")
    results.print(f"budget added latency ≤ {ADDED_P50_BUDGET_MS:.0f} ms (median): {ok_added}")
    ok_kept = "within" if keeper_added <= ADDED_P50_BUDGET_MS else "OVER"
    results.print(f"budget added by the keeper ≤ {ADDED_P50_BUDGET_MS:.0f} ms (median): {ok_kept}")
    results.write()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
