"""The code cache compiles a source once, keeps it across processes, keeps one owner's code as
the last process that used it left it, and never fails for it."""

from __future__ import annotations

import marshal
import subprocess
import sys
from pathlib import Path
from types import CodeType
from typing import Any

import pytest

from frutebox_infra import record_code
from frutebox_infra.record_code import BUILD, CodeCache, Codes

SOURCE = "x = 1"
OWNER = "pkg.Thing.__init__"


def run(code: CodeType) -> object:
    scope: dict[str, object] = {}
    exec(code, scope)
    return scope["x"]


def compiled(source: str) -> CodeType:
    return compile(source, "<string>", "exec")


def kept(path: Path) -> Codes:
    build, codes = marshal.loads(path.read_bytes())
    assert build == BUILD
    return {owner: dict(by_source) for owner, by_source in codes.items()}


def sources(path: Path) -> dict[str, list[str]]:
    return {owner: sorted(by_source) for owner, by_source in sorted(kept(path).items())}


def plant(path: Path, codes: dict[str, Any], build: str = BUILD) -> None:
    path.write_bytes(marshal.dumps((build, codes)))


def test_a_miss_is_compiled_and_written_for_the_next_process(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "code.marshal"
    cache = CodeCache(path)
    assert run(cache.code(SOURCE, OWNER)) == 1
    cache.save()
    assert sources(path) == {OWNER: [SOURCE]} and run(kept(path)[OWNER][SOURCE]) == 1
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_hit_is_the_kept_code_not_compiled_again(tmp_path: Path) -> None:
    path = tmp_path / "code.marshal"
    plant(path, {OWNER: {SOURCE: compiled("x = 2")}})
    cache = CodeCache(path)
    assert run(cache.code(SOURCE, OWNER)) == 2  # the file's code, so not compiled from the source
    path.unlink()
    cache.save()
    assert not path.exists()  # the owner's code is as the file had it: nothing to write


def test_a_source_kept_for_another_owner_is_that_code(tmp_path: Path) -> None:
    path = tmp_path / "code.marshal"
    plant(path, {"pkg.Other.__init__": {SOURCE: compiled("x = 2")}})
    cache = CodeCache(path)
    assert run(cache.code(SOURCE, OWNER)) == 2
    cache.save()
    assert sources(path) == {OWNER: [SOURCE], "pkg.Other.__init__": [SOURCE]}


def test_an_owners_superseded_source_leaves_the_file(tmp_path: Path) -> None:
    path = tmp_path / "code.marshal"
    plant(
        path,
        {OWNER: {"x = 0": compiled("x = 0")}, "pkg.Other.__init__": {"y = 1": compiled("y = 1")}},
    )
    cache = CodeCache(path)
    cache.code(SOURCE, OWNER)  # the record was edited: its __init__ has a new source
    cache.save()
    assert sources(path) == {OWNER: [SOURCE], "pkg.Other.__init__": ["y = 1"]}


def test_an_owner_used_with_fewer_sources_is_written(tmp_path: Path) -> None:
    path = tmp_path / "code.marshal"
    plant(path, {OWNER: {SOURCE: compiled(SOURCE), "x = 0": compiled("x = 0")}})
    cache = CodeCache(path)
    cache.code(SOURCE, OWNER)
    cache.save()
    assert sources(path) == {OWNER: [SOURCE]}


def test_one_owner_may_hold_several_sources(tmp_path: Path) -> None:
    path = tmp_path / "code.marshal"
    cache = CodeCache(path)
    cache.code(SOURCE, OWNER)
    cache.code("x = 2", OWNER)  # two classes of one name, as a test's local ones may be
    cache.save()
    assert sources(path) == {OWNER: [SOURCE, "x = 2"]}


def test_the_code_is_compiled_without_this_modules_future_imports(tmp_path: Path) -> None:
    source = "def f(a: int) -> None: pass"
    scope: dict[str, object] = {}
    exec(CodeCache(tmp_path / "code.marshal").code(source, OWNER), scope)
    assert scope["f"].__annotations__ == {"a": int, "return": None}  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"\x00garbage", id="garbage"),
        pytest.param(
            marshal.dumps((BUILD, {OWNER: {SOURCE: compiled("x = 2")}}))[:-9], id="truncated"
        ),
        pytest.param(marshal.dumps([BUILD]), id="not-a-pair"),
        pytest.param(marshal.dumps((BUILD, [SOURCE])), id="not-a-dict"),
        pytest.param(marshal.dumps((BUILD, {SOURCE: compiled("x = 2")})), id="not-by-owner"),
        pytest.param(marshal.dumps((BUILD, {OWNER: {SOURCE: "x = 2"}})), id="not-code"),
        pytest.param(
            marshal.dumps(("3.0 other", {OWNER: {SOURCE: compiled("x = 2")}})),
            id="another-python-build",
        ),
    ],
)
def test_an_unusable_file_is_ignored_and_replaced(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "code.marshal"
    path.write_bytes(content)
    cache = CodeCache(path)
    assert run(cache.code(SOURCE, OWNER)) == 1
    cache.save()
    assert run(kept(path)[OWNER][SOURCE]) == 1


def test_an_unwritable_cache_is_only_compiled_through(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory would be")
    cache = CodeCache(blocker / "code.marshal")
    assert run(cache.code(SOURCE, OWNER)) == 1
    cache.save()  # does not raise
    assert blocker.read_text().startswith("a file") and list(tmp_path.iterdir()) == [blocker]


def test_a_save_keeps_what_another_process_wrote_meanwhile(tmp_path: Path) -> None:
    path = tmp_path / "code.marshal"
    cache = CodeCache(path)
    cache.code(SOURCE, OWNER)
    plant(path, {"pkg.Other.__init__": {"y = 1": compiled("y = 1")}})
    cache.save()
    assert sources(path) == {OWNER: [SOURCE], "pkg.Other.__init__": ["y = 1"]}


def test_a_second_save_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "code.marshal"
    cache = CodeCache(path)
    cache.code(SOURCE, OWNER)
    cache.save()
    path.unlink()
    cache.save()  # as at exit, after an explicit save
    assert not path.exists()


@pytest.mark.parametrize(
    ("others", "left"),
    [
        pytest.param(2, ["o0", "o1", OWNER], id="at-keep-all-stay"),
        pytest.param(3, [OWNER], id="past-keep-only-what-this-process-used"),
    ],
)
def test_past_keep_entries_only_the_used_stay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, others: int, left: list[str]
) -> None:
    monkeypatch.setattr(record_code, "KEEP", 3)
    path = tmp_path / "code.marshal"
    plant(path, {f"o{i}": {f"y = {i}": compiled(f"y = {i}")} for i in range(others)})
    cache = CodeCache(path)
    cache.code(SOURCE, OWNER)
    cache.save()
    assert sorted(kept(path)) == left


@pytest.mark.parametrize(
    ("statement", "written"),
    [
        pytest.param(f"cache.code('x = 1', {OWNER!r})", True, id="after-a-miss"),
        pytest.param("pass", False, id="without-one"),
    ],
)
def test_a_process_writes_its_misses_when_it_exits(
    tmp_path: Path, statement: str, written: bool
) -> None:
    path = tmp_path / "code.marshal"
    program = (
        "import sys\nfrom pathlib import Path\nfrom frutebox_infra.record_code import CodeCache\n"
        f"cache = CodeCache(Path(sys.argv[1]))\n{statement}\n"
    )
    subprocess.run([sys.executable, "-c", program, str(path)], check=True, timeout=60)
    assert path.exists() is written
    if written:
        assert sources(path) == {OWNER: [SOURCE]}
