"""The registry's record base: facts are immutable, typos are refused, booleans stay booleans."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from frutebox_infra.registry_base import Frozen, Runtime, SpecDecode


class Record(Frozen):
    size_gb: float
    fp8: bool = False
    maybe: bool | None = None


@pytest.mark.parametrize(
    ("data", "field"),
    [
        pytest.param({"size_gb": True}, "size_gb", id="true-is-not-a-number"),
        pytest.param({"size_gb": 1, "fp8": 0}, "fp8", id="zero-is-not-false"),
        pytest.param({"size_gb": 1, "maybe": 1}, "maybe", id="optional-boolean-too"),
        pytest.param({"size_gb": 1, "sise_gb": 2}, "sise_gb", id="a-typo-is-refused"),
    ],
)
def test_a_wrong_kind_of_value_or_a_typo_is_refused(data: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        Record.model_validate(data)
    assert field in str(err.value)


def test_a_good_record_is_read_and_frozen() -> None:
    record = Record.model_validate({"size_gb": 1.5, "fp8": True, "maybe": None})
    assert (record.size_gb, record.fp8, record.maybe) == (1.5, True, None)
    with pytest.raises(ValidationError):
        record.size_gb = 2.0  # type: ignore[misc]


def test_the_enums_spell_the_registry_values() -> None:
    assert Runtime("llamacpp") is Runtime.LLAMACPP and str(Runtime.SGLANG) == "sglang"
    assert SpecDecode("p-eagle") is SpecDecode.P_EAGLE
    with pytest.raises(ValueError):
        Runtime("llama.cpp")
