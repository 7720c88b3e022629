"""`@record`: a frozen, keyword-only dataclass that costs half as much to define.

Defining a dataclass compiles each method it writes from source (`exec`), which on the
start-up path of a preview adds up over the records the registry, the stack settings and the
deploy requests declare. A record gets its `__init__` and frozen `__setattr__` written as
usual, and shares one `__eq__`, `__hash__` and `__repr__` with every other record instead;
they behave as the written ones would (fields in order, equal only to the same class).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")


@dataclass_transform(frozen_default=True, kw_only_default=True)
def record(cls: type[T]) -> type[T]:
    made: Any = dataclass(frozen=True, kw_only=True, repr=False, eq=False)(cls)
    made.__record_fields__ = tuple(f.name for f in fields(made))
    made.__eq__, made.__hash__, made.__repr__ = _eq, _hash, _repr
    return made  # type: ignore[no-any-return]


def _values(self: Any) -> tuple[Any, ...]:
    return tuple(getattr(self, name) for name in self.__record_fields__)


def _eq(self: Any, other: object) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _values(self) == _values(other)


def _hash(self: Any) -> int:
    return hash(_values(self))


def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__record_fields__)
    return f"{self.__class__.__qualname__}({shown})"

