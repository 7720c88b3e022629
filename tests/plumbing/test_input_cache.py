"""The validated-registry cache: keyed by every input, read back whole or not at all."""

from __future__ import annotations

import os
import pickle
from dataclasses import replace
from pathlib import Path

import pytest

from frutebox_infra.catalog.files import RegistryFiles, parse_registry
from frutebox_infra.catalog.schema import Registry
from frutebox_infra.plumbing import input_cache as registry_cache
from frutebox_infra.plumbing.errors import ConfigError
from frutebox_infra.plumbing.input_cache import KEEP, cache_key, load, store
from frutebox_infra.stack.settings import StackSettings
from tests.factories import files_with, real_files, real_registry

TEXTS = {"models.yaml": "models: []\n", "gpus.yaml": "gpus: []\n"}


@pytest.mark.parametrize(
    "other",
    [
        pytest.param({**TEXTS, "models.yaml": "models: [] \n"}, id="one-byte-of-a-text"),
        pytest.param({"models.yaml": TEXTS["models.yaml"]}, id="a-file-fewer"),
        pytest.param({**TEXTS, "speed.yaml": ""}, id="an-empty-file-more"),
        pytest.param(
            {"models.yaml": "", "gpus.yaml": "models: []\ngpus: []\n"}, id="text-moved-across"
        ),
        pytest.param(
            {"models.yam": "lmodels: []\n", "gpus.yaml": TEXTS["gpus.yaml"]}, id="name-vs-text"
        ),
    ],
)
def test_any_change_to_the_files_is_another_key(other: dict[str, str]) -> None:
    assert cache_key(other) != cache_key(TEXTS)


def test_the_same_texts_in_any_order_are_the_same_key() -> None:
    assert cache_key(dict(reversed(TEXTS.items()))) == cache_key(dict(TEXTS))


def test_a_change_to_our_code_is_another_key(monkeypatch: pytest.MonkeyPatch) -> None:
    before = cache_key(TEXTS)
    monkeypatch.setattr(registry_cache, "_code_fingerprint", lambda: "edited source")
    assert cache_key(TEXTS) != before


def test_the_package_s_stamp_names_every_source_file_of_it() -> None:
    package = Path(registry_cache.__file__).parents[1]
    sources = {line.split("\0")[0] for line in registry_cache.source_stamp(package).splitlines()}
    assert {"catalog/schema.py", "catalog/speed_facts.py", "catalog/files.py"} <= sources
    assert {"runpod/__main__.py", "recipes/base.py"} <= sources
    assert not any("__pycache__" in s or not s.endswith(".py") for s in sources)


def test_a_stored_registry_is_read_back_equal(tmp_path: Path) -> None:
    registry = real_registry()
    store(tmp_path, "k", registry)
    found = load(tmp_path, "k", Registry)
    assert found == registry and found is not registry
    assert load(tmp_path, "other", Registry) is None
    assert load(tmp_path, "k", StackSettings) is None  # an entry is read back as its kind only


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"not a pickle", id="garbage"),
        pytest.param(pickle.dumps(real_registry())[:-50], id="truncated"),
        pytest.param(pickle.dumps({"models": ()}), id="not-a-registry"),
        pytest.param(b"\x80\x05c" + b"no_such_module\nThing\n.", id="names-a-missing-module"),
    ],
)
def test_an_unreadable_entry_is_ignored(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "k.pickle").write_bytes(content)
    assert load(tmp_path, "k", Registry) is None


def test_an_unwritable_cache_is_ignored_and_leaves_nothing(tmp_path: Path) -> None:
    blocked = tmp_path / "file-not-dir"
    blocked.write_text("")
    store(blocked, "k", real_registry())  # mkdir fails: no error, nothing written
    store(blocked / "below", "k", real_registry())
    assert blocked.read_text() == "" and list(tmp_path.iterdir()) == [blocked]


def test_a_write_leaves_no_temporary_file_and_keeps_the_newest_entries(tmp_path: Path) -> None:
    registry = real_registry()
    for i in range(KEEP + 3):
        store(tmp_path, f"k{i}", registry)
        os.utime(tmp_path / f"k{i}.pickle", (1000 + i, 1000 + i))
    store(tmp_path, "last", registry)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == KEEP and "last.pickle" in names
    assert f"k{KEEP + 2}.pickle" in names and "k0.pickle" not in names
    assert all(n.endswith(".pickle") and not n.startswith(".") for n in names)


def test_a_registry_read_through_the_cache_follows_its_files(tmp_path: Path) -> None:
    files = real_files()
    validated = parse_registry(files, cache=None)
    for _ in range(2):  # validated and kept, then read back
        assert parse_registry(files, cache=tmp_path) == validated
    dearer = files.texts["gpus.yaml"].replace("{secure: 0.17,", "{secure: 0.18,", 1)
    changed = parse_registry(files_with(gpus=dearer), cache=tmp_path)
    assert changed.gpus[0].price_usd_per_hour.secure == 0.18
    assert replace(changed, gpus=validated.gpus) == validated


def test_a_registry_that_fails_validation_is_never_cached(tmp_path: Path) -> None:
    bad = files_with(gpus="gpus: [{id: x}]\nmax_gpus_per_pod: 8\n")
    for _ in range(2):  # the second time validates again and gives the same error
        with pytest.raises(ConfigError, match=r"gpus\.yaml: gpu 'x' field 'name'"):
            parse_registry(bad, cache=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_read_back_registry_behaves_as_the_validated_one(tmp_path: Path) -> None:
    files = RegistryFiles(texts=dict(real_files().texts))
    parse_registry(files, cache=tmp_path)
    cached = parse_registry(files, cache=tmp_path)
    assert isinstance(cached, Registry)
    first = cached.models[0]
    assert cached.model(first.id) is not None and cached.model(first.id) == first
    assert cached.engine_options == real_registry().engine_options


def test_a_source_file_edited_added_or_removed_changes_the_stamp(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("y = 2\n")
    (tmp_path / "notes.txt").write_text("not a source")
    first = registry_cache.source_stamp(tmp_path)
    assert "a.py" in first and os.path.join("sub", "b.py") in first and "notes" not in first
    assert registry_cache.source_stamp(tmp_path) == first
    (tmp_path / "sub" / "b.py").write_text("y = 3\n")
    os.utime(tmp_path / "sub" / "b.py", ns=(1, 1))  # same size, other time: an edit
    edited = registry_cache.source_stamp(tmp_path)
    assert edited != first
    (tmp_path / "c.py").write_text("")
    assert registry_cache.source_stamp(tmp_path) != edited
    (tmp_path / "c.py").unlink()
    assert registry_cache.source_stamp(tmp_path) == edited


def test_the_stamp_is_of_the_tree_wherever_it_lies_and_a_size_alone_changes_it(
    tmp_path: Path,
) -> None:
    def tree(name: str, text: str) -> Path:
        (tmp_path / name / "sub").mkdir(parents=True, exist_ok=True)
        (tmp_path / name / "sub" / "b.py").write_text(text)
        os.utime(tmp_path / name / "sub" / "b.py", ns=(5, 7))
        return tmp_path / name

    here, there = tree("a", "y = 2\n"), tree("a-longer-name", "y = 2\n")
    assert registry_cache.source_stamp(here) == registry_cache.source_stamp(there)
    tree("a", "y = 22\n")  # the same modification time, another size
    assert registry_cache.source_stamp(here) != registry_cache.source_stamp(there)


def test_the_validator_versions_are_the_installed_ones() -> None:
    import pydantic
    import pydantic_core

    assert registry_cache._validator_versions() == [
        f"pydantic {pydantic.VERSION}",
        f"pydantic-core {pydantic_core.__version__}",
    ]
