"""Renderings of a plan, a diff or the catalog: one module per format, each returning a
string; `report.render.render(view, format)` is the one entry."""

from enum import StrEnum


class Format(StrEnum):
    """The output formats every view offers."""

    TABLE = "table"
    JSON = "json"
    MARKDOWN = "markdown"
