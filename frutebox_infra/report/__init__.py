"""Renderings of every view: one module per view exposing its `Renderers`; `render.render(view,
format)` is the one entry, and each view's JSON data carries a `version`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class Format(StrEnum):
    """The output formats; a view offers TABLE and JSON, and MARKDOWN when it has a PR form."""

    TABLE = "table"
    JSON = "json"
    MARKDOWN = "markdown"


@dataclass(frozen=True, kw_only=True)
class Renderers(Generic[V]):
    """What one view module offers: a terminal table, plain data with stable keys (JSON) and,
    where the view belongs in a pull request or a job summary, Markdown."""

    name: str
    """The view as an error message names it ("the catalog")."""
    table: Callable[[V], str]
    data: Callable[[V], dict[str, Any]]
    markdown: Callable[[V], str] | None = None

    @property
    def formats(self) -> tuple[Format, ...]:
        return tuple(f for f in Format if f is not Format.MARKDOWN or self.markdown is not None)
