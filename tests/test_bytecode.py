"""The run's bytecode warm-up writes what pytest and Python read, and only what is stale."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest
from _pytest.assertion import rewrite

from tests import bytecode

MODULES = 2 * bytecode.SMALL  # enough for the forked pool, not only the in-process path


def sources(root: Path) -> list[Path]:
    """Test modules with an assert pytest rewrites, a conftest and a plain helper module."""
    tests = [root / f"test_m{i}.py" for i in range(MODULES)]
    for i, path in enumerate(tests):
        path.write_text(f"def test_it():\n    x = {i}\n    assert x == {i} + 1\n")
    (root / "conftest.py").write_text("X = 1\n")
    (root / "helper.py").write_text("Y = 2\n")
    return [*tests, root / "conftest.py", root / "helper.py"]


def test_the_rewritten_code_is_the_code_pytest_would_run(
    tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    *rewritten, helper = sources(tmp_path)
    bytecode.warm(pytestconfig, [tmp_path])
    for path in rewritten:
        cached = rewrite._read_pyc(path, bytecode.rewritten_pyc(path))
        assert cached is not None, path
        _, own = rewrite._rewrite_test(path, pytestconfig)
        assert cached == own, path  # code objects compare by their bytecode, constants, names
    # The helper is imported plainly: Python's own bytecode, which Python's own check accepts.
    assert not bytecode.rewritten_pyc(helper).exists()
    assert Path(importlib.util.cache_from_source(str(helper))).is_file()
    assert bytecode.is_current(helper, rewritten=False)


def test_a_changed_source_is_written_again_and_a_current_one_is_left(
    tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    first, second, *_ = sources(tmp_path)
    bytecode.warm(pytestconfig, [tmp_path])
    kept = bytecode.rewritten_pyc(second).stat().st_mtime_ns
    first.write_text("def test_it():\n    assert 'changed'\n")
    assert not bytecode.is_current(first, rewritten=True)
    bytecode.warm(pytestconfig, [tmp_path])
    assert bytecode.is_current(first, rewritten=True)
    assert bytecode.rewritten_pyc(second).stat().st_mtime_ns == kept


def test_a_missing_cache_is_not_current(tmp_path: Path) -> None:
    path = tmp_path / "test_new.py"
    path.write_text("X = 1\n")
    assert not bytecode.is_current(path, rewritten=True)
    assert not bytecode.is_current(path, rewritten=False)


@pytest.mark.parametrize(
    ("name", "rewritten"),
    [
        pytest.param("test_thing.py", True, id="test-module"),
        pytest.param("conftest.py", True, id="conftest"),
        pytest.param("factories.py", False, id="helper"),
        pytest.param("thing_test.py", True, id="suffix-pattern"),
    ],
)
def test_what_pytest_rewrites_is_what_its_patterns_name(
    name: str, rewritten: bool, pytestconfig: pytest.Config
) -> None:
    assert bytecode.is_rewritten(Path("/x") / name, pytestconfig) is rewritten


@pytest.mark.parametrize(
    ("config", "warms"),
    [
        pytest.param(SimpleNamespace(), True, id="controller-or-single-process"),
        pytest.param(SimpleNamespace(workerinput={}), False, id="xdist-worker"),
    ],
)
def test_only_the_process_that_starts_the_run_warms(config: object, warms: bool) -> None:
    assert bytecode.worth_warming(config) is warms  # type: ignore[arg-type]


def module_name(path: Path) -> str:
    """The import name of a module under site-packages."""
    site = next(parent for parent in path.parents if parent.name == "site-packages")
    parts = path.relative_to(site).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_every_module_of_a_plugins_packages_is_listed_and_pytest_rewrites_each(
    pytestconfig: pytest.Config,
) -> None:
    listed = bytecode.plugin_sources(pytestconfig)
    spec = importlib.util.find_spec("hypothesis")
    assert spec is not None and spec.origin is not None
    assert set(Path(spec.origin).parent.rglob("*.py")) <= set(listed)
    names = {module_name(path) for path in listed}
    assert {"_hypothesis_pytestplugin", "pytest_timeout", "xdist.plugin", "anyio"} <= names
    state = pytestconfig.stash[rewrite.assertstate_key]
    assert all(state.hook._is_marked_for_rewrite(name, state) for name in names)
    assert not any("frutebox_infra" in name or "pydantic" in name for name in names)


@pytest.mark.parametrize("name", ["hypothesis", "xdist.plugin", "_hypothesis_pytestplugin"])
def test_a_plugin_module_is_written_as_pytest_rewrites_it(
    name: str, pytestconfig: pytest.Config
) -> None:
    """The run's own warm-up (tests/conftest.py) wrote it; pytest would run the same code."""
    path = next(p for p in bytecode.plugin_sources(pytestconfig) if module_name(p) == name)
    cached = rewrite._read_pyc(path, bytecode.rewritten_pyc(path))
    assert cached is not None, path
    assert cached == rewrite._rewrite_test(path, pytestconfig)[1], path
