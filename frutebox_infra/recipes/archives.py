"""Published release archives a pod runs from (the gateway's, and an engine's where no image we
can launch ships it): kept on the volume, checked against their pinned checksums at every start
(placed by the seeding CPU pod, or fetched once per volume by an unseeded pod, to a private name
that is checked before it is renamed into place), and unpacked onto the container disk; any
failure exits 1 before the engine starts."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Literal

from frutebox_infra.catalog.schema import EngineArchive

ARCHIVE_DIR = "/workspace/frutebox/engines"
"""Where checked release archives live on the stack's volume, one file per release."""

# One program checks every release archive a launch keeps on the volume (the gateway's, an
# engine's) against its pinned checksum at every start, never trusting a file because it is
# there; when it is missing or wrong and fetching is allowed (`fetches`), it downloads it to a
# private temporary name, checks that, and only then renames it into place. It then unpacks
# onto the container disk either one program (`member`, made executable) or the whole tree:
# tarfile's "r:*" reads what the archive is (gzip, and zstd from Python 3.14 on: PEP 784), its
# "data" filter refuses members that would land outside the directory, links out of it and
# device files, and the tree goes to a fresh temporary directory renamed into place, so a
# half-unpacked engine is never run. Any failure exits 1, naming `who`, before the engine
# starts: the container restarts, a crash loop, never an engine served open.
RELEASE_PY = """import hashlib, os, shutil, sys, tarfile, tempfile, urllib.request as u
who, archive, url, algorithm, want, fetch, dest, member = sys.argv[1:9]
kind = algorithm.upper().replace("SHA", "SHA-")
def ok(path):
    h = hashlib.new(algorithm)
    try:
        with open(path, "rb") as f:
            for b in iter(lambda: f.read(1 << 20), b""): h.update(b)
    except OSError: return False
    return h.hexdigest() == want
if not ok(archive):
    if fetch != "1": sys.exit(who + ": " + archive + " is missing or fails its " + kind + " check")
    os.makedirs(os.path.dirname(archive), exist_ok=True)
    part = archive + ".part" + str(os.getpid())
    try:
        with u.urlopen(url, timeout=60) as src, open(part, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 24)
    except OSError as e:
        sys.exit(who + ": " + url + " could not be fetched: " + str(e))
    if not ok(part):
        os.remove(part)
        sys.exit(who + ": " + url + " does not match its pinned " + kind)
    os.replace(part, archive)
os.makedirs(os.path.dirname(dest), exist_ok=True)
if member:
    with tarfile.open(archive) as t:
        try: src = t.extractfile(member)
        except KeyError: src = None
        if src is None: sys.exit(who + ": " + member + " is not in " + archive)
        with open(dest, "wb") as out: shutil.copyfileobj(src, out)
    os.chmod(dest, 0o755)
else:
    shutil.rmtree(dest, ignore_errors=True)
    tmp = tempfile.mkdtemp(dir=os.path.dirname(dest))
    with tarfile.open(archive, "r:*") as t:
        t.extractall(tmp, filter="data")
    os.rename(tmp, dest)"""

RELEASE_MARKER = RELEASE_PY.splitlines()[0]
"""The first line of the release check's program text, which marks it in a launch script."""


@dataclass(frozen=True, kw_only=True)
class KeptArchive:
    """A release archive a pod's launch checks on the volume before its engine starts: where
    it is kept, where it is published, the checksum it is pinned by (registry/images.yaml) and
    about how large it is. The seeding CPU pod places every one a seeded pod names
    (seeding/manifest.py), so that pod's GPU bills no fetch."""

    path: str
    """On the pod, below the volume's mount."""
    url: str
    algorithm: Literal["sha256", "sha512"]
    digest: str
    size_gb: float


@dataclass(frozen=True, kw_only=True)
class ArchiveInstall:
    """One engine release: its pinned archive, where it is kept and where it is unpacked."""

    archive: EngineArchive
    version: str
    home: str
    """Where the archive is unpacked on the container disk (fresh at every start)."""
    size_gb: float = 0.0
    """About how large the archive is (registry/images.yaml `volume_install_gb`)."""
    fetch: bool = True
    """Whether the launch fetches the archive when the volume lacks it (see `fetches`)."""
    volume_dir: str = ARCHIVE_DIR

    @property
    def kept(self) -> str:
        """The archive's path on the volume."""
        return f"{self.volume_dir}/{self.version}-{self.archive.file_name}"

    @property
    def kept_archive(self) -> KeptArchive:
        """What the seeding CPU pod places for a seeded pod's launch."""
        return KeptArchive(path=self.kept, url=self.archive.url, algorithm="sha256",
                           digest=self.archive.sha256, size_gb=self.size_gb)  # fmt: skip

    def line(self, *, python: str) -> str:
        """The launch line that checks (or, when `fetch`, fetches) and unpacks it, or exits 1."""
        check = release_check(self.kept_archive, who="engine", python=python, fetch=self.fetch,
                              dest=self.home)  # fmt: skip
        return f"{shlex.join(check)} || exit 1"


def fetches(*, seeded: bool) -> bool:
    """Whether a pod's launch fetches a missing release archive itself: only an unseeded pod's.

    A seeded pod is created only once its seeding CPU pod placed and checked every archive its
    launch names (the pod depends on the seed, and a failed seed stops the deploy before any
    GPU pod is created), so a seeded launch only checks: an archive missing or wrong there
    means something removed or damaged it after the seed, and fetching it again on the GPU
    would bill GPU time and hide that; the launch exits 1 instead, a crash loop the deploy step
    fails fast on. An unseeded pod (seeding off, no CPU flavor in the data centre, a model
    without a seeding rule) has nothing else to put it there, so it fetches it itself."""
    return not seeded


def release_check(
    kept: KeptArchive, *, who: str, python: str, fetch: bool, dest: str, member: str = ""
) -> list[str]:
    """The command words that check `kept` on the volume (fetching it first when `fetch`) and
    unpack it to `dest`: its `member` alone, or the whole tree; they exit 1 naming `who`."""
    return [python, "-c", RELEASE_PY, who, kept.path, kept.url, kept.algorithm, kept.digest,
            "1" if fetch else "0", dest, member]  # fmt: skip

