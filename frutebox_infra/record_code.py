"""The records' generated code, compiled once and kept across processes.

Compiling an `__init__` from its source is most of what defining a dataclass costs, and a
record's source (its field names, which have defaults, frozen or not) compiles to the same
code in every process. So the code objects are kept, marshalled, in one file of the
git-ignored `.cache/` per Python build, filed by what they are for (a record class's
`__init__`, its `replace`) and keyed by their source: a source found there is not compiled
again; one that is not is compiled, and the file rewritten when the process exits.

A process that uses code for an owner replaces that owner's entries by what it used, so an
edited record's old source leaves the file with the next process that defines the record,
rather than piling up. The file is a convenience: one that cannot be read, is corrupt, comes
from another Python build or cannot be written is ignored, and the code compiled as if it were
not there.

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
"""Entries a file holds at most. Owners no process defines any more (a renamed record, a
removed test's) stay until then; past KEEP the file keeps only what the writing process used
(each process adds back what it uses), so it stays about a millisecond to read. The package
and its tests define about 140 distinct sources."""

Codes = dict[str, dict[str, CodeType]]
"""Compiled code by owner (what it is for, e.g. `module.Class.__init__`), then by source."""


class CodeCache:
    """Compiled code by owner and source text, read from `path` on first use."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._kept: Codes | None = None
        self._by_source: dict[str, CodeType] = {}
        self._used: Codes = {}

    def code(self, source: str, owner: str) -> CodeType:
        """`compile(source, "<string>", "exec")`, or what an earlier process compiled from it
        (for any owner: the same source is the same code)."""
        if self._kept is None:
            self._kept = self._read()
            self._by_source = {s: c for codes in self._kept.values() for s, c in codes.items()}
            atexit.register(self.save)
        found = self._by_source.get(source)
        if found is None:
            found = self._by_source[source] = compile(
                source, "<string>", "exec", dont_inherit=True
            )
        self._used.setdefault(owner, {})[source] = found
        return found

    def save(self) -> None:
        """Write the owners whose code this process used differently from the file (a new
        source, or fewer), with what the file holds by now for the rest (another process may
        have added to it), atomically: a reader sees the old file or the whole new one. A
        failure leaves the file as it was."""
        if self._kept is None:
            return
        kept = self._kept
        changed = {o: u for o, u in self._used.items() if u.keys() != kept.get(o, {}).keys()}
        if not changed:
            return
        merged = self._read() | changed
        if sum(map(len, merged.values())) > KEEP:
            merged = dict(self._used)
        self._kept = kept | changed
        tmp: str | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".", suffix=".tmp")
            with os.fdopen(fd, "wb") as out:
                out.write(marshal.dumps((BUILD, merged)))
            os.replace(tmp, self.path)
            tmp = None
        except OSError:
            pass  # unwritable or full: compiled again next time
        finally:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)

    def _read(self) -> Codes:
        try:
            data = self.path.read_bytes()
        except OSError:
            return {}
        try:
            build, owners = marshal.loads(data)
        # A truncated or foreign file raises whatever its bytes lead marshal (or the unpacking)
        # into; any of it means only that the file is unusable.
        except Exception:
            return {}
        if build != BUILD or not isinstance(owners, dict):
            return {}
        return {
            owner: {
                s: c for s, c in by_source.items() if isinstance(s, str) and isinstance(c, CodeType)
            }
            for owner, by_source in owners.items()
            if isinstance(owner, str) and isinstance(by_source, dict)
        }


CODE = CodeCache(CACHE_FILE)
"""The process's cache, which every record's generated code is compiled through."""
