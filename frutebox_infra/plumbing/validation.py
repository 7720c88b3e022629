"""Pydantic over our frozen dataclasses: the one place input is validated, imported only there.

Records are plain frozen dataclasses (cheap to import, to build and to unpickle); their
bounds ride in string annotations as `Check(...)` markers, which cost nothing until pydantic
reads them. `validate(cls, data)` builds a validator for `cls` on first use and applies the
house rules every record shares: a field may be spelt by its ALIAS, unknown keys are typos,
infinities and NaN are no figures, and booleans and numbers never stand in for each other
(pydantic would read `vram_gb: true` as 1 and `fp8: 0` as false). Frozen-ness and
cross-field rules (`__post_init__`) are the dataclasses' own, so they hold for records built
in code too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, cast

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler
    from pydantic_core import CoreSchema, SchemaValidator

T = TypeVar("T")

ALIAS = "alias"
"""A dataclass field's metadata key for the name input spells it by (`dataCenter` for
`data_center`); either spelling is read, errors name the alias."""


class Check:
    """Bounds of one value (`Check(gt=0, le=100)`, `pattern=`, `min_length=`, as pydantic's
    `Field` spells them), a `before` hook that sees the raw input first (to refuse a likely
    mistake with a sentence of its own) and an `after` hook that sees the validated value and
    the fields validated before it (a rule across fields, located at this one)."""

    __slots__ = ("after", "before", "bounds")

    def __init__(
        self,
        *,
        before: Callable[[Any], Any] | None = None,
        after: Callable[[Any, Mapping[str, Any]], Any] | None = None,
        **bounds: Any,
    ) -> None:
        self.before = before
        self.after = after
        self.bounds = bounds

    def __get_pydantic_core_schema__(
        self, source_type: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        from pydantic import Field
        from pydantic_core import core_schema

        bounded = Annotated[source_type, Field(**self.bounds)] if self.bounds else source_type
        schema = handler(bounded)
        if self.before is not None:
            schema = core_schema.no_info_before_validator_function(self.before, schema)
        if self.after is not None:
            after = self.after
            schema = core_schema.with_info_after_validator_function(
                lambda value, info: after(value, info.data or {}), schema
            )
        return schema


def validate(cls: type[T], data: Any) -> T:
    """`data` (parsed YAML or JSON) as a `cls`; raises pydantic's ValidationError, whose
    errors name the path of each bad value."""
    return cast(T, _validator(cast(Any, cls)).validate_python(data))


def validate_json(cls: type[T], text: str | bytes) -> T:
    return cast(T, _validator(cast(Any, cls)).validate_json(text))


def message(error: Mapping[str, Any]) -> str:
    """An error's message as our readers see it: a key no record has is spelt as pydantic
    spells it for its models ("Extra inputs are not permitted"), not as a call's argument."""
    if error["type"] == "unexpected_keyword_argument":
        return "Extra inputs are not permitted"
    return str(error["msg"])


@cache
def _validator(cls: Any) -> SchemaValidator:
    from pydantic import TypeAdapter
    from pydantic_core import SchemaValidator

    return SchemaValidator(_house_rules(TypeAdapter(cls).core_schema))


def _house_rules(node: Any) -> Any:
    """The core schema with every record closed, every float finite, every number and
    boolean strict about which it is."""
    if isinstance(node, list):
        return [_house_rules(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _house_rules(value) for key, value in node.items()}
    kind = node.get("type")
    if kind == "dataclass-args":
        node["extra_behavior"] = "forbid"
    elif kind == "dataclass" and node["schema"].get("type") == "dataclass-args":
        aliases = {f.name: f.metadata[ALIAS] for f in fields(node["cls"]) if ALIAS in f.metadata}
        for spec in node["schema"]["fields"]:
            if spec["name"] in aliases:
                spec["validation_alias"] = [[aliases[spec["name"]]], [spec["name"]]]
    elif kind in ("int", "float"):
        if kind == "float":
            node["allow_inf_nan"] = False
        # A strict number refuses a boolean itself, in its own words.
        return node if node.get("strict") else _before(_not_a_boolean, node)
    elif kind == "bool":
        return _before(_a_boolean, node)
    return node


def _before(check: Callable[[Any], Any], schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function-before", "function": {"type": "no-info", "function": check},
            "schema": schema}  # fmt: skip


def _not_a_boolean(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("true/false is not a value of this field")
    return value


def _a_boolean(value: Any) -> Any:
    if not isinstance(value, bool):
        raise ValueError("must be true or false")
    return value
