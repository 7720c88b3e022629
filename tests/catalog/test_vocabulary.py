"""The registry's vocabulary: the enums spell the values the fact files use."""

from __future__ import annotations

import pytest

from frutebox_infra.catalog.vocabulary import Runtime, SpecDecode


def test_the_enums_spell_the_registry_values() -> None:
    assert Runtime("llamacpp") is Runtime.LLAMACPP and str(Runtime.SGLANG) == "sglang"
    assert SpecDecode("p-eagle") is SpecDecode.P_EAGLE
    with pytest.raises(ValueError):
        Runtime("llama.cpp")
