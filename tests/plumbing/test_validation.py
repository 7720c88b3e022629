"""The one validation edge: records are closed, frozen, finite, and booleans stay booleans."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass, field
from typing import Annotated, Any

import pytest
from pydantic import ValidationError

from frutebox_infra.plumbing.validation import ALIAS, Check, message, validate


def _no_text(value: Any) -> Any:
    if isinstance(value, str):
        raise ValueError("give a number, not text")
    return value


def _even(value: int, earlier: Any) -> int:
    if value % 2:
        raise ValueError(f"{value} is odd (size_gb was {earlier['size_gb']})")
    return value


@dataclass(frozen=True, kw_only=True)
class Record:
    size_gb: Annotated[float, Check(gt=0, le=10)]
    fp8: bool = False
    maybe: bool | None = None
    count: Annotated[int, Check(before=_no_text, after=_even)] = 2
    name: Annotated[str, Check(pattern=r"^[a-z]+$")] | None = None

    def __post_init__(self) -> None:
        if self.maybe and not self.fp8:
            raise ValueError("maybe needs fp8")


@pytest.mark.parametrize(
    ("data", "words"),
    [
        pytest.param({"size_gb": True}, "size_gb", id="true-is-not-a-number"),
        pytest.param({"size_gb": 1, "fp8": 0}, "fp8", id="zero-is-not-false"),
        pytest.param({"size_gb": 1, "maybe": 1}, "maybe", id="optional-boolean-too"),
        pytest.param({"size_gb": 1, "sise_gb": 2}, "sise_gb", id="a-typo-is-refused"),
        pytest.param({"size_gb": float("nan")}, "finite", id="nan-is-no-figure"),
        pytest.param({"size_gb": 0}, "greater than 0", id="lower-bound-excluded"),
        pytest.param({"size_gb": 10.5}, "less than or equal to 10", id="upper-bound"),
        pytest.param({"size_gb": 1, "count": "2"}, "not text", id="before-hook"),
        pytest.param({"size_gb": 1, "count": 3}, "3 is odd (size_gb was 1.0)", id="after-hook"),
        pytest.param({"size_gb": 1, "name": "A"}, "pattern", id="pattern"),
        pytest.param({"size_gb": 1, "maybe": True}, "maybe needs fp8", id="post-init-rule"),
    ],
)
def test_a_bad_value_is_refused_by_name(data: dict[str, object], words: str) -> None:
    with pytest.raises(ValidationError) as err:
        validate(Record, data)
    assert words in str(err.value)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param({"size_gb": 10}, Record(size_gb=10.0), id="upper-bound-included"),
        pytest.param(
            {"size_gb": 1, "fp8": True, "maybe": True, "count": 4, "name": "a"},
            Record(size_gb=1, fp8=True, maybe=True, count=4, name="a"),
            id="every-field",
        ),
    ],
)
def test_a_good_record_is_read_and_frozen(data: dict[str, object], expected: Record) -> None:
    record = validate(Record, data)
    assert record == expected
    with pytest.raises(FrozenInstanceError):
        record.size_gb = 2.0  # type: ignore[misc]


def test_the_same_rules_hold_inside_a_nested_record() -> None:
    @dataclass(frozen=True, kw_only=True)
    class Outer:
        inner: tuple[Record, ...]

    with pytest.raises(ValidationError, match=r"inner\.0\.fp8"):
        validate(Outer, {"inner": [{"size_gb": 1, "fp8": 1}]})
    assert validate(Outer, {"inner": [{"size_gb": 1}]}).inner == (Record(size_gb=1),)


@dataclass(frozen=True, kw_only=True)
class Spelt:
    data_center: str = field(metadata={ALIAS: "dataCenter"})


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param({"dataCenter": "EU"}, "EU", id="by-alias"),
        pytest.param({"data_center": "EU"}, "EU", id="by-field-name"),
        pytest.param({}, "dataCenter", id="missing-is-named-by-alias"),
        pytest.param({"dataCentre": "EU"}, "dataCentre", id="misspelt-is-refused"),
    ],
)
def test_a_field_is_read_by_its_alias_or_its_name(data: dict[str, str], expected: str) -> None:
    if expected == "EU":
        assert validate(Spelt, data).data_center == "EU"
    else:
        with pytest.raises(ValidationError, match=expected):
            validate(Spelt, data)


def test_an_unknown_key_reads_as_pydantic_says_it_for_its_models() -> None:
    with pytest.raises(ValidationError) as err:
        validate(Record, {"size_gb": 1, "sise_gb": 2})
    assert [message(e) for e in err.value.errors()] == ["Extra inputs are not permitted"]


@dataclass(frozen=True, kw_only=True)
class Strict:
    count: Annotated[int, Check(strict=True, ge=1)]


@pytest.mark.parametrize(
    ("value", "words"),
    [
        pytest.param(True, "valid integer", id="boolean-in-strict-words"),
        pytest.param("2", "valid integer", id="text-is-not-a-number"),
        pytest.param(0, "greater than or equal to 1", id="bound"),
    ],
)
def test_a_strict_number_refuses_in_its_own_words(value: object, words: str) -> None:
    with pytest.raises(ValidationError) as err:
        validate(Strict, {"count": value})
    assert words in message(err.value.errors()[0])
    assert validate(Strict, {"count": 2}).count == 2
