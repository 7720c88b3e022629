"""RunPod's one `args` string: words joined as `shlex.join` joins them and split as `shlex.split`
splits them, but fast."""

from __future__ import annotations

import re
import shlex
import string
from collections.abc import Sequence
from functools import cache

_SAFE = (string.ascii_letters + string.digits + "_@%+=:,./-").encode()
"""`shlex.quote`'s safe characters (`[\\w@%+=:,./-]`, ASCII only), as bytes."""
_SAFE_OR_SPACE = _SAFE + b" "
"""Those, and the space that separates words."""
_QUOTING = re.compile(r"""['"\\]""")
"""A word without quotes or backslashes is its own text: most flags and values."""


class _Grammar:
    """A shell word in general, as patterns: what splits a text the fast paths do not.
    Compiled on first use (`_grammar`): the launches the recipes render split without it
    (plain words, or plain words and one word as `shlex.quote` quotes it), and compiling
    these patterns costs a preview's start-up more than the rest of this module."""

    __slots__ = ("escaped_in_double", "part", "space", "word", "words")

    def __init__(self) -> None:
        self.word = re.compile(r"""(?:[^\s'"\\]+|'[^']*'|"(?:[^"\\]|\\.)*"|\\.)+""", re.DOTALL)
        """One word: unquoted runs, quoted parts and escapes, side by side."""
        self.words = re.compile(
            r"""\s*+(?:(?>(?:[^\s'"\\]++|'[^']*+'|"(?:[^"\\]|\\.)*+"|\\.)++)\s*+)*+""",
            re.DOTALL,
        )
        """Text whose every word `word` takes whole (no quote left open), without
        backtracking."""
        self.part = re.compile(r"""'([^']*)'|"((?:[^"\\]|\\.)*)"|\\(.)|([^'"\\]+)""", re.DOTALL)
        """One part of a word: single-quoted, double-quoted, an escape, or plain."""
        self.space = re.compile(r"\s*")
        self.escaped_in_double = re.compile(r'\\([\\"])')


@cache
def _grammar() -> _Grammar:
    return _Grammar()


_QUOTE_INSIDE = "'\"'\"'"
"""A single quote inside a word `shlex.quote` quoted: the quotes closed, one quoted, reopened."""


def split_words(text: str) -> list[str]:
    """`shlex.split(text)` (how the recipes' `shlex.join` comes apart again), by a regular
    expression instead of shlex's character loop, which takes a millisecond over a launch
    script and runs for every placement planned."""
    if _unquoted_text(text):
        return text.split()  # splits at `\s` as the loop below does: no word is quoted
    quote = text.find("'")
    if quote == 0 or (quote > 0 and text[quote - 1].isspace()):
        # Plain words, then one word as `shlex.quote` quotes it (a `bash -c` launch script):
        # one scan of that word instead of two of the whole text.
        head = text[:quote]
        if _QUOTING.search(head) is None:
            last = _shlex_quoted(text[quote:])
            if last is not None:
                return [*head.split(), last]
    words = _piecewise(text)
    if words is not None:
        return words
    grammar = _grammar()
    if grammar.words.fullmatch(text) is not None:
        # Every quote is closed: the words are what one scan finds, and only those with a
        # quote or a backslash need their parts unquoted.
        return [
            _unquoted(word) if "'" in word or '"' in word or "\\" in word else word
            for word in grammar.word.findall(text)
        ]
    words, at = [], grammar.space.match(text).end()  # type: ignore[union-attr]
    while at < len(text):
        found = grammar.word.match(text, at)
        if found is None:
            raise ValueError(f"no closing quotation at character {at}")
        words.append(_unquoted(found.group()))
        at = grammar.space.match(text, found.end()).end()  # type: ignore[union-attr]
    return words


def _unquoted_text(text: str) -> bool:
    """No quote or backslash in `text` (what `_QUOTING` finds, told faster)."""
    return "'" not in text and '"' not in text and "\\" not in text


def _piecewise(text: str) -> list[str] | None:
    """The words when each piece of `text` between whitespace is a whole word by itself (an
    `exec "$home/bin/python" main.py ...` line): then no quote spans whitespace, and the
    shell splits where `str.split` does. None otherwise. Python's regular expressions are
    slow on a repeated group, so the few quoted pieces are the only ones they scan."""
    words = text.split()
    if "'" in text or "\\" in text:
        quoted = [i for i, piece in enumerate(words) if not _unquoted_text(piece)]
    else:  # double quotes only: one test a piece
        quoted = [i for i, piece in enumerate(words) if '"' in piece]
    for i in quoted:
        whole = _whole_word(words[i])
        if whole is None:
            return None
        words[i] = whole
    return words


def _whole_word(piece: str) -> str | None:
    """The text of `piece` if it is one word with every quote in it closed, else None."""
    end = len(piece) - 1
    quote = piece[0]
    if end > 0 and quote == piece[end] and quote in "'\"" and not _QUOTING.search(piece, 1, end):
        return piece[1:end]  # one quoted part with no quote or backslash inside
    return _unquoted(piece) if _grammar().word.fullmatch(piece) is not None else None


def _unquoted(word: str) -> str:
    """One word's text: `shlex.quote`'s own form (single quotes, each quote inside spelt
    '"'"') undone by one replace, any other by its parts."""
    text = _shlex_quoted(word)
    if text is not None:
        return text
    if _QUOTING.search(word) is None:
        return word
    return "".join(_unquote(part) for part in _grammar().part.finditer(word))


def _shlex_quoted(word: str) -> str | None:
    """The text of `word` if it is one word as `shlex.quote` quotes it (single-quoted, each
    single quote inside spelt '"'"'), else None. Told by two replaces, which run at memory
    speed, rather than a pattern over a launch script's every character: it is that form
    exactly when no single quote is left once each '"'"' is taken out."""
    if len(word) < 2 or word[0] != "'" or word[-1] != "'":
        return None
    inside = word[1:-1]
    if "'" not in inside:
        return inside
    if "'" in inside.replace(_QUOTE_INSIDE, ""):
        return None
    return inside.replace(_QUOTE_INSIDE, "'")


def _unquote(part: re.Match[str]) -> str:
    single, double, escaped, plain = part.groups()
    if single is not None:
        return single
    if double is not None:
        # shlex escapes only these in "..."; most double-quoted parts escape nothing.
        return _grammar().escaped_in_double.sub(r"\1", double) if "\\" in double else double
    return escaped if escaped is not None else plain


def join_words(words: Sequence[str]) -> str:
    """`shlex.join(words)`: when no word is empty or needs quoting (most launches), the plain
    join is its text, told by one scan of the joined string instead of one per word."""
    text = " ".join(words)
    if (
        all(words)
        and text.count(" ") == len(words) - 1  # no word holds a space
        and _only(text, _SAFE_OR_SPACE)
    ):
        return text
    return shlex.join(words)


def quote_word(word: str) -> str:
    """`shlex.quote(word)`, its safe characters told by a byte table, not its pattern."""
    if not word:
        return "''"
    if _only(word, _SAFE):
        return word
    return "'" + word.replace("'", _QUOTE_INSIDE) + "'"


def _only(text: str, allowed: bytes) -> bool:
    """Whether every character of `text` is one of the `allowed` ASCII bytes: nothing is left
    once they are deleted. A table lookup per byte, several times faster than a pattern's
    character class (`\\w` is tested per character, not from a table)."""
    return text.isascii() and not text.encode().translate(None, allowed)
