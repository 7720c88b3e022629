"""The code cache compiles a source once, keeps it across processes and never fails for it."""

from __future__ import annotations

import marshal
import subprocess
import sys
from pathlib import Path
from types import CodeType

import pytest

from frutebox_infra import record_code
from frutebox_infra.record_code import BUILD, CodeCache

SOURCE = "x = 1"


def run(code: CodeType) -> object:
    scope: dict[str, object] = {}
    exec(code, scope)
    return scope["x"]


def kept(path: Path) -> dict[str, CodeType]:
    build, codes = marshal.loads(path.read_bytes())
    assert build == BUILD
    return dict(codes)


def plant(path: Path, codes: dict[str, CodeType], build: str = BUILD) -> None:
    path.write_bytes(marshal.dumps((build, codes)))


def test_a_miss_is_compiled_and_written_for_the_next_process(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "code.marshal"
    cache = CodeCache(path)
    assert run(cache.code(SOURCE)) == 1
    cache.save()
    assert list(kept(path)) == [SOURCE] and run(kept(path)[SOURCE]) == 1
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_hit_is_the_kept_code_not_compiled_again(tmp_path: Path) -> None:
    path = tmp_path / "code.marshal"
    plant(path, {SOURCE: compile("x = 2", "<string>", "exec")})
    cache = CodeCache(path)
    assert run(cache.code(SOURCE)) == 2  # the file's code, so not compiled from the source
    path.unlink()
    cache.save()
    assert not path.exists()  # nothing compiled, nothing to write


def test_the_code_is_compiled_without_this_modules_future_imports(tmp_path: Path) -> None:
    source = "def f(a: int) -> None: pass"
    scope: dict[str, object] = {}
    exec(CodeCache(tmp_path / "code.marshal").code(source), scope)
    assert scope["f"].__annotations__ == {"a": int, "return": None}  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"\x00garbage", id="garbage"),
        pytest.param(marshal.dumps((BUILD, {SOURCE: compile("x = 2", "", "exec")}))[:-9],
                     id="truncated"),
        pytest.param(marshal.dumps([BUILD]), id="not-a-pair"),
        pytest.param(marshal.dumps((BUILD, [SOURCE])), id="not-a-dict"),
        pytest.param(marshal.dumps((BUILD, {SOURCE: "x = 2"})), id="not-code"),
        pytest.param(marshal.dumps(("3.0 other", {SOURCE: compile("x = 2", "", "exec")})),
                     id="another-python-build"),
    ],
)
def test_an_unusable_file_is_ignored_and_replaced(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "code.marshal"
    path.write_bytes(content)
    cache = CodeCache(path)
    assert run(cache.code(SOURCE)) == 1
    cache.save()
    assert run(kept(path)[SOURCE]) == 1


def test_an_unwritable_cache_is_only_compiled_through(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory would be")
    cache = CodeCache(blocker / "code.marshal")
    assert run(cache.code(SOURCE)) == 1
    cache.save()  # does not raise
    assert blocker.read_text().startswith("a file") and list(tmp_path.iterdir()) == [blocker]


def test_a_save_keeps_what_another_process_wrote_meanwhile(tmp_path: Path) -> None:
    path = tmp_path / "code.marshal"
    cache = CodeCache(path)
    cache.code(SOURCE)
    plant(path, {"y = 1": compile("y = 1", "", "exec")})
    cache.save()
    assert sorted(kept(path)) == [SOURCE, "y = 1"]


@pytest.mark.parametrize(
    ("others", "left"),
    [
        pytest.param(2, ["x = 1", "y = 0", "y = 1"], id="at-keep-all-stay"),
        pytest.param(3, ["x = 1"], id="past-keep-only-what-this-process-used"),
    ],
)
def test_past_keep_entries_only_the_used_stay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, others: int, left: list[str]
) -> None:
    monkeypatch.setattr(record_code, "KEEP", 3)
    path = tmp_path / "code.marshal"
    plant(path, {f"y = {i}": compile(f"y = {i}", "", "exec") for i in range(others)})
    cache = CodeCache(path)
    cache.code(SOURCE)
    cache.save()
    assert sorted(kept(path)) == left


@pytest.mark.parametrize(
    ("statement", "written"),
    [
        pytest.param("cache.code('x = 1')", True, id="after-a-miss"),
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
        assert list(kept(path)) == [SOURCE]
