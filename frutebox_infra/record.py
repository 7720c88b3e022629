"""`@record`: a frozen dataclass that costs a fraction of one to define.

Defining a dataclass compiles each method it writes from source (`exec`) and inspects every
annotation, which on the start-up path of a preview adds up over the records the registry,
the stack settings, the planner and the deploy requests declare. A record is built here
instead: its fields are found as a dataclass finds them, its `__init__` is the code a
dataclass would write (save that a frozen one fills the instance dict directly, as
`object.__setattr__` would, at a fraction of its cost per field: the planner builds records
by the thousand), compiled once and kept across processes (record_code.py), and its
`__eq__`, `__hash__`, `__repr__` and frozen `__setattr__`/`__delattr__` are shared by every
record; they behave as the written ones would (fields in order, equal only to the same class,
`compare`, `hash` and `repr` of each field honoured). `dataclasses.fields`, `replace`,
`asdict`, `is_dataclass` and pydantic see a dataclass: the class carries
`__dataclass_fields__` (real `Field`s) and `__dataclass_params__`.

The planner copies and caches per placement, so two of its generic tools cost it a share of
every plan: `replace` here is `dataclasses.replace` with one generated function per class
instead of a walk over the fields per call, and `lazy` is `functools.cached_property` without
the lock 3.11 takes on every first access (3.12 dropped it: nothing here shares an instance
between threads while it is being filled).

Not supported (a dataclass is the tool there): `InitVar`, `KW_ONLY`, ordering, and a class
that writes its own `__eq__`, `__hash__` or `__repr__`.
"""

from __future__ import annotations

import abc
import dataclasses
import inspect
import sys
import types
import typing
from dataclasses import MISSING, Field, FrozenInstanceError, field
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar, dataclass_transform

from frutebox_infra.record_code import CODE

T = TypeVar("T")

_FIELD: Any = vars(dataclasses)["_FIELD"]
_FIELD_CLASSVAR: Any = vars(dataclasses)["_FIELD_CLASSVAR"]
_FIELDS_ATTR = "__dataclass_fields__"
_HAS_DEFAULT_FACTORY: Any = vars(dataclasses)["_HAS_DEFAULT_FACTORY"]
_PARAMS: Any = vars(dataclasses)["_DataclassParams"]
_NEW_FIELD: Any = Field
"""`Field` called as `field()` calls it (typeshed's stub does not take MISSING there)."""
_CLASSVAR, _INITVAR, _KW_ONLY = "ClassVar", "InitVar", "KW_ONLY"
_REFUSED = (_INITVAR, _KW_ONLY)
"""What a record has no use for (a dataclass is the tool there)."""


@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(field,))
def record(cls: type[T]) -> type[T]:
    """A frozen record built by keyword only: the registry's, the settings' and the requests'."""
    return _build(cls, kw_only=True, frozen=True)


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def positional_record(cls: type[T]) -> type[T]:
    """`@dataclass(frozen=True)` at a record's cost: for the planner's small values, which
    their modules build positionally."""
    return _build(cls, kw_only=False, frozen=True)


@dataclass_transform(field_specifiers=(field,))
def mutable_record(cls: type[T]) -> type[T]:
    """`@dataclass(slots=True)` at a record's cost: for the planner's per-estimate scratch
    values, built for every candidate and never changed, where freezing would cost a call
    per field at construction."""
    return _build(cls, kw_only=False, frozen=False, slots=True)


def _build(cls: type[T], *, kw_only: bool, frozen: bool, slots: bool = False) -> type[T]:
    made: Any = cls
    own = [name for name in ("__eq__", "__hash__", "__repr__") if name in vars(made)]
    if own:
        raise TypeError(f"{made.__qualname__} writes its own {', '.join(own)}: not a record")
    every = _fields(made, kw_only=kw_only, frozen=frozen)
    made.__dataclass_fields__ = every
    made.__dataclass_params__ = _params(kw_only=kw_only, frozen=frozen, slots=slots)
    real = [f for f in every.values() if f._field_type is _FIELD]
    if "__init__" not in vars(made):
        made.__init__ = _init(made, every, real, frozen=frozen, slots=slots)
    made.__record_fields__ = tuple(f.name for f in real if f.compare)
    made.__record_hash_fields__ = tuple(
        f.name for f in real if (f.compare if f.hash is None else f.hash)
    )
    made.__record_repr_fields__ = tuple(f.name for f in real if f.repr)
    made.__eq__, made.__repr__ = _eq, _repr
    made.__hash__ = _hash if frozen else None
    if frozen:
        made.__record_frozen_fields__ = frozenset(f.name for f in real)
        made.__record_defaults__ = {f.name: f.default for f in real if f.default is not MISSING}
        if made.__record_defaults__ and "__getstate__" not in vars(made):
            made.__getstate__ = _state_without_defaults
        for name, shared in (("__setattr__", _frozen_setattr), ("__delattr__", _frozen_delattr)):
            if name in vars(made):
                raise TypeError(f"Cannot overwrite attribute {name} in class {made.__name__}")
            setattr(made, name, shared)
    if not made.__doc__:
        made.__doc__ = made.__name__ + str(inspect.signature(made)).replace(" -> None", "")
    if "__match_args__" not in vars(made):
        match_args = tuple(f.name for f in real if f.init and not f.kw_only)
        type.__setattr__(made, "__match_args__", match_args)
    if slots:
        made = _with_slots(made, real)
    abc.update_abstractmethods(made)
    built: type[T] = made
    return built


@cache
def _params(*, kw_only: bool, frozen: bool, slots: bool) -> Any:
    """The `__dataclass_params__` a dataclass with these options carries, whichever of them
    this Python's dataclasses records (one object per flavour, which nothing changes)."""
    given = {"init": True, "repr": True, "eq": True, "frozen": frozen, "match_args": True}
    given |= {"kw_only": kw_only, "slots": slots}
    params = object.__new__(_PARAMS)
    for name in _PARAMS.__slots__:
        object.__setattr__(params, name, given.get(name, False))
    return params


def _fields(cls: Any, *, kw_only: bool, frozen: bool) -> dict[str, Any]:
    """The class's fields as a dataclass finds them: its bases' first, then its own
    annotations in order (ClassVars kept as pseudo-fields), defaults from class attributes."""
    every: dict[str, Any] = {}
    bases = [b for b in cls.__mro__[-1:0:-1] if getattr(b, "__dataclass_fields__", None)]
    for base in bases:
        every.update(base.__dataclass_fields__)
    if bases and any(b.__dataclass_params__.frozen for b in bases) is not frozen:
        raise TypeError(
            "cannot inherit frozen dataclass from a non-frozen one"
            if frozen
            else "cannot inherit non-frozen dataclass from a frozen one"
        )
    annotations = vars(cls).get("__annotations__", {})
    for name, annotation in annotations.items():
        found = every[name] = _field(cls, name, annotation, kw_only)
        if isinstance(vars(cls).get(name), Field):
            if found.default is MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, found.default)
    for name, value in vars(cls).items():
        if isinstance(value, Field) and name not in annotations:
            raise TypeError(f"{name!r} is a field but has no type annotation")
    return every


def _field(cls: Any, name: str, annotation: Any, kw_only: bool) -> Any:
    default: Any = getattr(cls, name, MISSING)
    made: Any
    if isinstance(default, Field):
        made = default
    else:
        if isinstance(default, types.MemberDescriptorType):
            default = MISSING  # a slot of a base class, not a default
        # What `field(default=default)` makes, without its checks of arguments not given.
        made = _NEW_FIELD(default, MISSING, True, True, None, True, None, MISSING)
    made.name, made.type = name, annotation
    made._field_type = _FIELD
    kind = _special(cls, annotation)
    if kind in _REFUSED:
        raise TypeError(f"{cls.__qualname__}.{name}: a record has no {kind}; use a dataclass")
    if kind == _CLASSVAR:
        made._field_type = _FIELD_CLASSVAR
        if made.default_factory is not MISSING:
            raise TypeError(f"field {name} cannot have a default factory")
        if made.kw_only is not MISSING:
            raise TypeError(f"field {name} is a ClassVar but specifies kw_only")
        return made
    if made.kw_only is MISSING:
        made.kw_only = kw_only
    if made.default.__class__.__hash__ is None:
        raise ValueError(
            f"mutable default {type(made.default)} for field {name} is not allowed:"
            " use default_factory"
        )
    return made


def _special(cls: Any, annotation: Any) -> str | None:
    """Which of ClassVar, InitVar or KW_ONLY the annotation names, if any; a string one by
    what its head names in the class's module, as dataclasses judges it."""
    if isinstance(annotation, str):
        if _CLASSVAR not in annotation and _INITVAR not in annotation and (
            _KW_ONLY not in annotation
        ):
            return None  # most annotations name none of the three
        qualifier, _, name = annotation.split("[", 1)[0].strip().rpartition(".")
        module = sys.modules.get(cls.__module__)
        found = vars(module).get(qualifier.strip() or name.strip()) if module else None
        annotation = getattr(found, name.strip(), None) if qualifier else found
    if annotation is typing.ClassVar or typing.get_origin(annotation) is typing.ClassVar:
        return _CLASSVAR
    if annotation is dataclasses.InitVar or isinstance(annotation, dataclasses.InitVar):
        return _INITVAR
    return _KW_ONLY if annotation is dataclasses.KW_ONLY else None


def _init(
    cls: Any, every: dict[str, Any], real: list[Any], *, frozen: bool, slots: bool
) -> Any:
    """The `__init__` a dataclass writes for these fields, from the same source text, whose
    compiled code the process's cache keeps (so equal code, without compiling it again).
    Every record of the package is defined on each start-up, so its fields are walked once."""
    me = "__dataclass_self__" if "self" in every else "self"
    names: dict[str, Any] = {f"_type_{f.name}": f.type for f in real}
    names |= {"MISSING": MISSING, "_HAS_DEFAULT_FACTORY": _HAS_DEFAULT_FACTORY}
    names["__dataclass_builtins_object__"] = object
    # A frozen record's fields go straight into its instance dict: what `object.__setattr__`
    # does there, at a fraction of its cost per field, unless a field's name is a descriptor
    # of the class (a base's slot, say), which only `object.__setattr__` honours.
    into_dict = frozen and not slots and not _any_descriptor(cls, real)
    body: list[str] = []
    positional: list[str] = []
    keyword: list[str] = []
    seen_default = False
    for f in real:
        name = f.name
        default, factory = f.default, f.default_factory
        has_default = default is not MISSING or factory is not MISSING
        if f.init:
            if not f.kw_only:
                if has_default:
                    seen_default = True
                elif seen_default:
                    raise TypeError(f"non-default argument {name!r} follows default argument")
            if default is not MISSING:
                param = f"{name}:_type_{name}=_dflt_{name}"
            elif factory is not MISSING:
                param = f"{name}:_type_{name}=_HAS_DEFAULT_FACTORY"
            else:
                param = f"{name}:_type_{name}"
            (keyword if f.kw_only else positional).append(param)
        line = _assign(f, names, me, frozen=frozen, slots=slots, into_dict=into_dict)
        if line:
            body.append(line)
    if into_dict and body:
        body.insert(0, f"{_DICT}={me}.__dict__")
    if hasattr(cls, "__post_init__"):
        body.append(f"{me}.__post_init__()")
    params = [me, *positional, *(["*", *keyword] if keyword else [])]
    names["_return_type"] = None
    lines = "\n".join(f"  {line}" for line in body or ["pass"])
    source = (
        f"def __create_fn__({', '.join(names)}):\n"
        f" def __init__({','.join(params)})->_return_type:\n{lines}\n return __init__"
    )
    scope: dict[str, Any] = {}
    module = sys.modules.get(cls.__module__)
    owner = f"{cls.__module__}.{cls.__qualname__}.__init__"
    exec(CODE.code(source, owner), vars(module) if module else {}, scope)
    made = scope["__create_fn__"](**names)
    made.__qualname__ = f"{cls.__qualname__}.__init__"
    return made


_DICT = "__record_dict__"


def _any_descriptor(cls: Any, real: list[Any]) -> bool:
    """True when a field's name on the class is a data descriptor, which a plain dict write
    would skip (the class's own attribute first, then its bases', as attribute lookup finds
    it)."""
    scopes = [vars(klass) for klass in cls.__mro__]
    for f in real:
        for scope in scopes:
            found = scope.get(f.name, MISSING)
            if found is not MISSING:
                kind = type(found)
                if hasattr(kind, "__set__") or hasattr(kind, "__delete__"):
                    return True
                break
    return False


def _assign(
    f: Any, names: dict[str, Any], me: str, *, frozen: bool, slots: bool, into_dict: bool
) -> str:
    """The `__init__` line that sets one field ("" for none), naming its default or factory."""
    default = f"_dflt_{f.name}"
    if f.default_factory is not MISSING:
        names[default] = f.default_factory
        value = f"{default}()"
        if f.init:
            value += f" if {f.name} is _HAS_DEFAULT_FACTORY else {f.name}"
    elif f.init:
        if f.default is not MISSING:
            names[default] = f.default
        value = f.name
    elif slots and f.default is not MISSING:
        names[default] = f.default
        value = default
    else:
        return ""  # read from the class attribute holding the default, as a dataclass's is
    if into_dict:
        return f"{_DICT}[{f.name!r}]={value}"
    if frozen:
        return f"__dataclass_builtins_object__.__setattr__({me},{f.name!r},{value})"
    return f"{me}.{f.name}={value}"


def _with_slots(cls: Any, real: list[Any]) -> Any:
    """The class made again with a slot per field, as `dataclass(slots=True)` makes it (slots
    can only be given when a class is created)."""
    if "__slots__" in vars(cls):
        raise TypeError(f"{cls.__name__} already specifies __slots__")
    inherited = {s for base in cls.__mro__[1:-1] for s in _slots(base)}
    names = tuple(f.name for f in real)
    namespace = dict(vars(cls))
    namespace["__slots__"] = tuple(n for n in names if n not in inherited)
    for name in (*names, "__dict__", "__weakref__"):
        namespace.pop(name, None)
    made = type(cls)(cls.__name__, cls.__bases__, namespace)
    made.__qualname__ = cls.__qualname__
    return made


def _slots(cls: type) -> tuple[str, ...]:
    found = vars(cls).get("__slots__", ())
    return (found,) if isinstance(found, str) else tuple(found)


def _values(self: Any) -> tuple[Any, ...]:
    return tuple(getattr(self, name) for name in self.__record_fields__)


def _eq(self: Any, other: object) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _values(self) == _values(other)


def _hash(self: Any) -> int:
    return hash(tuple(getattr(self, name) for name in self.__record_hash_fields__))


def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__record_repr_fields__)
    return f"{self.__class__.__qualname__}({shown})"


def _state_without_defaults(self: Any) -> dict[str, Any]:
    """What pickle keeps of a frozen record: its instance dict less the fields that hold
    their default, which the class holds too (as a dataclass's class does), so a record
    read back answers the same for every field. The registry's cache holds a thousand
    engine flags that set two or three of their seven fields: unpickled on every preview."""
    state: dict[str, Any] = self.__dict__
    defaults = type(self).__record_defaults__
    if not any(state.get(name, state) is default for name, default in defaults.items()):
        return state
    return {
        name: value
        for name, value in state.items()
        if name not in defaults or value is not defaults[name]
    }


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    if _frozen(self, name):
        raise FrozenInstanceError(f"cannot assign to field {name!r}")
    owner: Any = _owner(self)
    super(owner, self).__setattr__(name, value)


def _frozen_delattr(self: Any, name: str) -> None:
    if _frozen(self, name):
        raise FrozenInstanceError(f"cannot delete field {name!r}")
    owner: Any = _owner(self)
    super(owner, self).__delattr__(name)


def _frozen(self: Any, name: str) -> bool:
    """A dataclass's rule: nothing is set on the frozen class itself; on a plain subclass of
    it, only its fields are refused."""
    kind = type(self)
    return vars(kind).get("__setattr__") is _frozen_setattr or name in kind.__record_frozen_fields__


def _owner(self: Any) -> type:
    """The frozen record a plain subclass's instance inherits these methods from."""
    return next(c for c in type(self).__mro__ if vars(c).get("__setattr__") is _frozen_setattr)


def replace(obj: T, /, **changes: Any) -> T:
    """`dataclasses.replace(obj, **changes)`: a new instance through `__init__`, every init
    field by keyword (so nothing a lazy property cached is carried over), with the same errors
    for a field it cannot set."""
    made = vars(type(obj)).get("__record_replace__")
    if made is None:
        made = _replacer(type(obj))
        if made is None:
            return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    copied: T = made(obj, **changes)
    return copied



def amended(obj: T, /, **changes: Any) -> T:
    """A copy of a frozen record's instance dict with `changes`: its fields and what its lazy
    properties already worked out carried over, nothing set again. Only for changes that
    leave those worked-out values true (`replace` recomputes them)."""
    copied: T = object.__new__(type(obj))
    vars(copied).update(vars(obj), **changes)
    return copied

def _replacer(cls: Any) -> Any:
    """The class's own `replace`, generated once and kept on it; None for what only
    `dataclasses.replace` handles (not a dataclass instance, or an `InitVar`)."""
    every = getattr(cls, _FIELDS_ATTR, None)
    if not isinstance(every, dict):
        return None
    kinds = {f._field_type for f in every.values()}
    if kinds - {_FIELD, _FIELD_CLASSVAR}:
        return None
    real = [f for f in every.values() if f._field_type is _FIELD]
    me = "__record_self__"
    params = ", ".join(f"{f.name}=__record_missing__" for f in real)
    checks = [
        f"  if {f.name} is not __record_missing__: raise ValueError("
        f"'field {f.name} is declared with init=False, it cannot be specified with replace()')"
        for f in real
        if not f.init
    ]
    args = ", ".join(
        f"{f.name}=({f.name} if {f.name} is not __record_missing__"
        f" else {me}.{f.name})"
        for f in real
        if f.init
    )
    source = (
        "def __create_fn__(__record_class__, __record_missing__):\n"
        f" def replace({me}, /{', *, ' + params if params else ''}):\n"
        + "".join(line + "\n" for line in checks)
        + f"  return __record_class__({args})\n"
        " return replace"
    )
    scope: dict[str, Any] = {}
    exec(CODE.code(source, f"{cls.__module__}.{cls.__qualname__}.replace"), {}, scope)
    made = scope["__create_fn__"](cls, MISSING)
    type.__setattr__(cls, "__record_replace__", made)
    return made


if TYPE_CHECKING:
    from functools import cached_property

    lazy = cached_property
else:

    class lazy:  # named as the decorator it stands for
        """`functools.cached_property` without its lock: computed on first access into the
        instance's `__dict__`, which then answers every later access without this descriptor."""

        def __init__(self, func):
            self.func = func
            self.attrname = None
            self.__doc__ = func.__doc__
            self.__module__ = func.__module__

        def __set_name__(self, owner, name):
            if self.attrname is None:
                self.attrname = name
            elif name != self.attrname:
                raise TypeError(
                    "Cannot assign the same lazy property to two different names "
                    f"({self.attrname!r} and {name!r})."
                )

        def __get__(self, instance, owner=None):
            if instance is None:
                return self
            value = instance.__dict__[self.attrname] = self.func(instance)
            return value
