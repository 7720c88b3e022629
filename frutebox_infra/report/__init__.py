"""Renderings of a plan or the catalog: one module per format, each returning a string."""

from enum import StrEnum


class Format(StrEnum):
    """The output formats every view offers."""

    TABLE = "table"
    JSON = "json"
    MARKDOWN = "markdown"
