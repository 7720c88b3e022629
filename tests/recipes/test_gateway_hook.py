"""The gateway's start hook as a vLLM pod's image runs it, run here by a real Python with the
real gateway: the hook on PYTHONPATH (as `sitecustomize`, which CPython's `site` imports at
every interpreter start) checks and fetches the pinned release, starts the gateway, and only
then writes the config file the engine's launch names; the interpreters the engine spawns do
not start it again; and every failure ends the process before the engine's own code runs."""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from frutebox_infra.catalog.schema import Runtime
from frutebox_infra.recipes.counts import COUNTS_ENV, KEEPER_PORT_OFFSET, CountsKeeper
from frutebox_infra.recipes.gateway import (
    HOOK_MARK_ENV,
    HOOK_MODULE,
    KEY_ENV,
    GatewaySetup,
    StartHook,
    engine_port,
    gateway_env,
    hook_env,
    start_hook,
)
from frutebox_infra.recipes.vllm import ENGINE_CONFIG_TEXT
from tests.factories import real_registry
from tests.recipes.gateway_process import Seen, _Engine
from tests.recipes.test_gateway_launch import (
    archive,  # noqa: F401  (the fixture)
    free_port,
    release_server,
    status,
    stopped_after,
)
from tests.recipes.test_gateway_launch import setup_for as launch_setup

KEY = "hook-" + "k" * 40

# The engine's stand-in: what `vllm serve` does first with our launch, read its `--config`
# file (FlexibleArgumentParser.load_config_file re-raises a missing file's error), then serve
# on loopback; and spawn a worker interpreter, as vLLM's multiprocessing does.
ENGINE = """
import os, subprocess, sys
config = sys.argv[1]
try:
    open(config).read()
except OSError as exc:
    print("ERROR Unable to read the config file at " + config, file=sys.stderr)
    sys.exit(2)
print("the-engine-starts", flush=True)
worker = subprocess.run([sys.executable, "-c", "import os; print(os.environ.get(MARK))"],
                        capture_output=True, text=True)
print("worker-exit", worker.returncode, "mark", worker.stdout.strip(), flush=True)
""".replace("MARK", repr(HOOK_MARK_ENV))


def setup_for(release: Path, url: str, tmp: Path, *, sha512: str | None = None) -> GatewaySetup:
    """The launch test's release stand-in, with vLLM's routes."""
    setup = launch_setup(release, url, tmp, sha512=sha512)
    return replace(setup, routes=real_registry().engine_routes[Runtime.VLLM])


def hook_for(setup: GatewaySetup, tmp: Path, *, fetch: bool = True) -> tuple[StartHook, Path]:
    """The hook for `setup` with its engine config under `tmp`, and its file written where
    the seeding pod writes it (here below `tmp`); `fetch`: an unseeded pod's, which fetches a
    missing release (a seeded pod's only checks the one its seed placed)."""
    hook = start_hook(setup, engine_config=str(tmp / "shm" / "vllm.yaml"),
                      engine_config_text=ENGINE_CONFIG_TEXT, fetch=fetch)  # fmt: skip
    directory = tmp / "hook"
    directory.mkdir(exist_ok=True)
    (directory / HOOK_MODULE).write_text(hook.text)
    return hook, directory


def run_engine(
    setup: GatewaySetup, hook: StartHook, directory: Path, port: int, *, key: str = KEY
) -> subprocess.CompletedProcess[str]:
    """The image's Python running the engine's stand-in with the pod's env: PYTHONPATH naming
    the hook's directory, the gateway's configuration, the key."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(directory.parent),
        **gateway_env(setup, port),
        **hook_env(hook),
        "PYTHONPATH": str(directory),  # the hook's directory, here rather than on a volume
        KEY_ENV: key,
    }
    out, err = directory.parent / "out", directory.parent / "err"
    with out.open("w") as stdout, err.open("w") as stderr:
        code = subprocess.run([sys.executable, "-c", ENGINE, hook.engine_config], env=env,
                              stdout=stdout, stderr=stderr, timeout=60,
                              check=False).returncode  # fmt: skip
    return subprocess.CompletedProcess([], code, out.read_text(), err.read_text())


@contextmanager
def engine_on(port: int) -> Iterator[Seen]:
    """An echoing stand-in engine on 127.0.0.1:`port` (where the gateway forwards)."""
    seen = Seen()
    handler = type("Engine", (_Engine,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield seen
    finally:
        server.shutdown()
        server.server_close()


def test_the_hook_starts_the_gateway_before_the_engine_and_once_per_container(
    archive: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    port = free_port()
    with release_server(archive.parent) as url:
        setup = setup_for(archive, url, tmp_path)
        hook, directory = hook_for(setup, tmp_path)
        done = run_engine(setup, hook, directory, port)
    with stopped_after(done), engine_on(engine_port(port)) as seen:
        assert done.returncode == 0, done.stderr
        assert "the-engine-starts" in done.stdout
        # The worker interpreter inherited the mark and started nothing (a second start
        # would find the port taken and end it with exit 1).
        assert re.search(r"worker-exit 0 mark \d+\n", done.stdout), done.stdout
        assert Path(hook.engine_config).read_text() == ENGINE_CONFIG_TEXT
        assert hashlib.sha512(Path(setup.archive).read_bytes()).hexdigest() == (
            setup.release.sha512
        )
        # The real gateway with the pod's configuration: vLLM's route table.
        keyed = {"Authorization": f"Bearer {KEY}"}
        assert status(port, "/v1/models") == 401
        assert status(port, "/health") == 401
        assert status(port, "/v1/models", keyed) == 200
        assert status(port, "/version", keyed) == 403
        assert status(port, "/docs", keyed) == 403
        assert [(m, p) for m, p, _ in seen.requests] == [("GET", "/v1/models")]
        assert "authorization" not in seen.requests[0][2]  # the key stops at the gateway
        assert KEY not in done.stdout + done.stderr


@pytest.mark.parametrize(
    "spoil", ["no-key", "short-key", "wrong-checksum", "tampered-no-release", "port-taken",
              "no-hook", "seeded-release-missing"]
)  # fmt: skip
def test_a_gateway_that_cannot_start_ends_the_process_before_the_engine(
    spoil: str,
    archive: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    port = free_port()
    key, sha512 = KEY, None
    if spoil == "no-key":
        key = ""
    elif spoil == "short-key":
        key = "k" * 31
    elif spoil == "wrong-checksum":
        sha512 = hashlib.sha512(b"another release").hexdigest()
    with release_server(archive.parent) as url:
        setup = setup_for(archive, url, tmp_path, sha512=sha512)
        # A seeded pod's hook only checks: the release its seed placed is gone from the volume.
        hook, directory = hook_for(setup, tmp_path, fetch=spoil != "seeded-release-missing")
        # A config file left by an earlier start never lets the engine through.
        Path(hook.engine_config).parent.mkdir(parents=True)
        Path(hook.engine_config).write_text(ENGINE_CONFIG_TEXT)
        if spoil == "no-hook":
            (directory / HOOK_MODULE).unlink()
            Path(hook.engine_config).unlink()  # the tmpfs is new at each container start
        if spoil == "tampered-no-release":
            # A tampered archive on the volume, and its release no longer answering.
            Path(setup.volume_dir).mkdir(parents=True)
            Path(setup.archive).write_bytes(archive.read_bytes() + b"x")
            setup = replace(setup, release=replace(setup.release, url=f"{url}/gone.tar.gz"))
            hook, directory = hook_for(setup, tmp_path)
        with socket.socket() as taken:
            if spoil == "port-taken":
                taken.bind(("0.0.0.0", port))
                taken.listen()
            done = run_engine(setup, hook, directory, port, key=key)
    with stopped_after(done):
        assert "the-engine-starts" not in done.stdout, (done.stdout, done.stderr)
        assert not Path(hook.engine_config).exists()
        assert KEY not in done.stdout + done.stderr
        if spoil == "no-hook":
            # Nothing started a gateway; the engine exits reading its arguments.
            assert done.returncode == 2 and "Unable to read the config file" in done.stderr
            return
        assert done.returncode == 1, (done.stdout, done.stderr)
        assert "gateway: " in done.stderr and "refusing to serve" in done.stderr
    if spoil == "tampered-no-release":
        assert not Path(setup.run_dir, "caddy").exists()  # nothing unpacked from it
    if spoil == "wrong-checksum":
        assert not Path(setup.archive).exists()  # a file that fails its check is never kept
    if spoil == "seeded-release-missing":
        assert "is missing or fails its SHA-512 check" in done.stderr
        assert not Path(setup.archive).exists()  # not fetched on the GPU


def test_the_hook_does_nothing_in_a_process_without_the_gateway_config(tmp_path: Path) -> None:
    """An interpreter of the image run without the pod's gateway env (a tool, a test) is left
    alone: the hook acts only where the pod's env asks for a gateway."""
    setup = setup_for(Path("caddy.tar.gz"), "http://127.0.0.1:9", tmp_path, sha512="0" * 128)
    _, directory = hook_for(setup, tmp_path)
    env: dict[str, Any] = {"PATH": os.environ["PATH"], "PYTHONPATH": str(directory)}
    done = subprocess.run([sys.executable, "-c", "print('ran')"], env=env, capture_output=True,
                          text=True, timeout=30, check=False)  # fmt: skip
    assert done.returncode == 0 and done.stdout == "ran\n", done.stderr
    assert not Path(setup.run_dir).exists()


# llama.cpp's full image: its dispatcher (tools.sh) starts `python3 ./convert_hf_to_gguf.py`
# on the launch's words; the hook execs the server in that interpreter's place. The stand-ins:
# a convert script that parses its arguments with argparse before anything else (its model
# directory and options; argparse adds -h/--help, which reads `-hf` as `-h` with an argument),
# and a server that says what it was started with.
CONVERT = """import argparse
parser = argparse.ArgumentParser(prog="convert_hf_to_gguf.py")
parser.add_argument("--outfile")
parser.add_argument("--outtype")
parser.add_argument("model", nargs="?")
parser.parse_args()
print("the-convert-script-runs", flush=True)
"""
SERVER = """#!/bin/sh
echo "the-server-starts $*"
"""


def llamacpp_programs(tmp: Path, server_text: str) -> tuple[Path, Path]:
    """The image's server (`server_text`, executable) and its convert script, in `tmp`."""
    server = tmp / "llama-server"
    server.write_text(server_text)
    server.chmod(0o755)
    convert = tmp / "convert_hf_to_gguf.py"
    convert.write_text(CONVERT)
    return server, convert


def llamacpp_setup(release: Path, url: str, tmp: Path) -> GatewaySetup:
    """The launch test's release stand-in, with llama.cpp's routes."""
    return replace(setup_for(release, url, tmp),
                   routes=real_registry().engine_routes[Runtime.LLAMACPP])  # fmt: skip


@pytest.mark.parametrize("hooked", [True, False], ids=["hook", "no-hook"])
def test_llamacpp_s_hook_starts_the_gateway_then_execs_the_server_with_the_launch_s_flags(
    hooked: bool,
    archive: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    port = free_port()
    server, convert = llamacpp_programs(tmp_path, SERVER)
    flags = ["-hf", "org/m-GGUF:Q4", "--host", "127.0.0.1", "--port", str(engine_port(port))]
    with release_server(archive.parent) as url:
        setup = llamacpp_setup(archive, url, tmp_path)
        hook = start_hook(setup, execs=str(server), fetch=True)
        directory = tmp_path / "hook"
        directory.mkdir()
        if hooked:
            (directory / HOOK_MODULE).write_text(hook.text)
        env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **gateway_env(setup, port),
               **hook_env(hook), "PYTHONPATH": str(directory), KEY_ENV: KEY}  # fmt: skip
        with (tmp_path / "out").open("w+") as out:
            code = subprocess.run([sys.executable, str(convert), *flags], env=env, stdout=out,
                                  stderr=out, timeout=60, check=False).returncode  # fmt: skip
            out.seek(0)
            said = out.read()
    done = subprocess.CompletedProcess([], code, said, "")
    with stopped_after(done), engine_on(engine_port(port)) as seen:
        assert KEY not in said
        if not hooked:
            # No gateway: the convert script's argparse refused the server's flags.
            assert code == 2 and "ignored explicit argument 'f'" in said, said
            assert "the-convert-script-runs" not in said
            assert "the-server-starts" not in said
            return
        assert code == 0, said
        assert "the-convert-script-runs" not in said
        assert f"the-server-starts {' '.join(flags)}" in said
        keyed = {"Authorization": f"Bearer {KEY}"}
        assert status(port, "/v1/models") == 401
        assert status(port, "/slots", keyed) == 403
        assert status(port, "/v1/models", keyed) == 200
        assert [(m, p) for m, p, _ in seen.requests] == [("GET", "/v1/models")]


# llama-server's stand-in for the counts keeper: its counters in its memory, on `/metrics` in
# llama.cpp's text format (a gauge beside them), advanced by each completion; SIGTERM ends it.
COUNTING_SERVER = """#!PYTHON
import json, os, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
port = int(sys.argv[sys.argv.index("--port") + 1])
tokens = 0
print("the-server-starts", os.getpid(), flush=True)

class Server(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path != "/metrics":
            self.send_error(404)
            return
        body = (
            "# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.\\n"
            "# TYPE llamacpp:tokens_predicted_total counter\\n"
            "llamacpp:tokens_predicted_total " + str(tokens) + "\\n"
            "# TYPE llamacpp:requests_processing gauge\\n"
            "llamacpp:requests_processing 1\\n"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        global tokens
        asked = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        tokens += asked["max_tokens"]
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass

HTTPServer(("127.0.0.1", port), Server).serve_forever()
""".replace("PYTHON", sys.executable)


def ended(proc: subprocess.Popen[Any]) -> None:
    """The container gone, whatever it started (its processes are one session here, as a
    container's are one namespace)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def stop_gateway(said: str) -> None:
    """Stops the gateway `caddy start` left running (a container's end would)."""
    with stopped_after(subprocess.CompletedProcess([], 0, said, "")):
        pass


def keeper_free_port() -> int:
    """A free port whose engine and keeper ports (+10000, +20000) are ports too."""
    while (port := free_port()) + KEEPER_PORT_OFFSET > 65_535:
        pass
    return port


def keyed_call(
    port: int, method: str, path: str, body: dict[str, Any] | None = None
) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers={"Authorization": f"Bearer {KEY}"})
        answer = conn.getresponse()
        return answer.status, answer.read().decode()
    finally:
        conn.close()


def predicted(port: int) -> float | None:
    """The output-token count the gateway answers on the metrics route, once it answers 200."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            code, text = keyed_call(port, "GET", "/metrics")
            if code == 200:
                assert "requests_processing" not in text  # only counters are kept
                found = re.search(r"^llamacpp:tokens_predicted_total (\S+)$", text, re.M)
                return float(found.group(1)) if found else None
        time.sleep(0.1)
    raise AssertionError("the gateway never answered the counters")


def test_llamacpp_s_hook_keeps_the_server_s_counters_on_the_volume_across_container_starts(
    archive: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    port = keeper_free_port()
    server, convert = llamacpp_programs(tmp_path, COUNTING_SERVER)
    kept = tmp_path / "volume" / "counters" / "kimi" / "llamacpp-b1"
    flags = ["-hf", "org/m-GGUF:Q4", "--host", "127.0.0.1", "--port", str(engine_port(port)),
             "--metrics"]  # fmt: skip
    with release_server(archive.parent) as url:
        setup = llamacpp_setup(archive, url, tmp_path)
        keeper = CountsKeeper(kind="prometheus", engine_port=engine_port(port), directory=str(kept),
                              read_path="/metrics", port=port + KEEPER_PORT_OFFSET)  # fmt: skip
        hook = start_hook(setup, execs=str(server), counts=keeper, fetch=True)
        directory = tmp_path / "hook"
        directory.mkdir()
        (directory / HOOK_MODULE).write_text(hook.text)
        env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path),
               **gateway_env(setup, port, counts=keeper), **hook_env(hook),
               "PYTHONPATH": str(directory), KEY_ENV: KEY, COUNTS_ENV: str(kept)}  # fmt: skip

        def container(
            served: list[int], then: signal.Signals, unread: tuple[int, ...] = ()
        ) -> tuple[int, float | None, str]:
            """One container start: serve `served`, read the count, serve `unread`, end the
            server."""
            out = tmp_path / f"out-{len(list(tmp_path.glob('out-*')))}"
            with out.open("w") as said:
                proc = subprocess.Popen([sys.executable, str(convert), *flags], env=env,
                                        stdout=said, stderr=said,
                                        start_new_session=True)  # fmt: skip
                try:
                    assert predicted(port) is not None
                    for tokens in served:
                        assert (
                            keyed_call(port, "POST", "/v1/completions", {"max_tokens": tokens})[0]
                            == 200
                        )
                    count = predicted(port)
                    for tokens in unread:
                        asked = {"max_tokens": tokens}
                        assert keyed_call(port, "POST", "/v1/completions", asked)[0] == 200
                    if then is signal.SIGKILL:  # the server dies on its own
                        pid = re.search(r"the-server-starts (\d+)", out.read_text())
                        assert pid is not None
                        os.kill(int(pid.group(1)), signal.SIGKILL)
                    else:
                        proc.send_signal(then)  # the container is stopped
                    code = proc.wait(timeout=30)
                finally:
                    stop_gateway(out.read_text())
                    ended(proc)
            return code, count, out.read_text()

        code, count, said = container([7, 7, 7], signal.SIGTERM)
        assert count == 21.0 and code == 128 + signal.SIGTERM, said
        assert KEY not in said and "the-convert-script-runs" not in said
        # The next start's server counts from zero; the keeper adds what the last one counted.
        # What it served after the last read is written down when the stop signal comes.
        code, count, said = container([5], signal.SIGTERM, unread=(4,))
        assert count == 26.0 and code == 128 + signal.SIGTERM, said
        assert len(list(kept.glob("start-*.json"))) == 2
        # A server that dies on its own ends the container with its status (a crash loop).
        code, count, said = container([], signal.SIGKILL)
        assert count == 30.0 and code == 128 + signal.SIGKILL, said
        # Without the directory the hook execs the server in its place: the gateway finds no
        # keeper where it sends the counters route.
        del env[COUNTS_ENV]
        out = tmp_path / "out-plain"
        with out.open("w") as said_file:
            proc = subprocess.Popen([sys.executable, str(convert), *flags], env=env,
                                    stdout=said_file, stderr=said_file,
                                    start_new_session=True)  # fmt: skip
            try:
                deadline = time.monotonic() + 30
                while "the-server-starts" not in out.read_text() and time.monotonic() < deadline:
                    time.sleep(0.1)
                assert keyed_call(port, "GET", "/metrics")[0] == 502
            finally:
                stop_gateway(out.read_text())
                ended(proc)
