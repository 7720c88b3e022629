"""The run's bytecode written once, before pytest's workers import the tests, split over the cores.

Where PYTHONDONTWRITEBYTECODE is set (as on this machine) Python and pytest read cached
bytecode but write none. Each xdist worker would then compile every module it imports from
source and rewrite the asserts of every test module again: about 8 s of CPU a worker, every
run, a fresh clone or not. Pytest also rewrites every module of each installed plugin's
packages (hypothesis, anyio, xdist: about 2 s of CPU in every process that imports
hypothesis, the controller included, as it prints its summary). The controller (or the one
process, without xdist) writes both kinds here once, as `tools/dev` compiles the package:
pytest's own rewrite of each test module, conftest and plugin module, stored where and as
pytest stores it (so the code run is the code pytest would run, and pytest checks the
source's hash before using it), and plain bytecode for the rest. A file whose bytecode is
current is read, not compiled again.
"""

from __future__ import annotations

import compileall
import importlib.util
import os
import struct
import sys
from concurrent.futures import ProcessPoolExecutor
from importlib.machinery import PathFinder
from multiprocessing import get_context
from pathlib import Path

import pytest
from _pytest.assertion import rewrite
from _pytest.pathlib import fnmatch_ex

SMALL = 8
"""Fewer stale files than this are written in-process: a pool would cost more to start."""

PYTEST_PARTS = ("_read_pyc", "_rewrite_test", "_write_pyc", "get_cache_dir", "try_makedirs")
"""pytest's own functions used here (private ones: a pytest without them skips the warm-up,
and tests/test_bytecode.py fails)."""

_config: pytest.Config | None = None
"""The session's configuration, which pytest's rewrite reads; inherited by the forked pool."""


def rewritten_pyc(source: Path) -> Path:
    """Where pytest keeps the rewritten bytecode of a test module (its `exec_module`'s path)."""
    return rewrite.get_cache_dir(source) / (source.name[:-3] + rewrite.PYC_TAIL)


def plugin_sources(config: pytest.Config) -> list[Path]:
    """The source files of the top-level modules and packages pytest marks for rewriting (each
    installed plugin's distribution's), found without importing them."""
    hook = config.stash[rewrite.assertstate_key].hook
    names = sorted(name for name in getattr(hook, "_must_rewrite", ()) if "." not in name)
    found: list[Path] = []
    for name in names:
        spec = PathFinder.find_spec(name)
        if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
            continue
        if spec.submodule_search_locations:
            found += sorted(Path(spec.origin).parent.rglob("*.py"))
        else:
            found.append(Path(spec.origin))
    return [path for path in found if "__pycache__" not in path.parts]


def is_rewritten(source: Path, config: pytest.Config) -> bool:
    """A module pytest imports with its asserts rewritten: a conftest or a test module."""
    patterns = config.getini("python_files")
    return source.name == "conftest.py" or any(fnmatch_ex(p, source) for p in patterns)


def is_current(source: Path, rewritten: bool) -> bool:
    """Its bytecode is there and was made from this source: the header pytest checks (a hash of
    the source) or the one compileall checks (its modification time); the code is not loaded."""
    try:
        if rewritten:
            cached, size = rewritten_pyc(source), 16
            expected = importlib.util.MAGIC_NUMBER + b"\x03\x00\x00\x00"
            expected += importlib.util.source_hash(source.read_bytes())[:8]
        else:
            cached, size = Path(importlib.util.cache_from_source(str(source))), 12
            mtime = int(source.stat().st_mtime) & 0xFFFF_FFFF
            expected = struct.pack("<4sLL", importlib.util.MAGIC_NUMBER, 0, mtime)
        with open(cached, "rb") as file:
            return file.read(size) == expected
    except OSError:
        return False


def _write_rewritten(source: str) -> None:
    path = Path(source)
    pyc = rewritten_pyc(path)
    assert _config is not None
    try:
        source_hash, code = rewrite._rewrite_test(path, _config)
    except SyntaxError:
        return  # pytest reports it when it imports the module
    if rewrite.try_makedirs(pyc.parent):
        rewrite._write_pyc(_config.stash[rewrite.assertstate_key], code, source_hash, pyc)


def _write(job: tuple[str, bool]) -> None:
    source, rewritten = job
    if rewritten:
        _write_rewritten(source)
    else:
        compileall.compile_file(source, quiet=2)


def warm(config: pytest.Config, roots: list[Path], *, plugins: bool = False) -> None:
    """Writes the bytecode of every module under `roots` (and, with `plugins`, of every plugin
    module pytest rewrites) that is missing or stale."""
    global _config
    if not all(hasattr(rewrite, part) for part in PYTEST_PARTS):
        return
    if config.getoption("assertmode") != "rewrite" or rewrite.assertstate_key not in config.stash:
        return
    _config = config
    ours = [
        (path, is_rewritten(path, config))
        for root in roots
        for path in sorted(root.rglob("*.py"))
        if "__pycache__" not in path.parts
    ]
    theirs = [(path, True) for path in plugin_sources(config)] if plugins else []
    jobs = [
        (str(path), rewritten)
        for path, rewritten in [*ours, *theirs]
        if not is_current(path, rewritten)
    ]
    if len(jobs) < SMALL:
        for job in jobs:
            _write(job)
        return
    # Forked, so the pool shares the parsed configuration; xdist's workers start after this.
    fork = get_context("fork")
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1, mp_context=fork) as pool:
        list(pool.map(_write, jobs, chunksize=4))


def worth_warming(config: pytest.Config) -> bool:
    """In the process that starts the run (never in an xdist worker, which the run started)."""
    return not hasattr(config, "workerinput") and sys.implementation.cache_tag is not None
