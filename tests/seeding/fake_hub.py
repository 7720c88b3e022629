"""A Hugging Face Hub, its CDN and Ollama's registry on loopback, as unkind as the real ones.

The hub answers the API the seeder uses (`/api/models/{repo}/revision/{rev}`, the paginated
`/tree/{commit}[/{path}]` listing with `oid`/`size`/`lfs`), `resolve` (LFS files redirect to
the CDN, a second server on another port, so "another host" is real; small files answer
directly with their git oid as ETag) and the error codes huggingface_hub reads: 401 GatedRepo
without a token, 401 RepoNotFound for a missing repo without one (404 with one),
RevisionNotFound, EntryNotFound. The CDN serves Range requests and can stall, drop, ignore the
range or corrupt a body. Every request is recorded with its headers.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

TOKEN = "hf_" + "t" * 34
"""The one token the fake hub accepts."""


def git_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def is_lfs(path: str) -> bool:
    return path.endswith((".safetensors", ".gguf", ".bin", ".pth"))


@dataclass
class Repo:
    files: dict[str, bytes]
    commit: str = "c" * 40
    branches: dict[str, str] = field(default_factory=dict)
    gated: bool = False

    def __post_init__(self) -> None:
        self.branches.setdefault("main", self.commit)


@dataclass
class Seen:
    host: str
    method: str
    path: str
    headers: dict[str, str]


@dataclass
class Unkindness:
    """What the CDN does to a blob (keyed by sha256)."""

    stall_after: dict[str, int] = field(default_factory=dict)
    """Send the file up to this offset, then nothing until `release` is set (every time)."""
    drop_once_after: dict[str, int] = field(default_factory=dict)
    """Close the connection after this many bytes, the first time only."""
    corrupt: set[str] = field(default_factory=set)
    refuse: set[str] = field(default_factory=set)
    """Answer 403, as storage does to a link whose signature it will not take."""
    ignore_range: set[str] = field(default_factory=set)
    gate: dict[str, threading.Event] = field(default_factory=dict)
    """Hold the response until the event is set (a download that is still running)."""
    release: threading.Event = field(default_factory=threading.Event)


class FakeHub:
    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.ollama: dict[str, tuple[bytes, dict[str, bytes]]] = {}
        """`name:tag` -> (manifest bytes, blobs by sha256)."""
        self.blobs: dict[str, bytes] = {}
        self.releases: dict[str, str] = {}
        """Release assets (`<hub>/releases/<name>`) -> the sha256 of their bytes on the CDN."""
        self.seen: list[Seen] = []
        self.unkind = Unkindness()
        self.page_size = 2
        self.retry_once: set[str] = set()
        """API paths answered 429 (Retry-After: 0) the first time."""
        self._lock = threading.Lock()
        self.hub_url = self.cdn_url = ""

    # --- content ---------------------------------------------------------------------

    def add_repo(self, repo_id: str, repo: Repo) -> Repo:
        self.repos[repo_id] = repo
        for data in repo.files.values():
            self.blobs[sha256(data)] = data
        return repo

    def add_ollama(self, tag: str, layers: list[bytes]) -> bytes:
        config = json.dumps({"model_format": "gguf"}).encode()
        blobs = {sha256(b): b for b in [config, *layers]}
        self.blobs.update(blobs)
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                "config": {"digest": f"sha256:{sha256(config)}", "size": len(config)},
                "layers": [
                    {"digest": f"sha256:{sha256(b)}", "size": len(b), "mediaType": "x"}
                    for b in layers
                ],
            }
        ).encode()
        self.ollama[tag] = (manifest, blobs)
        return manifest

    def add_release(self, name: str, data: bytes) -> str:
        """A release asset served as a release host serves one (a redirect to its storage);
        its URL."""
        self.releases[name] = sha256(data)
        self.blobs[sha256(data)] = data
        return f"{self.hub_url}/releases/{name}"

    def requests_to(self, host: str, prefix: str = "") -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if s.host == host and s.path.startswith(prefix)]

    # --- the hub -----------------------------------------------------------------------

    def hub_answer(self, handler: Handler) -> None:
        path = urllib.parse.urlsplit(handler.path)
        parts = [urllib.parse.unquote(p) for p in path.path.split("/")[1:]]
        query = urllib.parse.parse_qs(path.query)
        if path.path in self.retry_once:
            self.retry_once.discard(path.path)
            handler.reply(429, b"slow down", {"Retry-After": "0"})
        elif parts[:1] == ["v2"]:
            self.registry_answer(handler, parts[1:])
        elif parts[:1] == ["releases"]:
            digest = self.releases.get("/".join(parts[1:]))
            if digest is None:
                handler.reply(404, b"Not Found")
            else:
                handler.reply(302, b"", {"Location": f"{self.cdn_url}/blob/{digest}"})
        elif parts[:2] == ["api", "models"] and len(parts) >= 6:
            repo_id, verb, rest = "/".join(parts[2:4]), parts[4], parts[5:]
            repo = self.allowed(handler, repo_id)
            if repo is None:
                return
            if verb == "revision":
                commit = self.commit_of(repo, "/".join(rest))
                if commit is None:
                    handler.reply(404, b"{}", {"X-Error-Code": "RevisionNotFound"})
                else:
                    handler.reply_json({"id": repo_id, "sha": commit})
            elif verb == "tree":
                self.tree_answer(handler, repo, rest, query)
            else:
                handler.reply(404, b"{}")
        elif len(parts) >= 5 and parts[2] == "resolve":
            repo_id = "/".join(parts[:2])
            if repo_id.startswith("renamed/"):  # a moved repo: same host, relative redirect
                target = "/" + "/".join(["org", *parts[1:]])
                handler.reply(307, b"", {"Location": urllib.parse.quote(target)})
                return
            repo = self.allowed(handler, repo_id)
            if repo is not None:
                self.resolve_answer(handler, repo, parts[3], "/".join(parts[4:]))
        else:
            handler.reply(404, b"{}", {"X-Error-Code": "RepoNotFound"})

    def allowed(self, handler: Handler, repo_id: str) -> Repo | None:
        auth = handler.headers.get("Authorization")
        if auth is not None and auth != f"Bearer {TOKEN}":
            handler.reply(
                401, b"{}", {"X-Error-Message": "Invalid credentials in Authorization header"}
            )
            return None
        repo = self.repos.get(repo_id)
        if repo is None:
            # The real hub cannot say "missing" to an anonymous caller: it may be private.
            handler.reply(401 if auth is None else 404, b"{}", {"X-Error-Code": "RepoNotFound"})
            return None
        if repo.gated and auth is None:
            handler.reply(401, b"{}", {"X-Error-Code": "GatedRepo"})
            return None
        return repo

    def commit_of(self, repo: Repo, revision: str) -> str | None:
        if revision == repo.commit or revision in repo.branches:
            return repo.branches.get(revision, repo.commit)
        return None

    def tree_answer(self, handler: Handler, repo: Repo, rest: list[str], query: Any) -> None:
        if not rest or self.commit_of(repo, rest[0]) is None:
            handler.reply(404, b"{}", {"X-Error-Code": "RevisionNotFound"})
            return
        folder = "/".join(rest[1:])
        recursive = query.get("recursive") == ["true"]
        entries = []
        for path, data in sorted(repo.files.items()):
            inside = path.startswith(folder + "/") if folder else True
            below = path[len(folder) + 1 :] if folder else path
            if not inside or (not recursive and "/" in below):
                continue
            entry: dict[str, Any] = {
                "type": "file",
                "oid": git_oid(data),
                "size": len(data),
                "path": path,
            }
            if is_lfs(path):
                entry["lfs"] = {"oid": sha256(data), "size": len(data), "pointerSize": 134}
            entries.append(entry)
        if folder and not entries:
            handler.reply(404, b"{}", {"X-Error-Code": "EntryNotFound"})
            return
        start = int(query.get("cursor", ["0"])[0])
        page = entries[start : start + self.page_size]
        headers = {}
        if start + self.page_size < len(entries):
            nxt = urllib.parse.urlsplit(handler.path)._replace(
                query=urllib.parse.urlencode(
                    {**{k: v[0] for k, v in query.items()}, "cursor": start + self.page_size}
                )
            )
            headers["Link"] = f'<{self.hub_url}{nxt.geturl()}>; rel="next"'
        handler.reply_json(page, headers)

    def resolve_answer(self, handler: Handler, repo: Repo, revision: str, path: str) -> None:
        commit = self.commit_of(repo, revision)
        if commit is None:
            handler.reply(404, b"{}", {"X-Error-Code": "RevisionNotFound"})
            return
        data = repo.files.get(path)
        if data is None:
            handler.reply(404, b"{}", {"X-Error-Code": "EntryNotFound"})
            return
        common = {"X-Repo-Commit": commit}
        if is_lfs(path):
            location = f"{self.cdn_url}/blob/{sha256(data)}?X-Amz-Signature=s3cr3t"
            linked = {"X-Linked-Etag": f'"{sha256(data)}"', "X-Linked-Size": str(len(data))}
            handler.reply(302, b"", {**common, "Location": location, **linked})
        else:
            handler.send_ranged(data, {**common, "ETag": f'"{git_oid(data)}"'})

    def registry_answer(self, handler: Handler, parts: list[str]) -> None:
        # /v2/<namespace>/<name>/manifests/<tag> and /v2/<namespace>/<name>/blobs/sha256:<hex>
        if len(parts) == 4 and parts[2] == "manifests":
            tag = (
                f"{parts[1]}:{parts[3]}"
                if parts[0] == "library"
                else f"{parts[0]}/{parts[1]}:{parts[3]}"
            )
            found = self.ollama.get(tag)
            if found is None:
                handler.reply(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN"}]}')
            else:
                handler.reply(
                    200,
                    found[0],
                    {"Content-Type": "application/vnd.docker.distribution.manifest.v2+json"},
                )
        elif len(parts) == 4 and parts[2] == "blobs":
            digest = parts[3].removeprefix("sha256:")
            handler.reply(307, b"", {"Location": f"{self.cdn_url}/blob/{digest}"})
        else:
            handler.reply(404, b"{}")

    # --- the CDN -------------------------------------------------------------------------

    def cdn_answer(self, handler: Handler) -> None:
        digest = urllib.parse.urlsplit(handler.path).path.removeprefix("/blob/")
        data = self.blobs.get(digest)
        if data is None:
            handler.reply(404, b"no such blob")
            return
        if digest in self.unkind.refuse:
            handler.reply(403, b"<Error>AccessDenied</Error>")
            return
        if digest in self.unkind.gate:
            self.unkind.gate[digest].wait(30)
        if digest in self.unkind.corrupt:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        handler.send_ranged(
            data,
            {},
            honour_range=digest not in self.unkind.ignore_range,
            stall_after=self.unkind.stall_after.get(digest),
            drop_after=self.unkind.drop_once_after.pop(digest, None),
            release=self.unkind.release,
        )


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeHub
    role: str

    def do_GET(self) -> None:
        with self.fake._lock:
            self.fake.seen.append(Seen(self.role, "GET", self.path, dict(self.headers.items())))
        (self.fake.hub_answer if self.role == "hub" else self.fake.cdn_answer)(self)

    def reply(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def reply_json(self, body: Any, headers: dict[str, str] | None = None) -> None:
        self.reply(
            200, json.dumps(body).encode(), {"Content-Type": "application/json", **(headers or {})}
        )

    def send_ranged(self, data: bytes, headers: dict[str, str], *, honour_range: bool = True,
                    stall_after: int | None = None, drop_after: int | None = None,
                    release: threading.Event | None = None) -> None:  # fmt: skip
        start = 0
        asked = self.headers.get("Range", "")
        if honour_range and asked.startswith("bytes=") and asked.endswith("-"):
            start = int(asked[6:-1])
        body = data[start:]
        self.send_response(206 if start else 200)
        for name, value in headers.items():
            self.send_header(name, value)
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        cut = min(x for x in (stall_after, drop_after, len(data)) if x is not None)
        sent = max(0, cut - start)
        self.wfile.write(body[:sent])
        self.wfile.flush()
        if stall_after is not None and release is not None:
            release.wait(60)
            self.close_connection = True
            return
        if drop_after is not None and start < drop_after:
            self.close_connection = True
            return
        self.wfile.write(body[sent:])

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def running_hub() -> Iterator[FakeHub]:
    fake = FakeHub()
    servers = []
    for role in ("hub", "cdn"):
        handler = type(f"{role}Handler", (Handler,), {"fake": fake, "role": role})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(server)
        url = f"http://127.0.0.1:{server.server_address[1]}"
        if role == "hub":
            fake.hub_url = url
        else:
            fake.cdn_url = url
    try:
        yield fake
    finally:
        fake.unkind.release.set()
        for event in fake.unkind.gate.values():
            event.set()
        for server in servers:
            server.shutdown()
            server.server_close()
