"""A record is built as the dataclass it stands for is: equal, hashable and shown by its fields."""

from __future__ import annotations

import copy
import dataclasses  # noqa: F401 (a string annotation below names dataclasses.InitVar)
import inspect
import marshal
import pickle
import types
import typing
from collections.abc import Callable
from dataclasses import (  # noqa: F401 (string annotations below name KW_ONLY and InitVar)
    KW_ONLY,
    FrozenInstanceError,
    InitVar,
    asdict,
    astuple,
    dataclass,
    field,
    fields,
    is_dataclass,
    replace,
)
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import pytest

from frutebox_infra import record as record_module
from frutebox_infra.record import amended, lazy, mutable_record, positional_record, record
from frutebox_infra.record import replace as replace_of
from frutebox_infra.record_code import CodeCache


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


def test_a_pickled_record_keeps_only_the_fields_off_their_default() -> None:
    # A field at its default is read back from the class, which holds the default too.
    plain = Point(x=1)
    assert vars(plain) == {"x": 1, "y": 0, "tags": ()}
    assert plain.__getstate__() == {"x": 1}  # type: ignore[attr-defined]
    back = pickle.loads(pickle.dumps(plain))
    assert back == plain and (back.x, back.y, back.tags) == (1, 0, ())
    assert vars(back) == {"x": 1}
    set_all = Point(x=1, y=2, tags=("a",))
    assert pickle.loads(pickle.dumps(set_all)).__dict__ == {"x": 1, "y": 2, "tags": ("a",)}
    # A field made by a factory has no default on the class: always kept.
    box = Box(corner=plain)
    assert set(pickle.loads(pickle.dumps(box)).__dict__) == {"corner", "notes"}


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


# The builder against dataclasses: each shape is made twice, once by a record decorator and
# once by the dataclass it stands for, and the two must come out the same.

FLAVOURS = [
    pytest.param(record, {"frozen": True, "kw_only": True}, id="record"),
    pytest.param(positional_record, {"frozen": True}, id="positional"),
    pytest.param(mutable_record, {"slots": True}, id="mutable"),
]
Decorator = Callable[[type[Any]], type[Any]]
ClassVarLike = int
"""Named like a ClassVar, but a plain type: a field."""
InitVarLike = int


def _plain(deco: Decorator) -> type[Any]:
    class Plain:
        x: int
        y: str

    return deco(Plain)


def _defaults(deco: Decorator) -> type[Any]:
    class Defaults:
        """Documented."""

        x: int
        y: int = 1
        tags: tuple[str, ...] = ()
        note: str = field(default="n", repr=False)

    return deco(Defaults)


def _factories(deco: Decorator) -> type[Any]:
    class Factories:
        x: int
        items: list[int] = field(default_factory=list)
        later: dict[str, int] = field(default_factory=dict, init=False)

    return deco(Factories)


def _not_in_init(deco: Decorator) -> type[Any]:
    class NotInInit:
        x: int
        fixed: int = field(default=3, init=False)
        doubled: int = field(init=False)

        def __post_init__(self) -> None:
            object.__setattr__(self, "doubled", 2 * self.x)

    return deco(NotInInit)


def _keyword_field(deco: Decorator) -> type[Any]:
    class KeywordField:
        x: int = 0
        y: int = field(kw_only=True)

    return deco(KeywordField)


def _self_field(deco: Decorator) -> type[Any]:
    class SelfField:
        self: int
        other: int = 0

    return deco(SelfField)


def _class_vars(deco: Decorator) -> type[Any]:
    class ClassVars:
        x: int
        limit: ClassVar[int] = 5
        qualified: typing.ClassVar[str] = "q"
        bare: ClassVar
        alike: ClassVarLike = 7

    return deco(ClassVars)


def _inherited(deco: Decorator) -> type[Any]:
    class Base:
        x: int
        y: int = 1

    class Child(deco(Base)):  # type: ignore[misc]
        z: int = 2
        y: int = 3

    return deco(Child)


def _evaluated(deco: Decorator) -> type[Any]:
    """Annotations given as objects, not strings (a module without the __future__ import)."""
    made = type("Evaluated", (), {"limit": 1})
    made.__annotations__ = {"x": int, "limit": ClassVar[int], "y": str}
    return deco(made)


SHAPES = [
    pytest.param(_plain, id="plain"),
    pytest.param(_defaults, id="defaults"),
    pytest.param(_factories, id="factories"),
    pytest.param(_not_in_init, id="init-false-and-post-init"),
    pytest.param(_keyword_field, id="kw-only-field"),
    pytest.param(_self_field, id="a-field-named-self"),
    pytest.param(_class_vars, id="class-vars"),
    pytest.param(_inherited, id="inherited"),
    pytest.param(_evaluated, id="evaluated-annotations"),
]


def anatomy(cls: type[Any]) -> dict[str, object]:
    """All of a dataclass that its users can see: its `__init__` down to the bytecode, its
    fields, parameters, class attributes, documentation and slots."""
    init: Any = cls.__init__
    code = init.__code__
    return {
        "code": (code.co_code, code.co_consts, code.co_names, code.co_varnames),
        "free": (code.co_freevars, [c.cell_contents for c in init.__closure__ or ()]),
        "arguments": (code.co_argcount, code.co_kwonlyargcount),
        "defaults": (init.__defaults__, init.__kwdefaults__, init.__annotations__),
        "names": (init.__name__, init.__qualname__, init.__module__),
        "signature": str(inspect.signature(cls)),
        "fields": [_facts(f) for f in cls.__dataclass_fields__.values()],  # type: ignore[attr-defined]
        "params": repr(cls.__dataclass_params__),  # type: ignore[attr-defined]
        "match_args": cls.__match_args__,  # type: ignore[attr-defined]
        "attributes": {n: _attribute(cls, n) for n in cls.__dataclass_fields__},  # type: ignore[attr-defined]
        "doc": cls.__doc__,
        "slots": vars(cls).get("__slots__"),
        "qualname": cls.__qualname__,
    }


def _facts(f: Any) -> tuple[object, ...]:
    names = ("name", "type", "default", "default_factory", "init", "repr", "hash", "compare")
    return tuple(getattr(f, n) for n in (*names, "kw_only", "_field_type"))


def _attribute(cls: type[Any], name: str) -> object:
    found = vars(cls).get(name, "absent")
    return "a slot" if isinstance(found, types.MemberDescriptorType) else found


SHAPED_FLAVOURS = [
    pytest.param(*shape.values, *flavour.values, id=f"{shape.id}-{flavour.id}")
    for shape in SHAPES
    for flavour in FLAVOURS
    # every field of a record is keyword-only already: `defaults` is that shape
    if not (shape.id == "kw-only-field" and flavour.id == "record")
]
"""Every shape made by every record flavour."""


@pytest.mark.parametrize(("shape", "deco", "options"), SHAPED_FLAVOURS)
def test_a_record_is_built_as_its_dataclass_is(
    shape: Callable[[Decorator], type[Any]], deco: Decorator, options: dict[str, bool]
) -> None:
    ours, theirs = shape(deco), shape(dataclass(**options))
    mine, its = anatomy(ours), anatomy(theirs)
    if options.get("frozen"):
        # A frozen record writes its fields into the instance dict, not through
        # object.__setattr__: the same values land in the same place, as the next test holds.
        assert "__record_dict__" in mine.pop("code")[3] and mine.pop("free")
        its.pop("code"), its.pop("free")
    assert mine == its


@pytest.mark.parametrize(
    "shape",
    [shape for shape in SHAPES if shape.id not in ("kw-only-field",)],
)
@pytest.mark.parametrize("deco", [record, positional_record])
def test_a_frozen_record_is_filled_as_its_frozen_dataclass_is(
    shape: Callable[[Decorator], type[Any]], deco: Decorator
) -> None:
    options = {"frozen": True, "kw_only": True} if deco is record else {"frozen": True}
    made = []
    for kind in (shape(deco), shape(dataclass(**options))):
        given = {f.name: _sample(f.type) for f in fields(kind) if f.init}
        value = kind(**given)
        made.append((vars(value), repr(value)))
        with pytest.raises(FrozenInstanceError):
            setattr(value, next(iter(given)), 1)
    assert made[0] == made[1]


def test_a_field_a_base_keeps_in_a_slot_is_set_through_the_slot() -> None:
    class Slotted:
        __slots__ = ("x",)

    def filled(deco: Decorator) -> type[Any]:
        class Filled(Slotted):
            x: int
            y: int = 0

        return deco(Filled)

    ours, theirs = filled(positional_record), filled(dataclass(frozen=True))
    assert "__record_dict__" not in ours.__init__.__code__.co_varnames
    assert vars(ours(1, 2)) == vars(theirs(1, 2)) == {"y": 2}
    assert ours(1, 2).x == 1


@pytest.mark.parametrize(("deco", "options"), FLAVOURS)
def test_a_record_is_built_and_used_as_its_dataclass_is(
    deco: Decorator, options: dict[str, bool]
) -> None:
    made = [_not_in_init(deco), _not_in_init(dataclass(**options))]
    values = [kind(x=4) for kind in made]
    assert [(v.x, v.fixed, v.doubled) for v in values] == [(4, 3, 8)] * 2
    factories = [_factories(deco), _factories(dataclass(**options))]
    first, second = ([kind(x=1), kind(x=1)] for kind in factories)
    assert first[0].items == second[0].items == [] and first[0].items is not first[1].items
    assert [repr(kind(x=1)).split("(", 1)[1] for kind in factories] == [
        "x=1, items=[], later={})"
    ] * 2


@pytest.mark.parametrize(("deco", "options"), FLAVOURS)
@pytest.mark.parametrize(
    ("shape", "error"),
    [
        pytest.param(lambda: {"items": []}, ValueError, id="a-mutable-default"),
        pytest.param(
            lambda: {"__annotations__": {"x": "int", "y": "int"}, "x": 1},
            TypeError,
            id="a-default-before-none",
        ),
        pytest.param(lambda: {"x": field(default=1)}, TypeError, id="a-field-without-type"),
        pytest.param(
            lambda: {"__annotations__": {"n": "ClassVar[int]"}, "n": field(default_factory=int)},
            TypeError,
            id="a-class-var-with-a-factory",
        ),
        pytest.param(
            lambda: {"__annotations__": {"n": "ClassVar[int]"}, "n": field(kw_only=True)},
            TypeError,
            id="a-class-var-kw-only",
        ),
        pytest.param(
            lambda: {"__setattr__": lambda self, name, value: None}, TypeError,
            id="its-own-setattr",
        ),
    ],
)
def test_a_record_refuses_what_its_dataclass_refuses(
    shape: Callable[[], dict[str, Any]],
    error: type[Exception],
    deco: Decorator,
    options: dict[str, bool],
) -> None:
    namespace = {"__annotations__": {"items": "list[int]"}, "__module__": __name__}
    allowed = (
        # a keyword-only field without a default may follow one with a default
        (options.get("kw_only") and "y" in shape().get("__annotations__", {}))
        # only a frozen class needs its __setattr__
        or ("__setattr__" in shape() and not options.get("frozen"))
    )
    for build in (deco, dataclass(**options)):
        made = type("Refused", (), namespace | shape())
        if allowed:
            assert is_dataclass(build(made))
            continue
        with pytest.raises(error):
            build(made)


@pytest.mark.parametrize(
    ("annotation", "kind"),
    [
        pytest.param("InitVar[int]", "InitVar", id="init-var"),
        pytest.param("dataclasses.InitVar[int]", "InitVar", id="qualified-init-var"),
        pytest.param("KW_ONLY", "KW_ONLY", id="kw-only-marker"),
        pytest.param("InitVarLike", None, id="a-type-named-alike"),
    ],
)
def test_what_only_a_dataclass_does_is_refused(annotation: str, kind: str | None) -> None:
    made = type("Special", (), {"__annotations__": {"x": annotation}, "__module__": __name__})
    if kind is None:
        assert [f.name for f in fields(positional_record(made))] == ["x"]
        return
    with pytest.raises(TypeError, match=f"Special.x: a record has no {kind}; use a dataclass"):
        positional_record(made)


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        pytest.param(positional_record, dataclass(frozen=True), id="frozen-with-mutable-base"),
        pytest.param(mutable_record, dataclass(slots=True), id="mutable-with-frozen-base"),
    ],
)
def test_frozen_and_mutable_do_not_mix_in_one_hierarchy(ours: Decorator, theirs: Decorator) -> None:
    other = mutable_record if ours is positional_record else positional_record
    base = other(type("Base", (), {"__annotations__": {"x": "int"}, "__module__": __name__}))
    with pytest.raises(TypeError, match="cannot inherit"):
        ours(type("Child", (base,), {"__module__": __name__}))
    with pytest.raises(TypeError, match="cannot inherit"):
        theirs(type("Child", (base,), {"__module__": __name__}))


def _refusals(value: object) -> list[str]:
    """What assigning a field, assigning a new name and deleting a field say."""
    said = []
    for act in (
        lambda: setattr(value, "x", 5),
        lambda: setattr(value, "new", 5),
        lambda: delattr(value, "x"),
    ):
        with pytest.raises(FrozenInstanceError) as raised:
            act()
        said.append(str(raised.value))
    return said


def test_a_frozen_record_refuses_changes_as_a_frozen_dataclass_does() -> None:
    ours, theirs = _plain(positional_record)(1, "a"), _plain(dataclass(frozen=True))(1, "a")
    assert _refusals(ours) == _refusals(theirs) == [
        "cannot assign to field 'x'",
        "cannot assign to field 'new'",
        "cannot delete field 'x'",
    ]


@pytest.mark.parametrize(
    "deco", [pytest.param(positional_record, id="record"), pytest.param(dataclass(frozen=True))]
)
def test_a_plain_subclass_of_a_frozen_record_may_set_only_what_is_not_a_field(
    deco: Decorator,
) -> None:
    class Sub(_plain(deco)):  # type: ignore[misc]
        pass

    value = Sub(1, "a")
    value.extra = 5
    del value.extra
    assert not hasattr(value, "extra")
    with pytest.raises(FrozenInstanceError, match="cannot assign to field 'x'"):
        value.x = 2
    with pytest.raises(FrozenInstanceError, match="cannot delete field 'y'"):
        del value.y


@positional_record
class Hashed:
    key: int
    label: str = field(default="", hash=False)
    """Compared, but not hashed."""
    weight: int = field(default=0, compare=False, hash=True)
    """Hashed, but not compared."""


@pytest.mark.parametrize(
    ("a", "b", "equal", "same_hash"),
    [
        pytest.param(Hashed(1), Hashed(1), True, True, id="same"),
        pytest.param(Hashed(1, "a"), Hashed(1, "b"), False, True, id="hash-false-is-not-hashed"),
        pytest.param(Hashed(1, weight=1), Hashed(1, weight=2), True, False, id="hash-true-is"),
    ],
)
def test_hash_honours_each_fields_hash_as_a_dataclass_does(
    a: Hashed, b: Hashed, equal: bool, same_hash: bool
) -> None:
    twin = dataclass(frozen=True)(type("Hashed", (), {**_body(Hashed), "__module__": __name__}))
    assert (a == b) is equal and (hash(a) == hash(b)) is same_hash
    pairs = [twin(a.key, a.label, a.weight), twin(b.key, b.label, b.weight)]
    assert (pairs[0] == pairs[1]) is equal and (hash(pairs[0]) == hash(pairs[1])) is same_hash


def _body(cls: type[Any]) -> dict[str, Any]:
    fields_ = cls.__dataclass_fields__  # type: ignore[attr-defined]
    return {
        "__annotations__": {n: f.type for n, f in fields_.items()},
        **{n: field(default=f.default, hash=f.hash, compare=f.compare) for n, f in fields_.items()},
    }


@mutable_record
class Scratch:
    a: int
    b: float = 0.0


def test_a_mutable_record_is_slotted_changeable_and_unhashable() -> None:
    value = Scratch(1)
    value.b = 2.5
    assert (value.a, value.b) == (1, 2.5) and value == Scratch(1, 2.5) and value != Scratch(1)
    assert not hasattr(value, "__dict__")
    with pytest.raises(AttributeError):
        value.c = 1  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="unhashable"):
        hash(value)
    assert repr(value) == "Scratch(a=1, b=2.5)"


@positional_record
class Lazy:
    base: int

    @cached_property
    def doubled(self) -> int:
        return 2 * self.base


def test_a_frozen_record_keeps_a_dict_for_cached_properties() -> None:
    value = Lazy(2)
    assert value.doubled == 4 and vars(value) == {"base": 2, "doubled": 4}
    vars(value)["doubled"] = 9  # what ranking.py does to seed the cache
    assert value.doubled == 9


def test_the_dataclass_tools_see_a_record_as_a_dataclass() -> None:
    made = _not_in_init(positional_record)
    value = made(2)
    assert is_dataclass(made) and is_dataclass(value)
    assert [f.name for f in fields(value)] == ["x", "fixed", "doubled"]
    assert asdict(value) == {"x": 2, "fixed": 3, "doubled": 4}
    assert astuple(replace(value, x=5)) == (5, 3, 10)
    with pytest.raises(ValueError, match="init=False"):
        replace(value, doubled=1)
    assert copy.copy(value) == value == copy.deepcopy(value)
    match value:
        case made(x):  # type: ignore[misc]
            assert x == 2


def test_a_records_init_is_compiled_once_per_source_and_kept_by_its_class(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = tmp_path / "code.marshal"
    monkeypatch.setattr(record_module, "CODE", CodeCache(file))
    made = _plain(positional_record)
    record_module.CODE.save()
    kept = CodeCache(file)
    ((owner, by_source),) = marshal.loads(file.read_bytes())[1].items()
    assert owner == f"{made.__module__}.{made.__qualname__}.__init__"
    kept_sources = list(by_source)
    assert len(kept_sources) == 1 and "def __init__(self,x:_type_x,y:_type_y)" in kept_sources[0]
    monkeypatch.setattr(record_module, "CODE", kept)
    assert _plain(positional_record)(1, "a").y == "a"
    file.unlink()
    kept.save()  # nothing was compiled: nothing to write
    assert not file.exists()


def _sample(annotation: object) -> object:
    """A value of the annotated type unlike any shape's default."""
    text = str(annotation)
    for head, value in (("tuple", ("t",)), ("list", [9]), ("dict", {"k": 9}), ("str", "s")):
        if head in text:
            return value
    return 5


@pytest.mark.parametrize(("shape", "deco", "options"), SHAPED_FLAVOURS)
def test_replace_makes_what_dataclasses_replace_makes(
    shape: Callable[[Decorator], type[Any]], deco: Decorator, options: dict[str, bool]
) -> None:
    made: list[Any] = []
    for kind in (shape(deco), shape(dataclass(**options))):
        given = {f.name: _sample(f.type) for f in fields(kind) if f.init}
        value = kind(**given)
        first = next(iter(given))
        made.append(
            [
                repr(copied)
                for copied in (
                    replace_of(value),
                    replace_of(value, **{first: 7}),
                    replace_of(value, **given),
                )
            ]
        )
        assert replace_of(value) is not value
        for wrong in [f.name for f in fields(kind) if not f.init]:
            with pytest.raises(ValueError, match=f"field {wrong} is declared with init=False"):
                replace_of(value, **{wrong: 1})
        with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
            replace_of(value, nope=1)
    ours, theirs = made
    assert ours == theirs
    assert ours[1] != ours[0]  # the change was made


def test_replace_leaves_what_only_dataclasses_does_to_it() -> None:
    @dataclass(frozen=True)
    class WithInitVar:
        x: int
        scale: InitVar[int] = 1

    assert replace_of(WithInitVar(1), x=2) == WithInitVar(2)
    with pytest.raises(TypeError, match="dataclass instances"):
        replace_of(object())


def test_replace_builds_each_class_its_own_copy_and_carries_no_cached_value() -> None:
    base = positional_record(type("Base", (), {"__annotations__": {"x": "int"}}))
    child = type("Child", (base,), {})
    assert type(replace_of(child(1), x=2)) is child and type(replace_of(base(1), x=2)) is base
    value = Lazy(2)
    assert value.doubled == 4 and replace_of(value, base=3).doubled == 6


def test_lazy_computes_once_into_the_instance_as_cached_property_does() -> None:
    calls: list[int] = []

    @positional_record
    class Counted:
        base: int

        @lazy
        def doubled(self) -> int:
            """Twice the base."""
            calls.append(self.base)
            return 2 * self.base

    value = Counted(3)
    assert (value.doubled, value.doubled, calls) == (6, 6, [3])
    assert vars(value) == {"base": 3, "doubled": 6}
    vars(value)["doubled"] = 1  # a value worked out elsewhere takes the slot
    assert value.doubled == 1
    descriptor: Any = vars(Counted)["doubled"]
    assert Counted.doubled is descriptor and descriptor.__doc__ == "Twice the base."
    with pytest.raises(TypeError, match="same lazy property to two different names"):
        descriptor.__set_name__(Counted, "tripled")


def test_amended_copies_fields_and_worked_out_values_with_the_changes() -> None:
    value = Lazy(2)
    assert value.doubled == 4
    copied = amended(value, base=3)
    assert type(copied) is Lazy and copied is not value
    assert vars(copied) == {"base": 3, "doubled": 4}  # carried over, not recomputed
    assert vars(value) == {"base": 2, "doubled": 4}
