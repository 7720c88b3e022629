"""The counts keeper: the counters of an engine that counts only in its memory (llama.cpp's
`/metrics`, ComfyUI's `/history`), kept in a directory on the volume so a container restart
loses nothing the engine had counted.

The keeper is a small program of ours that the pod runs in the engine's place (llama.cpp's
start hook execs it, ComfyUI's launch script execs it); it runs the engine as its child and
stays the container's first process, so the container's stop signal reaches it first. It reads
the engine's counters on loopback every KEEP_EVERY_S seconds, at every read of its own and when
a stop signal comes, before it passes the signal on; writes each read whole (a temporary file,
then a rename) as the one file of this container start in the directory; answers the gateway's
counters route with the sum of every start's file, in Prometheus' text format; and ends with
the engine's status (128 + the signal's number when a signal ended it), so a crash loop is
seen as before. prometheus_client's multiprocess files do the same for SGLang and vLLM.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

COUNTS_ENV = "FRUTEBOX_COUNTS_DIR"
"""The pod variable naming the directory on the volume the keeper keeps the counters in."""

KEEPER_ENV = "FRUTEBOX_COUNTS_KEEPER"
"""The pod variable holding the keeper's program (KEEPER_PY): a launch runs it with
`python -c "$FRUTEBOX_COUNTS_KEEPER"`, so the program is in one place, not in every launch."""

KEEPER_PORT_OFFSET = 20_000
"""The keeper answers on loopback at the image's port plus this."""

KEEP_EVERY_S = 5.0
"""How often the keeper writes the engine's counters down between reads and stops: what an
engine that dies on its own (no stop signal) counted since is lost."""

COMFYUI_WINDOW = 64
"""How many of ComfyUI's latest history entries each read asks for (`/history?max_items=`):
the keeper counts prompt ids it has not seen, so more prompts than this finishing between two
reads (5 s) would be missed."""

COMFYUI_COUNTER = "comfyui:prompts_executed_total"
"""The counter the keeper makes of ComfyUI's history: prompts whose execution ended."""

KEEPER_PATH = "/metrics"
"""Where the keeper answers when the engine has no metrics route of its own (ComfyUI)."""

KeeperKind = Literal["prometheus", "comfyui-history"]


def keeper_port(port: int) -> int:
    """Where the keeper answers the counters when the gateway publishes `port`."""
    return port + KEEPER_PORT_OFFSET


@dataclass(frozen=True, kw_only=True)
class CountsKeeper:
    """How one engine's counters are kept: where the keeper reads them and how, and where it
    answers (the gateway sends `GET path` to 127.0.0.1:`port`)."""

    kind: KeeperKind
    engine_port: int
    """Where the engine listens on loopback."""
    read_path: str
    """What the keeper reads on the engine: its metrics route, or ComfyUI's history."""
    port: int
    path: str = KEEPER_PATH
    """The route the keeper answers, which the gateway forwards to it with the key."""

    @property
    def params(self) -> str:
        """The keeper's parameters, as its second argument."""
        query = f"?max_items={COMFYUI_WINDOW}" if self.kind == "comfyui-history" else ""
        return json.dumps(
            {
                "kind": self.kind,
                "read": f"http://127.0.0.1:{self.engine_port}{self.read_path}{query}",
                "port": self.port,
                "path": self.path,
                "every_s": KEEP_EVERY_S,
                "counter": COMFYUI_COUNTER,
            },
            sort_keys=True,
        )


def keeper_env() -> dict[str, str]:
    """The pod variables a kept pod's launch reads (its directory is the recipe's to name)."""
    return {KEEPER_ENV: KEEPER_PY}


KEEPER_PY = r'''"""The frutebox counts keeper (frutebox_infra/recipes/counts.py).
Arguments: the directory to keep the counters in ("" runs the engine in this process's place),
the parameters, the engine's command."""
import glob, json, os, re, signal, subprocess, sys, threading, time, urllib.request, uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

kept, c, argv = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3:]
if not kept:
    os.execvp(argv[0], argv)
try:
    os.makedirs(kept, exist_ok=True)
except OSError as e:
    print("counts keeper: cannot make " + kept + " (" + str(e) + ")", file=sys.stderr, flush=True)
    sys.exit(1)
mine = os.path.join(kept, "start-" + uuid.uuid4().hex + ".json")
series = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*(?:\{[^}]*\})?)[ \t]+([^ \t]+)")
latest, seen, lock = {}, set(), threading.Lock()


def counters(text):
    """The engine's counters: every series its text format types `counter`; or, for ComfyUI's
    history, the count of prompt ids not seen before."""
    if c["kind"] == "comfyui-history":
        ids = list(json.loads(text))
        new = len([i for i in ids if i not in seen])
        seen.clear()
        seen.update(ids)
        return {c["counter"]: latest.get(c["counter"], 0.0) + new}
    kinds, read = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            words = line.split()
            if len(words) >= 4:
                kinds[words[2]] = words[3]
            continue
        m = series.match(line)
        if m and kinds.get(m.group(1).split("{", 1)[0]) == "counter":
            try:
                read[m.group(1)] = float(m.group(2))
            except ValueError:
                pass
    return read


def sample():
    """None once the engine's counters are read and written down, else why not."""
    with lock:
        try:
            with urllib.request.urlopen(c["read"], timeout=5) as r:
                read = counters(r.read().decode())
        except Exception as e:
            return str(e)
        for k, v in read.items():
            latest[k] = max(latest.get(k, 0.0), v)
        try:
            with open(mine + ".part", "w") as f:
                json.dump(latest, f)
            os.replace(mine + ".part", mine)
        except OSError as e:
            return "cannot write " + kept + " (" + str(e) + ")"
    return None


def total():
    sums = {}
    for path in sorted(glob.glob(os.path.join(kept, "start-*.json"))):
        try:
            with open(path) as f:
                values = json.load(f)
        except (OSError, ValueError):
            continue
        for k, v in values.items():
            sums[k] = sums.get(k, 0.0) + v
    return sums


class Counts(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path.split("?", 1)[0] != c["path"]:
            self.send_error(404)
            return
        why = sample()
        if why is None:
            lines, typed = [], set()
            for k, v in sorted(total().items()):
                name = k.split("{", 1)[0]
                if name not in typed:
                    typed.add(name)
                    lines.append("# TYPE " + name + " counter")
                lines.append(k + " " + repr(v))
            code, body = 200, "\n".join(lines) + "\n"
        else:
            code, body = 503, "the engine's counters cannot be read: " + why + "\n"
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


try:
    server = ThreadingHTTPServer(("127.0.0.1", c["port"]), Counts)
except OSError as e:
    print("counts keeper: cannot listen on 127.0.0.1:" + str(c["port"]) + " (" + str(e) + ")",
          file=sys.stderr, flush=True)
    sys.exit(1)
threading.Thread(target=server.serve_forever, daemon=True).start()
child = subprocess.Popen(argv)
stops = []
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, lambda signum, frame: stops.append(signum))
last = time.monotonic()
while True:
    try:
        code = child.wait(timeout=0.2)
        break
    except subprocess.TimeoutExpired:
        pass
    if stops:
        sample()
        while stops:
            child.send_signal(stops.pop(0))
    elif time.monotonic() - last >= c["every_s"]:
        sample()
        last = time.monotonic()
sys.stdout.flush()
os._exit(code if code >= 0 else 128 - code)
'''
"""The keeper's program: standard library only, for whichever Python the engine's image has."""
