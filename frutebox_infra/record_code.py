"""The records' generated `__init__` code, compiled once and kept across processes.

Compiling an `__init__` from its source is most of what defining a dataclass costs, and a
record's source (its field names, which have defaults, frozen or not) compiles to the same
code in every process. So the code objects are kept, marshalled, in one file of the
git-ignored `.cache/` per Python build, keyed by their source: a source found there is not
compiled again; one that is not is compiled, and the file rewritten when the process exits.
The file is a convenience: one that cannot be read, is corrupt, comes from another Python build
or cannot be written is ignored, and the code compiled as if it were not there.

Only someone who can already edit this package's source can write the checkout's `.cache/`.
"""

from __future__ import annotations

import atexit
import marshal
import os
import sys
import tempfile
from pathlib import Path
from types import CodeType

from frutebox_infra.paths import REPO_ROOT

CACHE_FILE = REPO_ROOT / ".cache" / "record-code" / f"{sys.implementation.cache_tag}.marshal"
"""Git-ignored (.gitignore's `.cache/`); named by Python version, as `__pycache__` names are."""
BUILD = sys.version
"""Marshalled code is only read back by the exact Python build that wrote it."""
KEEP = 600
"""Entries a file holds at most. An edited record leaves its old source behind; past KEEP
the file keeps only what the writing process used (each process adds back what it uses), so
it stays about a millisecond to read. The package and its tests define about 140 distinct
sources."""


class CodeCache:
    """Compiled code by source text, read from `path` on first use."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._codes: dict[str, CodeType] | None = None
        self._used: dict[str, CodeType] = {}
        self._fresh = False

    def code(self, source: str) -> CodeType:
        """`compile(source, "<string>", "exec")`, or what an earlier process compiled from it."""
        if self._codes is None:
            self._codes = self._read()
        found = self._codes.get(source)
        if found is None:
            found = self._codes[source] = compile(source, "<string>", "exec", dont_inherit=True)
            if not self._fresh:
                self._fresh = True
                atexit.register(self.save)
        self._used[source] = found
        return found

    def save(self) -> None:
        """Write what this process compiled, with what the file holds by now (another process
        may have added to it), atomically: a reader sees the old file or the whole new one. A
        failure leaves the file as it was."""
        if not self._fresh:
            return
        self._fresh = False
        kept = self._read() | self._used
        if len(kept) > KEEP:
            kept = self._used
        tmp: str | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".", suffix=".tmp")
            with os.fdopen(fd, "wb") as out:
                out.write(marshal.dumps((BUILD, kept)))
            os.replace(tmp, self.path)
            tmp = None
        except OSError:
            pass  # unwritable or full: compiled again next time
        finally:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)

    def _read(self) -> dict[str, CodeType]:
        try:
            data = self.path.read_bytes()
        except OSError:
            return {}
        try:
            build, codes = marshal.loads(data)
        # A truncated or foreign file raises whatever its bytes lead marshal (or the unpacking)
        # into; any of it means only that the file is unusable.
        except Exception:
            return {}
        if build != BUILD or not isinstance(codes, dict):
            return {}
        return {s: c for s, c in codes.items() if isinstance(s, str) and isinstance(c, CodeType)}


CODE = CodeCache(CACHE_FILE)
"""The process's cache, which every record's `__init__` is compiled through."""
