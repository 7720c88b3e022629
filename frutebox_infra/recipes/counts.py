"""The counts keeper: the counters of an engine that counts only in its memory (llama.cpp's
`/metrics`, ComfyUI's `/history`), or not at all (Ollama, whose answers carry their counts),
kept in a directory on the volume so a container restart loses nothing the engine had counted.

The keeper is a small program of ours that the pod runs in the engine's place (llama.cpp's
start hook execs it, ComfyUI's and Ollama's launch scripts exec it); it runs the engine as its
child and stays the container's first process, so the container's stop signal reaches it first.
It reads the engine's counters on loopback (or, for Ollama, counts what the answers it passes on
carry) every KEEP_EVERY_S seconds, at every read of its own and when a stop signal comes,
before it passes the signal on; writes each read whole (a temporary file, then a rename) as the
one file of this container start in the directory; answers the gateway's counters route with
the sum of every start's file, in Prometheus' text format; and ends with the engine's status
(128 + the signal's number when a signal ended it), so a crash loop is seen as before.
prometheus_client's multiprocess files do the same for SGLang and vLLM.
"""

from __future__ import annotations

import json
import shlex
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

COMFYUI_REMEMBER = 10_000 + COMFYUI_WINDOW
"""How many prompt ids the keeper remembers: ComfyUI keeps at most 10,000 in its history
(`MAXIMUM_HISTORY_SIZE`, ComfyUI `execution.py`), so an id older than that never shows again,
while one a client's delete lets slide back into the window is still known."""

COMFYUI_COUNTER = "comfyui:prompts_executed_total"
"""The counter the keeper makes of ComfyUI's history: prompts whose execution ended."""

KEEPER_PATH = "/metrics"
"""Where the keeper answers when the engine has no metrics route of its own (ComfyUI)."""

OLLAMA_COUNTERS = (
    "ollama:eval_count_total",
    "ollama:eval_duration_seconds_total",
    "ollama:answers_without_count_total",
)
"""The counters the keeper makes of the answers it passes on for Ollama: output tokens
(`eval_count`, or an OpenAI-style answer's `usage.completion_tokens`), decode seconds
(`eval_duration`), and answers that carried no count (an OpenAI-style stream whose client did
not ask for `stream_options.include_usage`)."""

KeeperKind = Literal["prometheus", "comfyui-history", "ollama-answers"]


def keeper_port(port: int) -> int:
    """Where the keeper answers the counters when the gateway publishes `port`."""
    return port + KEEPER_PORT_OFFSET


@dataclass(frozen=True, kw_only=True)
class CountsKeeper:
    """How one engine's counters are kept: where the keeper reads them and how, and where it
    answers (the gateway sends `GET path` to 127.0.0.1:`port`)."""

    kind: KeeperKind
    directory: str
    """Where on the volume it keeps the counters (the pod's COUNTS_ENV)."""
    engine_port: int
    """Where the engine listens on loopback."""
    read_path: str
    """What the keeper reads on the engine: its metrics route, or ComfyUI's history."""
    port: int
    path: str = KEEPER_PATH
    """The route the keeper answers, which the gateway forwards to it with the key."""
    proxies: tuple[str, ...] = ()
    """Routes the gateway sends to the keeper, which passes them on to the engine and counts
    what their answers carry (Ollama, which keeps no counters at all)."""

    @property
    def routes(self) -> tuple[str, ...]:
        """Every route the gateway sends to the keeper."""
        return (self.path, *self.proxies)

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
                "remember": COMFYUI_REMEMBER,
                "engine_port": self.engine_port,
                "proxies": list(self.proxies),
                "answers": list(OLLAMA_COUNTERS),
            },
            sort_keys=True,
        )


def keeper_words(counts: CountsKeeper, *, python: str) -> str:
    """A launch script's words that run the keeper, before the engine's command: the program
    and its directory from the pod's env, its parameters from here (`python` as the script
    names the image's interpreter)."""
    return f'{python} -I -c "${KEEPER_ENV}" "${COUNTS_ENV}" {shlex.quote(counts.params)}'


def keeper_env(counts: CountsKeeper) -> dict[str, str]:
    """The pod variables a kept pod's launch reads: the keeper's program and its directory."""
    return {KEEPER_ENV: KEEPER_PY, COUNTS_ENV: counts.directory}


KEEPER_PY = r'''"""The frutebox counts keeper (frutebox_infra/recipes/counts.py).
Arguments: the directory to keep the counters in ("" runs the engine in this process's place),
the parameters, the engine's command."""
import glob, http.client, json, os, re, signal, subprocess, sys, threading, time
import urllib.request, uuid
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
latest, seen, lock = {}, {}, threading.Lock()
direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy
if c["kind"] == "ollama-answers":
    latest.update(dict.fromkeys(c["answers"], 0.0))  # counted from the start, served or not


def counters(text):
    """The engine's counters: every series its text format types `counter` (named `_total`);
    or, for ComfyUI's history, the count of prompt ids not seen before."""
    if c["kind"] == "comfyui-history":
        new = [i for i in json.loads(text) if i not in seen]
        for i in new:
            seen[i] = None
        while len(seen) > c["remember"]:
            del seen[next(iter(seen))]
        return {c["counter"]: latest.get(c["counter"], 0.0) + len(new)}
    kinds, read = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            words = line.split()
            if len(words) >= 4:
                kinds[words[2]] = words[3]
            continue
        m = series.match(line)
        name = m.group(1).split("{", 1)[0] if m else ""
        if kinds.get(name) == "counter" and name.endswith("_total"):
            try:
                read[m.group(1)] = float(m.group(2))
            except ValueError:
                pass
    return read


def sample(timeout=5.0):
    """None once the engine's counters are read and written down, else why not (the counts
    of answers passed on are the keeper's own: only written down). The engine is read outside
    the lock, so a slow read never holds up a stop signal's."""
    text = None
    if c["kind"] != "ollama-answers":
        try:
            with direct.open(c["read"], timeout=timeout) as r:
                text = r.read().decode()
        except Exception as e:
            return str(e)
    if not lock.acquire(timeout=timeout):
        return "another read is writing"
    try:
        if text is not None:
            try:
                read = counters(text)
            except ValueError as e:
                return "the engine's answer cannot be read (" + str(e) + ")"
            for k, v in read.items():
                latest[k] = max(latest.get(k, 0.0), v)
        try:
            with open(mine + ".part", "w") as f:
                json.dump(latest, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(mine + ".part", mine)
        except OSError as e:
            return "cannot write " + kept + " (" + str(e) + ")"
    finally:
        lock.release()
    return None


def total():
    """The sum of every start's counts; a file that cannot be read raises (a sum without it
    would look like counters that started over, and count them all again)."""
    sums = {}
    for path in sorted(glob.glob(os.path.join(kept, "start-*.json"))):
        try:
            with open(path) as f:
                values = json.load(f)
        except (OSError, ValueError) as e:
            raise ValueError(path + " cannot be read (" + str(e) + "): repair or remove it")
        for k, v in values.items():
            sums[k] = sums.get(k, 0.0) + v
    return sums


class Tally:
    """What an answer carries about its generation, read line by line as it passes: Ollama's
    final object's eval_count and eval_duration (ns), or an OpenAI-style answer's (or stream
    chunk's, `data: ...`) usage.completion_tokens."""

    def __init__(self):
        self.rest, self.tokens, self.seconds, self.counted = b"", 0, 0.0, False

    def feed(self, data):
        *lines, self.rest = (self.rest + data).split(b"\n")
        for line in lines:
            self.line(line)

    def line(self, line):
        if b'"eval_count"' not in line and b'"completion_tokens"' not in line:
            return
        text = line.strip()
        if text.startswith(b"data:"):
            text = text[5:].strip()
        try:
            answer = json.loads(text)
        except ValueError:
            return
        if not isinstance(answer, dict):
            return
        usage = answer.get("usage")
        if isinstance(answer.get("eval_count"), int):
            self.tokens += answer["eval_count"]
            duration = answer.get("eval_duration")
            self.seconds += duration / 1e9 if isinstance(duration, int) else 0.0
            self.counted = True
        elif isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            self.tokens += usage["completion_tokens"]
            self.counted = True

    def done(self):
        self.line(self.rest)
        tokens, seconds, uncounted = c["answers"]
        with lock:
            latest[tokens] = latest.get(tokens, 0.0) + self.tokens
            latest[seconds] = latest.get(seconds, 0.0) + self.seconds
            latest[uncounted] = latest.get(uncounted, 0.0) + (0 if self.counted else 1)


HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
       "upgrade", "content-length", "host"}


class Counts(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms ACK wait

    def do_GET(self):
        if self.path.split("?", 1)[0] != c["path"]:
            self.pass_on()
            return
        self.counts()

    def do_POST(self):
        self.pass_on()

    do_HEAD = do_PUT = do_DELETE = do_PATCH = do_POST

    def answer(self, code, text):
        data = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def request_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else None

    def pass_on(self):
        """The request passed on to the engine as it came, its answer passed back as it comes
        (streamed), and what the answer carries counted."""
        if self.path.split("?", 1)[0] not in c["proxies"]:
            self.answer(404, "not a route of the counts keeper\n")
            return
        body = self.request_body()
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        engine = http.client.HTTPConnection("127.0.0.1", c["engine_port"])
        try:
            engine.request(self.command, self.path, body=body, headers=headers)
            got = engine.getresponse()
        except OSError as e:
            engine.close()
            self.answer(502, "the engine is not answering: " + str(e) + "\n")
            return
        try:
            self.send_response_only(got.status, got.reason)
            for k, v in got.getheaders():
                if k.lower() not in HOP:
                    self.send_header(k, v)
            length = got.getheader("Content-Length")
            chunked = length is None and self.command != "HEAD" and got.status not in (204, 304)
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            elif length is not None:
                self.send_header("Content-Length", length)
            self.end_headers()
            tally = Tally()
            while True:
                data = got.read1(65536)
                if not data:
                    break
                tally.feed(data)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
                self.wfile.flush()
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
            if got.status == 200:
                tally.done()
        finally:
            engine.close()

    def counts(self):
        why, sums = sample(), {}
        if why is None:
            try:
                sums = total()
            except ValueError as e:
                why = str(e)
        if why is None:
            lines, typed = [], set()
            for k, v in sorted(sums.items()):
                name = k.split("{", 1)[0]
                if name not in typed:
                    typed.add(name)
                    lines.append("# TYPE " + name + " counter")
                lines.append(k + " " + repr(v))
            code, body = 200, "\n".join(lines) + "\n"
        else:
            code, body = 503, "the engine's counters cannot be read: " + why + "\n"
        self.answer(code, body)

    def log_message(self, *args):
        pass


try:
    server = ThreadingHTTPServer(("127.0.0.1", c["port"]), Counts)
except OSError as e:
    print("counts keeper: cannot listen on 127.0.0.1:" + str(c["port"]) + " (" + str(e) + ")",
          file=sys.stderr, flush=True)
    sys.exit(1)
threading.Thread(target=server.serve_forever, daemon=True).start()
stops = []
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, lambda signum, frame: stops.append(signum))
child = subprocess.Popen(argv)
last = time.monotonic()
while True:
    try:
        code = child.wait(timeout=0.2)
        break
    except subprocess.TimeoutExpired:
        pass
    if stops:
        sample(timeout=1.0)  # a stop grants seconds: never hold the signal up for long
        while stops:
            child.send_signal(stops.pop(0))
    elif time.monotonic() - last >= c["every_s"]:
        sample()
        last = time.monotonic()
sys.stdout.flush()
os._exit(code if code >= 0 else 128 - code)
'''
"""The keeper's program: standard library only, for whichever Python the engine's image has."""
