"""The seeder: puts model weights on a RunPod network volume from a CPU pod, then serves its
status until it is terminated.

One self-contained file, standard library only: it runs in a slim Python image, delivered in
the pod's environment (`FRUTEBOX_SEEDER`) and started by the pod's args. Its input is the seed
plan (`FRUTEBOX_SEED_PLAN`, frutebox_infra/seeding/protocol.py SeedPlan); its output is
`GET /status` (protocol.py SeedStatus). RunPod restarts a container that exits, so it never
exits by itself: it seeds, then serves the result until the pod is terminated.

Per file it skips what is complete, resumes a partial download (HTTP Range), checks the size
and the hash the source publishes (sha256 for LFS files and Ollama blobs, the git blob sha1
otherwise), and sends the Hugging Face token to the hub's own host only, never to the CDN a
redirect leads to. Before a model's weights it places the release archives its GPU pod's
launch checks (the gateway's, an engine's), each checked against its pinned SHA-512 or SHA-256
before it is renamed into place. A model fails alone, with the reason and the fix.
"""

from __future__ import annotations

import errno
import fnmatch
import hashlib
import http.client
import http.server
import json
import os
import re
import shutil
import signal
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any, TypeVar

_T = TypeVar("_T")

PLAN_ENV = "FRUTEBOX_SEED_PLAN"
TOKEN_ENV = "HF_TOKEN"
CHUNK = 1 << 20
ATTEMPTS = 5
"""Tries of one request through 429s, 5xx answers and dropped connections."""
STALL_RETRIES = 2
"""A stall is retried (resuming) this often before it fails the model."""
REDIRECTS = 10
COMMIT = re.compile(r"^[0-9a-f]{40}$")
SPLIT = re.compile(r"^(.+)-([0-9]{5})-of-([0-9]{5})$", re.IGNORECASE)
NOT_A_MODEL = ("mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-")
"""llama.cpp's sidecar GGUFs, which `-hf REPO:QUANT` never takes for the model."""
NO_SPACE = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
OLLAMA_HOST = "registry.ollama.ai"
OLLAMA_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"


class Failed(Exception):
    """The model cannot be seeded: what happened, and what to do."""

    def __init__(self, reason: str, fix: str = "") -> None:
        super().__init__(reason)
        self.reason, self.fix = reason, fix


class Transient(Exception):
    """Worth another try: 429, 5xx, a dropped connection."""

    def __init__(self, what: str, wait: float | None = None) -> None:
        super().__init__(what)
        self.wait = wait


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # redirects are followed by hand, to decide where the token goes


OPENER = urllib.request.build_opener(_NoRedirect)


class Client:
    """HTTP for one source. The token goes to `token_host` only: a redirect to another host
    (the CDN holding the file) gets the request without it."""

    def __init__(self, base: str, token: str | None, stall_s: float) -> None:
        self.base = base.rstrip("/")
        self.token_host = urllib.parse.urlsplit(self.base).netloc if token else None
        self.token, self.stall_s = token, stall_s

    def open(self, url: str, headers: dict[str, str] | None = None) -> Any:
        for _ in range(REDIRECTS):
            request = urllib.request.Request(url, headers=headers or {})
            if self.token and urllib.parse.urlsplit(url).netloc == self.token_host:
                request.add_header("Authorization", f"Bearer {self.token}")
            try:
                return OPENER.open(request, timeout=self.stall_s)
            except urllib.error.HTTPError as exc:
                location = exc.headers.get("Location")
                if exc.code in (301, 302, 303, 307, 308) and location:
                    exc.close()
                    url = urllib.parse.urljoin(url, location)
                    continue
                raise
            except (urllib.error.URLError, ConnectionError, http.client.HTTPException) as exc:
                if isinstance(getattr(exc, "reason", None), TimeoutError):
                    raise TimeoutError(str(exc)) from exc
                raise Transient(
                    f"no answer from {urllib.parse.urlsplit(url).netloc}: {exc}"
                ) from exc
        raise Failed(f"more than {REDIRECTS} redirects from {self.base}")

    def read(
        self, url: str, where: Where | OllamaWhere, headers: dict[str, str] | None = None
    ) -> bytes:
        def once() -> bytes:
            try:
                with self.open(url, headers) as response:
                    data: bytes = response.read()
                    return data
            except urllib.error.HTTPError as exc:
                raise refused(exc, where, self) from None
            except TimeoutError as exc:
                raise Transient(f"no answer within {self.stall_s:g} s") from exc

        data: bytes = retrying(once, f"reading {where.label}")
        return data


class Where:
    """What a request was for, so an HTTP error names the repo, the revision or the file."""

    def __init__(self, hub: str, repo: str, revision: str, path: str = "") -> None:
        self.hub, self.repo, self.revision, self.path = hub, repo, revision, path

    @property
    def label(self) -> str:
        return f"{self.repo}@{self.revision}" + (f":{self.path}" if self.path else "")

    def explain(self, code: int, headers: Any, *, sent_token: bool) -> Exception:
        error, message = headers.get("X-Error-Code", ""), headers.get("X-Error-Message", "")
        page = f"{self.hub}/{self.repo}"
        source = "the model's source in registry/models.yaml"
        if code == 429 or code >= 500:
            wait = headers.get("Retry-After")
            return Transient(f"HTTP {code}", float(wait) if wait and wait.isdigit() else None)
        if error == "GatedRepo" and not sent_token:
            return Failed(
                f"{self.repo} is gated and no Hugging Face token was sent",
                f"set the stack secret frutebox-infra:hfToken (or HF_TOKEN) to a token of an"
                f" account that accepted the terms at {page}",
            )
        if error == "GatedRepo" or code == 403:
            return Failed(
                f"the Hugging Face token has no access to {self.repo}",
                f"accept the terms at {page} with the token's account, or set"
                " frutebox-infra:hfToken to a token that has access",
            )
        if code == 401 and sent_token and "credentials" in message.lower():
            return Failed(
                "Hugging Face refused the token (invalid credentials)",
                "set frutebox-infra:hfToken to a valid token",
            )
        if code == 401:
            gate = "" if sent_token else ", or it is private or gated and no token was sent"
            return Failed(
                f"{self.repo} was not found{gate}",
                f"correct the repo in {source}; a gated repo needs frutebox-infra:hfToken",
            )
        if code == 404 and error == "RevisionNotFound":
            return Failed(
                f"revision {self.revision} does not exist in {self.repo}",
                f"correct the revision in {source}",
            )
        if code == 404 and error == "RepoNotFound":
            return Failed(f"{self.repo} does not exist", f"correct the repo in {source}")
        if code == 404 and self.path:
            return Failed(
                f"{self.path} does not exist in {self.repo} at {self.revision}",
                f"correct the file in {source}",
            )
        if code == 404:
            return Failed(
                f"{self.repo} at revision {self.revision} was not found",
                f"correct the repo and revision in {source}",
            )
        return Failed(f"{self.label}: HTTP {code} {message}".rstrip())


def no_room(model_id: str, free: int, missing: int) -> Failed:
    """The volume cannot take what is left to fetch: said before any byte moves."""
    return Failed(
        f"the volume has {free / 1e9:.2f} GB free and {model_id} needs {missing / 1e9:.2f} GB more",
        "raise frutebox-infra:minVolumeGb (the volume grows, never shrinks) or disarm a model,"
        " then deploy again",
    )


def release_refused(url: str, code: int) -> Failed:
    """A release archive's URL answered an error (not a transient one)."""
    return Failed(
        f"the release {url} could not be fetched: HTTP {code}",
        "correct the url in registry/images.yaml (with its checksum), then deploy again",
    )


def release_mismatch(url: str, kind: str, got: str, want: str) -> Failed:
    """A fetched release archive is not the one its pin names: nothing is placed."""
    return Failed(
        f"the release {url} does not match its pinned {kind} (got {got}, registry/images.yaml"
        f" pins {want}); the download was discarded",
        "check the pin in registry/images.yaml against the checksum the release publishes,"
        " then deploy again",
    )


def refused(exc: urllib.error.HTTPError, where: Where | OllamaWhere, client: Client) -> Exception:
    """An HTTP error answer, explained for what was asked; the CDN a redirect led to speaks
    for the file's storage, not for the repo or the token."""
    exc.close()
    host = urllib.parse.urlsplit(exc.url or "").netloc
    if host and host != urllib.parse.urlsplit(client.base).netloc:
        if exc.code == 429 or exc.code >= 500:
            return Transient(f"{host} answered HTTP {exc.code}")
        return Failed(
            f"{where.label}: its storage host {host} answered HTTP {exc.code}",
            "retry the deploy (each try asks the source for a fresh link)",
        )
    explained: Exception = where.explain(exc.code, exc.headers, sent_token=client.token is not None)
    return explained


def retrying(attempt: Callable[[], _T], what: str) -> _T:
    for n in range(ATTEMPTS):
        try:
            return attempt()
        except Transient as exc:
            if n == ATTEMPTS - 1:
                raise Failed(f"{what}: {exc} ({ATTEMPTS} tries)", "retry the deploy") from None
            time.sleep(min(exc.wait if exc.wait is not None else 2**n, 60))
    raise AssertionError("unreachable")


class Digest:
    """The hash a source publishes for a file: sha256 (LFS, Ollama), a git blob sha1, or the
    sha512 or sha256 a release archive is pinned by (its size then unknown: 0)."""

    def __init__(self, kind: str, expected: str, size: int) -> None:
        self.kind, self.expected, self.size = kind, expected.lower(), size

    def new(self) -> Any:
        if self.kind != "git-sha1":
            return hashlib.new(self.kind)
        h = hashlib.sha1(usedforsecurity=False)
        h.update(b"blob %d\0" % self.size)
        return h

    def of_file(self, path: str) -> str:
        h = self.new()
        with open(path, "rb") as f:
            while chunk := f.read(CHUNK):
                h.update(chunk)
        return str(h.hexdigest())


class Job:
    """One model's progress, as GET /status reports it."""

    def __init__(self, model_id: str, lock: threading.Lock) -> None:
        self.model_id, self.lock = model_id, lock
        self.state = "pending"
        self.reason: str | None = None
        self.fix: str | None = None
        self.commit: str | None = None
        self.done = self.current = self.skipped = self.files_done = 0
        self.total: int | None = None
        self.files_total: int | None = None

    def as_json(self) -> dict[str, Any]:
        with self.lock:
            return {
                "modelId": self.model_id, "state": self.state,
                "bytesDone": self.done + self.current, "bytesTotal": self.total,
                "bytesSkipped": self.skipped, "filesDone": self.files_done,
                "filesTotal": self.files_total, "commit": self.commit,
                "reason": self.reason, "fix": self.fix,
            }  # fmt: skip

    def finished_file(self, size: int, *, skipped: bool) -> None:
        with self.lock:
            self.done += size
            self.current = 0
            self.files_done += 1
            self.skipped += size if skipped else 0


class Seeder:
    def __init__(self, plan: dict[str, Any], token: str | None) -> None:
        self.plan, self.root = plan, plan["volumePath"]
        self.stall_s = float(plan.get("stallSeconds", 120))
        self.hub = Client(plan.get("hubUrl", "https://huggingface.co"), token, self.stall_s)
        self.ollama = Client(plan.get("ollamaRegistryUrl", "https://registry.ollama.ai"), None,
                             self.stall_s)  # fmt: skip
        self.lock = threading.Lock()
        kinds = {"hf-snapshot", "files", "ollama"}
        if any(job["kind"] not in kinds for job in plan["jobs"]):
            raise ValueError(f"a job's kind is none of {sorted(kinds)}")
        self.jobs = [Job(job["modelId"], self.lock) for job in plan["jobs"]]
        self.file_locks: dict[str, threading.Lock] = {}

    def run(self, spec: dict[str, Any], job: Job) -> None:
        with self.lock:
            job.state = "running"
        try:
            self.place_archives(spec, job)
            self.place_texts(spec)
            {"hf-snapshot": self.seed_snapshot, "files": self.seed_files,
             "ollama": self.seed_ollama}[spec["kind"]](spec, job)  # fmt: skip
            state, reason, fix = "done", None, None
        except Failed as exc:
            state, reason, fix = "failed", exc.reason, exc.fix or None
        except Exception as exc:  # a bug must fail the model, never the whole pod
            state, reason, fix = "failed", f"seeder error: {exc!r}", "report it; retry the deploy"
        with self.lock:
            job.state, job.reason, job.fix, job.current = state, reason, fix, 0
        log(
            f"{job.model_id}: {state}"
            + (f": {reason}" + (f" Fix: {fix}" if fix else "") if reason else "")
        )

    def place_archives(self, spec: dict[str, Any], job: Job) -> None:
        """Release archives the GPU pod's launch checks at start (its gateway's, an engine's),
        before anything else: one already there that matches its pin is left alone; otherwise
        it is fetched to a private name, checked against its pin and only then renamed into
        place. One that cannot be fetched, or does not match, fails the job before any weight
        moves (and so before any GPU pod is created)."""
        for archive in spec.get("archives", ()):
            path = archive["path"]
            if not safe_relative(path):
                raise Failed(f"the seed plan names an unsafe path {path!r}", "report it")
            kind = "sha512" if archive.get("sha512") else "sha256"
            url, digest = archive["url"], Digest(kind, str(archive[kind]), 0)
            final = os.path.join(self.root, path)
            with self.lock:
                file_lock = self.file_locks.setdefault(final, threading.Lock())
            with file_lock:
                if os.path.isfile(final) and digest.of_file(final) == digest.expected:
                    job.finished_file(os.path.getsize(final), skipped=True)
                    continue
                part = f"{final}.{os.getpid()}.{threading.get_ident()}.part"
                try:
                    got = self.fetch_release(url, part, digest, job.model_id)
                    if got != digest.expected:
                        raise release_mismatch(url, kind, got, digest.expected)
                    size = os.path.getsize(part)
                    os.replace(part, final)
                except OSError as exc:
                    raise Failed(f"{path} could not be written on the volume: {exc}") from None
                finally:
                    if os.path.exists(part):
                        os.remove(part)
                log(f"{job.model_id}: placed {path} ({kind} checked)")
                job.finished_file(size, skipped=False)

    def fetch_release(self, url: str, part: str, digest: Digest, model_id: str) -> str:
        """`url` written to `part` whole (a release archive is small: a broken download starts
        over); its hex digest of `digest`'s kind."""
        client = Client(url, None, self.stall_s)
        os.makedirs(os.path.dirname(part), exist_ok=True)

        def once() -> str:
            h = digest.new()
            try:
                with client.open(url) as response, open(part, "wb") as out:
                    while chunk := receive(response):
                        write(out, chunk, model_id)
                        h.update(chunk)
            except urllib.error.HTTPError as exc:
                exc.close()
                if exc.code == 429 or exc.code >= 500:
                    raise Transient(f"HTTP {exc.code}") from None
                raise release_refused(url, exc.code) from None
            except TimeoutError as exc:
                raise Transient(f"no byte within {self.stall_s:g} s") from exc
            return str(h.hexdigest())

        got: str = retrying(once, f"fetching the release {url}")
        return got

    def place_texts(self, spec: dict[str, Any]) -> None:
        """Files of ours the GPU pod reads at start (its gateway's start hook), each written
        whole before any weight: a job is done only with them in place."""
        for placed in spec.get("texts", ()):
            path = placed["path"]
            if not safe_relative(path):
                raise Failed(f"the seed plan names an unsafe path {path!r}", "report it")
            try:
                write_atomic(os.path.join(self.root, path), placed["text"].encode())
            except OSError as exc:
                raise Failed(f"{path} could not be written on the volume: {exc}") from None

    # --- Hugging Face -------------------------------------------------------------------

    def resolve(self, repo: str, revision: str) -> str:
        url = f"{self.hub.base}/api/models/{repo}/revision/{urllib.parse.quote(revision, safe='')}"
        info = json.loads(self.hub.read(url, Where(self.hub.base, repo, revision)))
        commit = info.get("sha") if isinstance(info, dict) else None
        if not isinstance(commit, str) or not COMMIT.match(commit):
            raise Failed(f"{repo}@{revision}: the hub named no commit for the revision")
        return commit

    def tree(
        self, repo: str, commit: str, folder: str, *, recursive: bool, where: Where | None = None
    ) -> list[dict[str, Any]]:
        """The files below `folder` at `commit`, following the listing's `Link: rel=next`;
        an error names `where` (what the listing was for)."""
        quoted = urllib.parse.quote(folder, safe="/")
        url: str | None = (
            f"{self.hub.base}/api/models/{repo}/tree/{commit}"
            + (f"/{quoted}" if folder else "")
            + ("?recursive=true" if recursive else "")
        )
        files: list[dict[str, Any]] = []
        where = where or Where(self.hub.base, repo, commit, folder)
        while url:
            page, link = self.page(url, where)
            files += [e for e in page if isinstance(e, dict) and e.get("type") == "file"]
            url = urllib.parse.urljoin(url, link) if link else None
        for entry in files:
            path = entry.get("path")
            if not isinstance(path, str) or not safe_relative(path):
                raise Failed(f"{repo}: the hub listed an unsafe path {path!r}")
        return files

    def page(self, url: str, where: Where) -> tuple[list[Any], str | None]:
        def once() -> tuple[list[Any], str | None]:
            try:
                with self.hub.open(url) as response:
                    links = response.headers.get("Link", "")
                    body = json.loads(response.read())
            except urllib.error.HTTPError as exc:
                raise refused(exc, where, self.hub) from None
            except TimeoutError as exc:
                raise Transient("no answer") from exc
            found = re.search(r'<([^>]+)>\s*;\s*rel="?next"?', links)
            return (body if isinstance(body, list) else []), (found[1] if found else None)

        result: tuple[list[Any], str | None] = retrying(once, f"listing {where.label}")
        return result

    def seed_snapshot(self, spec: dict[str, Any], job: Job) -> None:
        repo, revision = spec["repo"], spec["revision"]
        commit = self.resolve(repo, revision)
        with self.lock:
            job.commit = commit
        files = select(self.tree(repo, commit, "", recursive=True), spec)
        storage = os.path.join(self.root, spec["cacheDir"], "models--" + repo.replace("/", "--"))
        work = []
        for entry in files:
            digest = entry_digest(entry)
            blob = os.path.join(storage, "blobs", digest.expected)
            pointer = os.path.join(storage, "snapshots", commit, *entry["path"].split("/"))
            url = f"{self.hub.base}/{repo}/resolve/{commit}/{urllib.parse.quote(entry['path'])}"
            work.append((entry["path"], url, blob, blob + ".incomplete", digest, pointer))
        self.prepare(job, storage, [(w[2], w[3], w[4].size) for w in work])
        for path, url, blob, part, digest, pointer in work:
            self.place(
                job, Where(self.hub.base, repo, commit, path), self.hub, url, blob, part, digest
            )
            link(blob, pointer)
        for folder in spec.get("counterDirs", ()):  # where the engine keeps its counters
            if not safe_relative(folder):
                raise Failed(f"{job.model_id}: counter directory {folder!r} is off the volume")
            os.makedirs(os.path.join(self.root, folder), exist_ok=True)
        for ref in spec.get("refs", ()):  # last: a ref names a complete snapshot
            write_atomic(os.path.join(storage, "refs", ref), commit.encode())

    def seed_files(self, spec: dict[str, Any], job: Job) -> None:
        commits: dict[tuple[str, str], str] = {}
        work = []
        for file in spec["files"]:
            key = (file["repo"], file["revision"])
            if key not in commits:
                commits[key] = self.resolve(*key)
            commit, folder = commits[key], file["path"].rpartition("/")[0]
            where = Where(self.hub.base, file["repo"], file["revision"], file["path"])
            entries = self.tree(file["repo"], commit, folder, recursive=False, where=where)
            listed = [e for e in entries if e["path"] == file["path"]]
            if not listed:  # read as the hub's own 404 for the file
                raise where.explain(404, {"X-Error-Code": "EntryNotFound"}, sent_token=False)
            digest = entry_digest(listed[0])
            expected_sha = file.get("sha256")
            if (file.get("size") not in (None, digest.size)) or (
                expected_sha and digest.kind == "sha256" and expected_sha != digest.expected
            ):
                raise Failed(
                    f"{where.label} is not the file the registry describes (the hub lists"
                    f" {digest.size} bytes, {digest.kind} {digest.expected})",
                    "correct the size/sha256 in registry/models.yaml, or the revision",
                )
            quoted = urllib.parse.quote(file["path"])
            url = f"{self.hub.base}/{file['repo']}/resolve/{commit}/{quoted}"
            final = os.path.join(self.root, file["destination"])
            work.append((where, url, final, final + ".part", digest))
        self.prepare(job, self.root, [(w[2], w[3], w[4].size) for w in work])
        for where, url, final, part, digest in work:
            self.place(job, where, self.hub, url, final, part, digest, mark=True)

    # --- Ollama -------------------------------------------------------------------------

    def seed_ollama(self, spec: dict[str, Any], job: Job) -> None:
        name, _, tag = spec["tag"].partition(":")
        namespace, _, model = name.rpartition("/")
        namespace, tag = namespace or "library", tag or "latest"
        base = f"{self.ollama.base}/v2/{namespace}/{model}"
        where = OllamaWhere(spec["tag"])
        raw = self.ollama.read(f"{base}/manifests/{tag}", where, {"Accept": OLLAMA_MANIFEST})
        try:
            manifest = json.loads(raw)
            blobs = [manifest["config"], *manifest["layers"]]
            parsed = [(str(b["digest"]).removeprefix("sha256:"), int(b["size"])) for b in blobs]
        except (ValueError, KeyError, TypeError) as exc:
            raise Failed(f"Ollama's manifest of {spec['tag']} is unreadable: {exc!r}") from None
        store = os.path.join(self.root, spec["store"])
        work = []
        for hexdigest, size in parsed:
            if not re.fullmatch(r"[0-9a-f]{64}", hexdigest):
                raise Failed(f"Ollama's manifest of {spec['tag']} names a bad digest {hexdigest!r}")
            final = os.path.join(store, "blobs", f"sha256-{hexdigest}")
            url = f"{base}/blobs/sha256:{hexdigest}"
            work.append((url, final, final + ".incomplete", Digest("sha256", hexdigest, size)))
        self.prepare(job, store, [(w[1], w[2], w[3].size) for w in work])
        for url, final, part, digest in work:
            self.place(job, where, self.ollama, url, final, part, digest)
        # The manifest goes last and verbatim: Ollama serves a tag once its manifest is there.
        write_atomic(os.path.join(store, "manifests", OLLAMA_HOST, namespace, model, tag), raw)

    # --- files --------------------------------------------------------------------------

    def prepare(self, job: Job, where: str, files: list[tuple[str, str, int]]) -> None:
        """Totals for the status, and a volume too small is a failure before any byte moves."""
        total = sum(size for _, _, size in files)
        missing = sum(
            size - (os.path.getsize(part) if os.path.exists(part) else 0)
            for final, part, size in files
            if not (os.path.exists(final) and os.path.getsize(final) == size)
        )
        with self.lock:
            # What the job placed before its weights (its release archives) counts as well.
            job.total, job.files_total = job.done + total, job.files_done + len(files)
        free = shutil.disk_usage(existing_parent(where)).free
        if missing > free:
            raise no_room(job.model_id, free, missing)

    def place(self, job: Job, where: Where | OllamaWhere, client: Client, url: str,
              final: str, part: str, digest: Digest, *, mark: bool = False) -> None:  # fmt: skip
        with self.lock:
            file_lock = self.file_locks.setdefault(final, threading.Lock())
        with file_lock:
            if complete(self.root, final, digest, mark=mark):
                job.finished_file(digest.size, skipped=True)
                return
            download(self, job, where, client, url, part, digest)
            os.replace(part, final)
            if mark:
                write_marker(self.root, final, digest)
            job.finished_file(digest.size, skipped=False)

    def status(self, started: str) -> dict[str, Any]:
        jobs = [job.as_json() for job in self.jobs]
        states = {j["state"] for j in jobs}
        state = (
            "running"
            if states & {"pending", "running"}
            else ("failed" if "failed" in states else "done")
        )
        return {"version": 1, "state": state, "startedAt": started, "updatedAt": now(),
                "jobs": jobs}  # fmt: skip


class OllamaWhere:
    """Ollama's registry answers 404 for a tag it lacks; nothing there is gated."""

    def __init__(self, tag: str) -> None:
        self.label = f"ollama {tag}"
        self.tag = tag

    def explain(self, code: int, headers: Any, *, sent_token: bool) -> Exception:
        if code == 429 or code >= 500:
            return Transient(f"HTTP {code}")
        if code == 404:
            return Failed(
                f"the Ollama library has no {self.tag}",
                "correct source.ollama_tag in registry/models.yaml (a tag of ollama.com/library)",
            )
        return Failed(f"{self.label}: HTTP {code}")


def download(seeder: Seeder, job: Job, where: Where | OllamaWhere, client: Client, url: str,
             part: str, digest: Digest) -> None:  # fmt: skip
    """`part` grown to the file's size from `url`, resuming what is there; then verified."""
    os.makedirs(os.path.dirname(part), exist_ok=True)
    have = os.path.getsize(part) if os.path.exists(part) else 0
    if have > digest.size:
        os.truncate(part, 0)
        have = 0
    h = digest.new()
    if have:  # the resumed bytes count towards the hash too
        with open(part, "rb") as f:
            while chunk := f.read(CHUNK):
                h.update(chunk)
    stalls = tries = 0
    while have < digest.size:
        try:
            headers = {"Range": f"bytes={have}-"} if have else {}
            try:
                response = client.open(url, headers)
            except urllib.error.HTTPError as exc:
                raise refused(exc, where, client) from None
            with response:
                if have and not response.headers.get("Content-Range", "").startswith(
                    f"bytes {have}-"
                ):
                    os.truncate(part, 0)  # the source ignored the range: start over
                    have, h = 0, digest.new()
                with open(part, "ab") as out:
                    while chunk := receive(response):
                        if have + len(chunk) > digest.size:
                            raise Failed(
                                f"{where.label} is larger than the {digest.size} bytes listed",
                                "retry the deploy; if it persists, the source changed",
                            )
                        write(out, chunk, job.model_id)
                        h.update(chunk)
                        have += len(chunk)
                        stalls = 0
                        with job.lock:
                            job.current = have
            if have < digest.size:
                raise Transient(f"connection closed at byte {have} of {digest.size}")
        except TimeoutError:
            stalls += 1
            if stalls > STALL_RETRIES:
                raise Failed(
                    f"{where.label} stalled: no byte for {seeder.stall_s:g} s, {stalls} times"
                    f" (at byte {have} of {digest.size})",
                    "retry the deploy (the partial file resumes); if it stalls again the"
                    " source or the pod's network is down",
                ) from None
        except Transient as exc:
            tries += 1
            if tries >= ATTEMPTS:
                raise Failed(f"{where.label}: {exc} ({tries} tries)", "retry the deploy") from None
            time.sleep(min(exc.wait if exc.wait is not None else 2 ** (tries - 1), 60))
    if h.hexdigest() != digest.expected:
        os.remove(part)
        raise Failed(
            f"{where.label}: {digest.kind} mismatch (got {h.hexdigest()}, the source publishes"
            f" {digest.expected}); the download was discarded",
            "retry the deploy; if it persists, the source is corrupt or the revision changed",
        )


def receive(response: http.client.HTTPResponse) -> bytes:
    try:
        data: bytes = response.read1(CHUNK)
        return data
    except (ConnectionError, http.client.HTTPException) as exc:
        raise Transient(f"the connection broke: {exc!r}") from None


def write(out: Any, chunk: bytes, model_id: str) -> None:
    try:
        out.write(chunk)
    except OSError as exc:
        if exc.errno in NO_SPACE:
            raise Failed(
                f"the volume is full ({os.strerror(exc.errno)}) while seeding {model_id}",
                "raise frutebox-infra:minVolumeGb (the volume grows, never shrinks) or disarm a"
                " model, then deploy again (the partial file resumes)",
            ) from None
        raise


def select(files: list[dict[str, Any]], spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The files of a snapshot job: the quant llama.cpp loads, or the repo minus ignores."""
    if spec.get("quant"):
        chosen = gguf_files(files, spec["quant"])
        if not chosen:
            quants = sorted({m[1] for f in files
                             if (m := re.search(r"[-.]([A-Z0-9_]+)(?:-\d{5}-of-\d{5})?\.gguf$",
                                                f["path"], re.IGNORECASE))})  # fmt: skip
            raise Failed(
                f"{spec['repo']} has no GGUF model file of quant {spec['quant']}",
                "correct source.gguf.quant in registry/models.yaml; the repo offers "
                + (", ".join(quants[:20]) or "no GGUF files"),
            )
        return chosen
    ignore = list(spec.get("ignore", ()))
    if any(f["path"].endswith(".safetensors") for f in files):
        ignore += spec.get("ignoreBesideSafetensors", ())
    chosen = [f for f in files if not any(fnmatch.fnmatchcase(f["path"], p) for p in ignore)]
    if not chosen:
        raise Failed(f"{spec['repo']}@{spec['revision']} holds no file to seed")
    return chosen


def gguf_files(files: list[dict[str, Any]], quant: str) -> list[dict[str, Any]]:
    """What llama.cpp's `-hf REPO:QUANT` loads (common/download.cpp find_best_model and
    get_split_files): the first model GGUF whose path matches `QUANT[.-]`, taking a split
    set only from its first shard, with every shard of that set."""
    wanted = re.compile(re.escape(quant) + r"[.-]", re.IGNORECASE)
    for f in files:
        name = f["path"].rsplit("/", 1)[-1]
        if not name.endswith(".gguf") or any(k in name for k in NOT_A_MODEL):
            continue
        if not wanted.search(f["path"]):
            continue
        prefix, index, count = split_info(f["path"])
        if count > 1 and index != 1:
            continue
        if count == 1:
            return [f]
        return [g for g in files if split_info(g["path"])[::2] == (prefix, count)]
    return []


def split_info(path: str) -> tuple[str, int, int]:
    stem = path.removesuffix(".gguf")
    found = SPLIT.match(stem)
    return (found[1], int(found[2]), int(found[3])) if found else (stem, 1, 1)


def entry_digest(entry: dict[str, Any]) -> Digest:
    lfs = entry.get("lfs")
    if isinstance(lfs, dict) and lfs.get("oid"):
        return Digest("sha256", str(lfs["oid"]), int(lfs.get("size", entry["size"])))
    return Digest("git-sha1", str(entry["oid"]), int(entry["size"]))


def complete(root: str, final: str, digest: Digest, *, mark: bool) -> bool:
    """A file is complete when it has its size and, for flat files (not named by their hash),
    its hash: proven once and remembered in a marker beside the volume's other state."""
    if not (os.path.isfile(final) and os.path.getsize(final) == digest.size):
        return False
    if not mark:
        return True
    marker = marker_path(root, final)
    try:
        with open(marker) as f:
            if json.load(f).get(digest.kind) == digest.expected:
                return True
    except (OSError, ValueError):
        pass
    if digest.of_file(final) != digest.expected:
        return False
    write_marker(root, final, digest)
    return True


def marker_path(root: str, final: str) -> str:
    name = hashlib.sha256(os.path.relpath(final, root).encode()).hexdigest()
    return os.path.join(root, ".frutebox", "seeded", name)


def write_marker(root: str, final: str, digest: Digest) -> None:
    record = {
        "path": os.path.relpath(final, root),
        "size": digest.size,
        digest.kind: digest.expected,
    }
    write_atomic(marker_path(root, final), json.dumps(record).encode())


def link(blob: str, pointer: str) -> None:
    """snapshots/<commit>/<path> -> ../../blobs/<etag>, relative, as huggingface_hub links."""
    os.makedirs(os.path.dirname(pointer), exist_ok=True)
    target = os.path.relpath(blob, os.path.dirname(pointer))
    if os.path.islink(pointer) and os.readlink(pointer) == target:
        return
    temporary = f"{pointer}.{os.getpid()}.tmp"
    os.symlink(target, temporary)
    os.replace(temporary, pointer)


def write_atomic(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "wb") as f:
        f.write(data)
    os.replace(temporary, path)


def safe_relative(path: str) -> bool:
    parts = path.split("/")
    return bool(path) and not path.startswith("/") and "\\" not in path and ".." not in parts


def existing_parent(path: str) -> str:
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return path


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def log(line: str) -> None:
    print(f"seeder: {line}", flush=True)


def serve(seeder: Seeder | None, broken: str | None, bind: str, port: int) -> None:
    started = now()

    class Status(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/status":
                self.send_error(404)
                return
            if seeder is not None:
                body = seeder.status(started)
            else:
                body = {"version": 1, "state": "failed", "startedAt": started,
                        "updatedAt": now(), "jobs": [], "error": broken}  # fmt: skip
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per probe would bury the seeding log

    server = http.server.ThreadingHTTPServer((bind, port), Status)
    log(f"status on port {server.server_address[1]}")
    threading.Thread(target=server.serve_forever, daemon=True).start()


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    plan: Any = {}
    seeder, broken = None, None
    try:
        plan = json.loads(os.environ.get(PLAN_ENV, ""))
        seeder = Seeder(plan, os.environ.get(TOKEN_ENV) or None)
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        broken = f"the seed plan ({PLAN_ENV}) is unreadable: {exc!r}"
    settings = plan if isinstance(plan, dict) else {}
    serve(seeder, broken, settings.get("bindAddress", "0.0.0.0"), int(settings.get("port", 8080)))
    if seeder is None:
        log(f"{broken}; serving that until terminated")
    else:
        threads = [threading.Thread(target=seeder.run, args=(spec, job), daemon=True)
                   for spec, job in zip(plan["jobs"], seeder.jobs, strict=True)]  # fmt: skip
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        log(f"finished: {seeder.status(now())['state']}; serving the status until terminated")
    while True:  # RunPod restarts an exited container: wait to be terminated instead
        time.sleep(3600)


if __name__ == "__main__":
    main()
