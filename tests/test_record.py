"""A record is a frozen keyword-only dataclass: equal, hashable and shown by its fields."""

from __future__ import annotations

import pickle
from dataclasses import FrozenInstanceError, asdict, field, fields, replace

import pytest

from frutebox_infra.record import positional_record, record


@record
class Point:
    x: int
    y: int = 0
    tags: tuple[str, ...] = ()


@record
class Other:
    x: int
    y: int = 0
    tags: tuple[str, ...] = ()


@record
class Box:
    corner: Point
    notes: dict[str, str] = field(default_factory=dict)


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        pytest.param(Point(x=1, y=2), Point(x=1, y=2), True, id="same-fields"),
        pytest.param(Point(x=1, y=2), Point(x=1, y=3), False, id="one-field-differs"),
        pytest.param(Point(x=1), Other(x=1), False, id="other-class-same-fields"),
        pytest.param(Box(corner=Point(x=1)), Box(corner=Point(x=1)), True, id="nested"),
    ],
)
def test_records_are_equal_by_class_and_fields(a: object, b: object, equal: bool) -> None:
    assert (a == b) is equal and (a != b) is not equal


def test_equal_records_hash_alike_and_a_record_with_a_dict_is_unhashable() -> None:
    assert hash(Point(x=1, tags=("a",))) == hash(Point(x=1, tags=("a",)))
    assert len({Point(x=1), Point(x=1), Point(x=2)}) == 2
    with pytest.raises(TypeError):
        hash(Box(corner=Point(x=1)))


def test_a_record_is_frozen_keyword_only_and_shown_by_its_fields() -> None:
    p = Point(x=1, tags=("a",))
    with pytest.raises(FrozenInstanceError):
        p.x = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        Point(1)  # type: ignore[misc]
    assert repr(p) == "Point(x=1, y=0, tags=('a',))"


def test_the_dataclass_tools_and_pickle_work_on_a_record() -> None:
    box = Box(corner=Point(x=1), notes={"k": "v"})
    assert [f.name for f in fields(box)] == ["corner", "notes"]
    assert asdict(box) == {"corner": {"x": 1, "y": 0, "tags": ()}, "notes": {"k": "v"}}
    assert replace(box.corner, y=5) == Point(x=1, y=5)
    assert pickle.loads(pickle.dumps(box)) == box


@positional_record
class Span:
    start: int
    end: int
    note: str = field(default="", compare=False, repr=False)
    secret: str = field(default="", repr=False)


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        pytest.param(Span(1, 2), Span(1, 2), True, id="same-fields"),
        pytest.param(Span(1, 2), Span(1, 3), False, id="one-field-differs"),
        pytest.param(Span(1, 2, "x"), Span(1, 2, "y"), True, id="compare-false-is-not-compared"),
        pytest.param(Span(1, 2, secret="a"), Span(1, 2, secret="b"), False, id="repr-false-is"),
    ],
)
def test_a_positional_record_compares_as_its_dataclass_would(a: Span, b: Span, equal: bool) -> None:
    assert (a == b) is equal
    assert (hash(a) == hash(b)) is equal


def test_a_positional_record_is_frozen_built_in_order_and_hides_what_repr_false_hides() -> None:
    span = Span(1, 2, "n", "s")
    with pytest.raises(FrozenInstanceError):
        span.start = 3  # type: ignore[misc]
    assert (span.start, span.end, span.note) == (1, 2, "n")
    assert repr(span) == "Span(start=1, end=2)"


def test_a_class_with_its_own_equality_is_refused() -> None:
    class Own:
        x: int

        def __eq__(self, other: object) -> bool:
            return True

    with pytest.raises(TypeError, match="writes its own __eq__"):
        positional_record(Own)
