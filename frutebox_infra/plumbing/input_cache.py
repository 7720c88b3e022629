"""Validated input kept on disk, keyed by everything its validation depends on.

Validating registry/*.yaml or a stack file (YAML parsing, then importing pydantic, building
and running the schemas) is most of what reading them costs, and it gives the same answer
until a file or our code changes. So a registry or stack settings that validated are pickled
under a key hashed from the files' texts, every source file of this package (by size and
modification time, as Python judges its own compiled modules) and the Python and pydantic
versions; a change anywhere is another key, hence a fresh validation.
Only input that passed is kept, so every error is still found and explained by the
validation itself. The cache is a convenience: an entry that cannot be read or written is
ignored.

Entries are pickles in a git-ignored directory of the checkout, which only someone who can
already edit this package's source can write.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import pickle
import sys
import tempfile
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import TypeVar

from frutebox_infra.plumbing.paths import REPO_ROOT

CACHE_DIR = REPO_ROOT / ".cache" / "registry"
"""Git-ignored (.gitignore's `.cache/`)."""
SETTINGS_CACHE_DIR = REPO_ROOT / ".cache" / "settings"
T = TypeVar("T")
KEEP = 8
"""Entries kept after a write, newest first: the work tree's registry, a few git refs' ones
and the test suite's variants, without the directory growing with every edit."""
_PACKAGE = Path(__file__).resolve().parents[1]


def cache_key(texts: Mapping[str, str]) -> str:
    """What a validation depends on: its files' names and texts, and our code."""
    digest = hashlib.sha256(_code_fingerprint().encode())
    for name in sorted(texts):
        _feed(digest.update, name.encode())
        _feed(digest.update, texts[name].encode())
    return digest.hexdigest()


def load(directory: Path, key: str, kind: type[T]) -> T | None:
    """The `kind` validated under `key`, or None when there is none or it cannot be read."""
    try:
        data = (directory / f"{key}.pickle").read_bytes()
    except OSError:
        return None
    try:
        found = pickle.loads(data)
    # A truncated or foreign file raises whatever its bytes lead pickle into; any of it
    # means only that this entry is unusable.
    except Exception:
        return None
    return found if isinstance(found, kind) else None


def store(directory: Path, key: str, value: object) -> None:
    """Keep `value` under `key`, atomically (a reader sees the old entry or the whole new
    one), then drop all but the KEEP newest entries. A failure leaves the cache as it was."""
    tmp: str | None = None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".", suffix=".tmp")
        with os.fdopen(fd, "wb") as out:
            pickle.dump(value, out, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, directory / f"{key}.pickle")
        tmp = None
        _prune(directory)
    except (OSError, pickle.PicklingError, TypeError):
        pass  # unwritable, full, or an object pickle refuses: validated again next time
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def _prune(directory: Path) -> None:
    entries = sorted(directory.glob("*.pickle"), key=_mtime, reverse=True)
    for old in entries[KEEP:]:
        old.unlink(missing_ok=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0  # removed meanwhile by another process's prune


@cache
def _code_fingerprint() -> str:
    """Python, pydantic and every source file of this package (any of them may change what
    validation accepts or builds), read once per process."""
    digest = hashlib.sha256()
    _feed(digest.update, sys.version.encode())
    for part in _validator_versions():
        _feed(digest.update, part.encode())
    _feed(digest.update, source_stamp(_PACKAGE).encode())
    return digest.hexdigest()


def source_stamp(directory: Path) -> str:
    """Every `.py` file below `directory` by path, size and modification time: the rule
    Python itself uses to call a compiled module current."""
    stamps = []
    for path in _sources(directory):
        stat = path.stat()
        stamps.append(f"{path.relative_to(directory)}\0{stat.st_size}\0{stat.st_mtime_ns}")
    return "\n".join(stamps)


def _validator_versions() -> list[str]:
    """The installed pydantic and pydantic-core, read from their metadata: an entry is only
    as good as the validators that passed it."""
    found = []
    for dist in ("pydantic", "pydantic-core"):
        try:
            found.append(f"{dist} {importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{dist} absent")
    return found


def _sources(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*.py") if "__pycache__" not in p.parts)


def _feed(update: Callable[[bytes], object], part: bytes) -> None:
    """Length-prefixed, so no two different sequences of parts hash alike."""
    update(len(part).to_bytes(8, "big"))
    update(part)
