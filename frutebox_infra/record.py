"""`@record`: a frozen, keyword-only dataclass that costs half as much to define.

Defining a dataclass compiles each method it writes from source (`exec`), which on the
start-up path of a preview adds up over the records the registry, the stack settings and the
deploy requests declare. A record gets its `__init__` and frozen `__setattr__` written as
usual, and shares one `__eq__`, `__hash__` and `__repr__` with every other record instead;
they behave as the written ones would (fields in order, equal only to the same class).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")


@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(field,))
def record(cls: type[T]) -> type[T]:
    """A frozen record built by keyword only: the registry's, the settings' and the requests'."""
    return _shared(dataclass(frozen=True, kw_only=True, repr=False, eq=False)(cls))


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def positional_record(cls: type[T]) -> type[T]:
    """`@dataclass(frozen=True)` at a record's cost: for the planner's small values, which
    their modules build positionally."""
    return _shared(dataclass(frozen=True, repr=False, eq=False)(cls))


def _shared(cls: type[T]) -> type[T]:
    """The shared methods, over the fields a dataclass's own would use (`compare`, `hash`
    and `repr` of each field honoured)."""
    made: Any = cls
    own = [name for name in ("__eq__", "__hash__", "__repr__") if name in vars(made)]
    if own:
        raise TypeError(f"{made.__qualname__} writes its own {', '.join(own)}: not a record")
    every = fields(made)
    made.__record_fields__ = tuple(f.name for f in every if f.compare)
    made.__record_hash_fields__ = tuple(
        f.name for f in every if (f.compare if f.hash is None else f.hash)
    )
    made.__record_repr_fields__ = tuple(f.name for f in every if f.repr)
    made.__eq__, made.__hash__, made.__repr__ = _eq, _hash, _repr
    return cls


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
