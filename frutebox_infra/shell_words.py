"""RunPod's one `args` string: words joined as `shlex.join` joins them and split as `shlex.split`
splits them, but fast."""

from __future__ import annotations

import re
import shlex

_WORD = re.compile(r"""(?:[^\s'"\\]+|'[^']*'|"(?:[^"\\]|\\.)*"|\\.)+""", re.DOTALL)
_PART = re.compile(r"""'([^']*)'|"((?:[^"\\]|\\.)*)"|\\(.)|([^'"\\]+)""", re.DOTALL)
_SPACE = re.compile(r"\s*")
_SAFE_OR_SPACE = re.compile(r"[\w@%+=:,./ -]*", re.ASCII)
"""`shlex.quote`'s safe characters, and the space that separates words."""
_QUOTING = re.compile(r"""['"\\]""")
"""A word without quotes or backslashes is its own text: most flags and values."""
_ESCAPED_IN_DOUBLE = re.compile(r'\\([\\"])')


def split_words(text: str) -> list[str]:
    """`shlex.split(text)` (how the recipes' `shlex.join` comes apart again), by a regular
    expression instead of shlex's character loop, which takes a millisecond over a launch
    script and runs for every placement planned."""
    if _QUOTING.search(text) is None:
        return text.split()  # splits at `\s` as the loop below does: no word is quoted
    words, at = [], _SPACE.match(text).end()  # type: ignore[union-attr]
    while at < len(text):
        found = _WORD.match(text, at)
        if found is None:
            raise ValueError(f"no closing quotation at character {at}")
        word = found.group()
        if _QUOTING.search(word) is not None:
            word = "".join(_unquote(part) for part in _PART.finditer(word))
        words.append(word)
        at = _SPACE.match(text, found.end()).end()  # type: ignore[union-attr]
    return words


def _unquote(part: re.Match[str]) -> str:
    single, double, escaped, plain = part.groups()
    if single is not None:
        return single
    if double is not None:
        # shlex escapes only these in "..."; most double-quoted parts escape nothing.
        return _ESCAPED_IN_DOUBLE.sub(r"\1", double) if "\\" in double else double
    return escaped if escaped is not None else plain


def join_words(words: tuple[str, ...] | list[str]) -> str:
    """`shlex.join(words)`: when no word is empty or needs quoting (most launches), the plain
    join is its text, told by one scan of the joined string instead of one per word."""
    text = " ".join(words)
    if (
        all(words)
        and text.count(" ") == len(words) - 1  # no word holds a space
        and _SAFE_OR_SPACE.fullmatch(text) is not None
    ):
        return text
    return shlex.join(words)
