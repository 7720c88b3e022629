"""The engine facts (registry/engine_options/): read for exactly the pinned images, with their
provenance, and a broken file named with the regenerate fix."""

from __future__ import annotations

import pytest

from frutebox_infra.catalog.files import RegistryFiles, parse_registry
from frutebox_infra.catalog.schema import Runtime
from frutebox_infra.plumbing.errors import ConfigError
from tests.factories import real_files, real_registry


def test_every_pinned_image_has_facts_read_at_exactly_its_tag() -> None:
    # Bumping a tag in images.yaml without re-running tools/engine-options fails here.
    reg = real_registry()
    for runtime, image in reg.images.items():
        facts = reg.engine_options.get(runtime)
        assert facts is not None, f"no registry/engine_options/{runtime}.json"
        assert facts.image == image.reference, (
            f"registry/engine_options/{runtime}.json was read for {facts.image}, the pinned"
            f" image is {image.reference}: run tools/engine-options"
        )
    assert set(reg.engine_options) == set(reg.images)


def test_every_facts_file_says_where_and_how_it_was_read() -> None:
    for runtime, facts in real_registry().engine_options.items():
        assert facts.origin and facts.read_from and facts.read_with, runtime
        assert (
            facts.health_source and facts.health_path == real_registry().images[runtime].health_path
        )
        assert "HF_HOME" in facts.env or runtime is Runtime.OLLAMA, runtime


def with_facts(engine: str, text: str) -> RegistryFiles:
    return RegistryFiles(texts={**real_files().texts, f"engine_options/{engine}.json": text})


@pytest.mark.parametrize(
    ("text", "words"),
    [
        pytest.param('{"engine": "vllm",', "not valid JSON", id="json"),
        pytest.param('{"engine": "vllm", "engine": "vllm"}', "written twice", id="duplicate-key"),
        pytest.param('{"engine": "sglang"}', "key 'engine' must be 'vllm'", id="wrong-engine"),
    ],
)
def test_a_broken_facts_file_is_named_with_the_regenerate_fix(text: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_registry(with_facts("vllm", text))
    message = str(err.value)
    assert "engine_options/vllm.json" in message and words in message
    assert "tools/engine-options" in message


def test_a_wrong_field_in_a_facts_file_names_file_field_and_fix() -> None:
    text = real_files().texts["engine_options/vllm.json"]
    broken = text.replace('"type": "int"', '"type": "integer"', 1)
    with pytest.raises(ConfigError) as err:
        parse_registry(with_facts("vllm", broken))
    message = str(err.value)
    assert "registry/engine_options/vllm.json" in message and "'flags." in message
    assert "regenerate" in message


def test_a_plain_flag_is_read_by_any_spelling_and_json_flags_are_not_plain() -> None:
    facts = real_registry().engine_options[Runtime.VLLM]
    by_name = {name: flag for flag in facts.flags for name in flag.names}
    chosen = next(f for f in facts.flags if f.choices and f.json_fields is None)
    for name in chosen.names:
        plain = facts.plain_flag(name)
        assert plain is not None and plain is facts.plain_flag(name)  # made once
        assert (plain.type, plain.nargs) == (chosen.type, chosen.nargs)
        assert plain.choices == frozenset(
            c.upper() if chosen.case_insensitive else c for c in chosen.choices or ()
        )
    json_flag = next(name for name, f in by_name.items() if f.json_fields is not None)
    assert facts.plain_flag(json_flag) is None
    assert facts.plain_flag("--no-such-flag") is None
