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
