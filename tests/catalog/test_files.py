"""Reading registry/: which files a registry is, which may be absent, and errors naming the file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from frutebox_infra.catalog.files import (
    ENGINE_OPTIONS_DIR,
    FILES,
    OPTIONAL_FILES,
    RegistryFiles,
    is_engine_options,
    load_registry,
    parse_registry,
    read_registry_files,
)
from frutebox_infra.plumbing.errors import ConfigError
from frutebox_infra.plumbing.paths import REGISTRY_DIR


def copy(tmp_path: Path) -> Path:
    target = tmp_path / "registry"
    shutil.copytree(REGISTRY_DIR, target)
    return target


def test_the_checkout_registry_reads_every_file_and_the_engine_facts() -> None:
    files = read_registry_files()
    assert set(FILES) <= set(files.texts)
    facts = sorted(n for n in files.texts if is_engine_options(n))
    assert facts == sorted(f"{ENGINE_OPTIONS_DIR}/{p.name}"
                           for p in (REGISTRY_DIR / ENGINE_OPTIONS_DIR).glob("*.json"))  # fmt: skip
    registry = parse_registry(files)
    assert registry.engine_options and registry.speed is not None


@pytest.mark.parametrize(
    ("name", "engine_options"),
    [
        pytest.param("engine_options/vllm.json", True, id="facts-file"),
        pytest.param("engine_options/README.md", False, id="not-json"),
        pytest.param("vllm.json", False, id="not-in-the-folder"),
    ],
)
def test_which_names_are_engine_facts(name: str, engine_options: bool) -> None:
    assert is_engine_options(name) is engine_options


def test_a_missing_required_file_is_named_with_the_fix(tmp_path: Path) -> None:
    registry = copy(tmp_path)
    (registry / "gpus.yaml").unlink()
    with pytest.raises(ConfigError) as err:
        load_registry(registry)
    assert "gpus.yaml" in str(err.value) and "git checkout -- registry/" in str(err.value)


def test_optional_files_may_be_absent_as_at_an_older_git_ref() -> None:
    texts = {
        k: v
        for k, v in read_registry_files().texts.items()
        if k not in OPTIONAL_FILES and not is_engine_options(k)
    }
    registry = parse_registry(RegistryFiles(texts=texts))
    assert registry.speed is None and registry.engine_options == {}
    missing = {k: v for k, v in texts.items() if k != "models.yaml"}
    with pytest.raises(ConfigError, match=r"models\.yaml missing"):
        parse_registry(RegistryFiles(texts=missing))


def test_engine_facts_named_for_another_engine_are_refused(tmp_path: Path) -> None:
    registry = copy(tmp_path)
    facts = registry / ENGINE_OPTIONS_DIR
    (facts / "vllm.json").rename(facts / "sglang2.json")
    with pytest.raises(ConfigError) as err:
        load_registry(registry)
    assert "sglang2.json" in str(err.value) and "'engine' must be 'sglang2'" in str(err.value)


def test_a_latin1_byte_names_the_file_and_line(tmp_path: Path) -> None:
    registry = copy(tmp_path)
    path = registry / "datacenters.yaml"
    path.write_bytes(path.read_bytes() + b"# caf\xe9\n")
    with pytest.raises(ConfigError) as err:
        load_registry(registry)
    assert "datacenters.yaml" in str(err.value) and "UTF-8" in str(err.value)
