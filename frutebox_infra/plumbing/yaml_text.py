"""Our YAML files (stacks, registry) as data: UTF-8 only, bounded, read as Pulumi reads them.

Pulumi reads a stack file with Go's yaml.v3: YAML 1.2 scalars (`yes` is text, `true` a
boolean), a UTF-8 byte-order mark stripped, a duplicated key an error. We read every file
the same way, and refuse outright what the two readers could take differently (explicit tags
such as `!!set`, anchors and aliases, numbers in hex, octal or with `_`), so a value means one
thing to `frutebox plan`, `frutebox diff` and the Pulumi program. Built from libyaml's event
stream without recursion, so no nesting depth ends in a RecursionError.
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml

from frutebox_infra.plumbing.errors import ConfigError

MAX_BYTES = 4_000_000
"""Larger than any stack or registry file needs to be (the registry is ~40 kB)."""
MAX_DEPTH = 64
"""Nesting deeper than any of our schemas; libyaml itself stops at 1,000."""
MAX_INT_DIGITS = 18
"""Every integer we read fits Pulumi's int64 (and a float) with room to spare."""

_UTF8_BOM = b"\xef\xbb\xbf"
_OTHER_BOMS = (
    (b"\x00\x00\xfe\xff", "UTF-32 (big-endian)"),
    (b"\xff\xfe\x00\x00", "UTF-32 (little-endian)"),
    (b"\xfe\xff", "UTF-16 (big-endian)"),
    (b"\xff\xfe", "UTF-16 (little-endian)"),
)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's parser where PyYAML was built with it; only its events are used."""

_NULL = frozenset({"", "~", "null", "Null", "NULL"})
_BOOL = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_OTHER_NUMBER = re.compile(
    r"[-+]?(?:0[xob][0-9a-fA-F_]+|0[0-9_]+|[0-9][0-9_]*_[0-9_]*(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?"
    r"|\.(?:inf|Inf|INF|nan|NaN|NAN))"
)
"""Numbers yaml.v3 reads one way and other YAML readers another (hex, octal, `1_000`, .inf)."""


def decode_utf8(data: bytes, where: str) -> str:
    """The text of a file that must be UTF-8; any other encoding is named with the fix."""
    if len(data) > MAX_BYTES:
        raise ConfigError(
            f"{where}: {len(data):,} bytes, more than the {MAX_BYTES:,} bytes any stack or"
            " registry file needs. Fix: check that this is the right file."
        )
    for bom, name in _OTHER_BOMS:
        if data.startswith(bom):
            raise ConfigError(
                f"{where}: the file is {name} (it starts with a byte-order mark), not UTF-8."
                " Fix: save it as UTF-8 (e.g. `iconv -f UTF-16 -t UTF-8`)."
            )
    data = data.removeprefix(_UTF8_BOM)  # Pulumi strips it too
    if b"\x00" in data:
        line = data.count(b"\n", 0, data.index(b"\x00")) + 1
        raise ConfigError(
            f"{where}: line {line}: a NUL byte, so the file is UTF-16 without a byte-order mark"
            " or not text at all, not UTF-8. Fix: save it as UTF-8."
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(
            f"{where}: line {line}, column {column}: byte 0x{data[exc.start]:02X} is not UTF-8"
            " (the file looks Latin-1 or Windows-1252 encoded). Fix: save it as UTF-8."
        ) from None


def load_yaml(text: str, where: str) -> Any:
    """One YAML document as plain dicts, lists, str, int, float, bool and None."""
    builder = _Builder(where)
    try:
        for event in yaml.parse(text, Loader=_LOADER):
            builder.feed(event)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" line {mark.line + 1}, column {mark.column + 1}:" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(
            f"{where}:{at} not valid YAML ({problem}). Fix the syntax there."
        ) from None
    return builder.result


class _Builder:
    """Builds values from parser events with an explicit stack (no recursion)."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.stack: list[tuple[list[Any] | dict[str, Any], list[Any]]] = []
        """Open collections, each with its pending mapping key ([] or [key])."""
        self.documents = 0
        self.result: Any = None

    def fail(self, event: yaml.Event, message: str, fix: str) -> ConfigError:
        mark = event.start_mark
        at = f" line {mark.line + 1}, column {mark.column + 1}:" if mark is not None else ""
        return ConfigError(f"{self.where}:{at} {message}. Fix: {fix}.")

    def feed(self, event: yaml.Event) -> None:
        if isinstance(event, yaml.DocumentStartEvent):
            self.documents += 1
            if self.documents > 1:
                raise self.fail(event, "a second YAML document (`---`)", "keep one document")
        elif isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise self.fail(
                event,
                "YAML anchors and aliases (&name, *name) are not supported",
                "write the value out in full",
            )
        elif isinstance(event, yaml.ScalarEvent):
            self.add(event, self.scalar(event))
        elif isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent):
            if event.tag is not None:
                raise self.fail(
                    event,
                    f"YAML tag {_short(event.tag)} is not supported (Pulumi reads it differently)",
                    "remove the tag and write a plain list or mapping",
                )
            if len(self.stack) >= MAX_DEPTH:
                raise self.fail(
                    event, f"nested more than {MAX_DEPTH} levels deep", "flatten the value"
                )
            value: list[Any] | dict[str, Any] = (
                [] if isinstance(event, yaml.SequenceStartEvent) else {}
            )
            self.add(event, value)
            self.stack.append((value, []))
        elif isinstance(event, yaml.SequenceEndEvent | yaml.MappingEndEvent):
            self.stack.pop()

    def add(self, event: yaml.Event, value: Any) -> None:
        if not self.stack:
            self.result = value
            return
        container, pending = self.stack[-1]
        if isinstance(container, list):
            container.append(value)
        elif not pending:
            if not isinstance(value, str):
                raise self.fail(
                    event, f"a mapping key must be text, not {value!r}", "quote the key"
                )
            if value in container:
                raise self.fail(event, f"key '{value}' appears twice", "keep one of them")
            if value == "<<" and getattr(event, "style", None) in (None, ""):
                raise self.fail(event, "YAML merge keys (<<) are not supported", "write it out")
            pending.append(value)
        else:
            container[pending.pop()] = value

    def scalar(self, event: yaml.ScalarEvent) -> Any:
        if event.tag is not None and event.tag != "!":
            raise self.fail(
                event,
                f"YAML tag {_short(event.tag)} is not supported (Pulumi reads it differently)",
                "remove the tag; quote text, leave numbers and true/false bare",
            )
        text: str = event.value
        if event.style not in (None, "") or not event.implicit[0]:
            return text  # quoted or block text is always a string
        if text in _NULL:
            return None
        if text in _BOOL:
            return _BOOL[text]
        if _INT.fullmatch(text):
            if len(text.lstrip("+-")) > MAX_INT_DIGITS:
                raise self.fail(event, f"the number {text} is too large", "use a realistic value")
            return int(text)
        if _OTHER_NUMBER.fullmatch(text):
            raise self.fail(
                event,
                f"'{text}' is a number only to some YAML readers (hex, octal, leading zeros,"
                " `_` separators and .inf/.nan differ between them)",
                "write a plain decimal number, or quote it if it is text",
            )
        if _FLOAT.fullmatch(text):
            number = float(text)
            if not math.isfinite(number):
                raise self.fail(event, f"the number {text} is too large", "use a realistic value")
            return number
        return text


def _short(tag: str) -> str:
    return tag.replace("tag:yaml.org,2002:", "!!")
