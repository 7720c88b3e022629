"""YAML read as Pulumi's yaml.v3 reads it, and refused where YAML readers disagree."""

from __future__ import annotations

from typing import Any

import pytest

from frutebox_infra.plumbing.errors import ConfigError
from frutebox_infra.plumbing.yaml_text import MAX_BYTES, MAX_DEPTH, decode_utf8, load_yaml


@pytest.mark.parametrize(
    ("text", "value"),
    [
        pytest.param("true", True, id="true"),
        pytest.param("False", False, id="False"),
        pytest.param("yes", "yes", id="yes-is-text"),
        pytest.param("on", "on", id="on-is-text"),
        pytest.param("~", None, id="tilde"),
        pytest.param("", None, id="empty"),
        pytest.param("42", 42, id="int"),
        pytest.param("+7", 7, id="signed-int"),
        pytest.param("1e3", 1000.0, id="exponent-is-a-float"),
        pytest.param("0.5", 0.5, id="float"),
        pytest.param("2001-12-14", "2001-12-14", id="date-is-text"),
        pytest.param("1:30", "1:30", id="sexagesimal-is-text"),
        pytest.param('"42"', "42", id="quoted-is-text"),
        pytest.param("'true'", "true", id="single-quoted-is-text"),
    ],
)
def test_scalars_resolve_as_yaml_1_2(text: str, value: Any) -> None:
    assert load_yaml(f"k: {text}\n", "f") == {"k": value}


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("0x1F", id="hex"),
        pytest.param("0o17", id="octal"),
        pytest.param("017", id="leading-zero"),
        pytest.param("1_000", id="underscores"),
        pytest.param(".inf", id="infinity"),
        pytest.param(".nan", id="nan"),
        pytest.param("1e400", id="overflows"),
        pytest.param("1234567890123456789", id="beyond-int64-digits"),
        pytest.param("!!set {a}", id="set"),
        pytest.param("!!str 5", id="str-tag"),
        pytest.param("&a 1", id="anchor"),
    ],
)
def test_what_readers_disagree_on_is_refused_with_line_and_fix(text: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_yaml(f"a: 1\nk: {text}\n", "f")
    assert str(err.value).startswith("f: line 2") and "Fix:" in str(err.value)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("a: 1\na: 2\n", id="duplicate-key"),
        pytest.param("a: 1\n---\nb: 2\n", id="two-documents"),
        pytest.param("<<: {a: 1}\n", id="merge-key"),
        pytest.param("? [a]\n: 1\n", id="list-key"),
        pytest.param("1: a\n", id="number-key"),
    ],
)
def test_structures_pulumi_reads_differently_are_refused(text: str) -> None:
    with pytest.raises(ConfigError):
        load_yaml(text, "f")


@pytest.mark.parametrize(
    ("depth", "ok"), [(MAX_DEPTH, True), (MAX_DEPTH + 1, False), (5000, False)]
)
def test_nesting_is_bounded_without_recursion(depth: int, ok: bool) -> None:
    text = "[" * depth + "]" * depth
    if ok:
        load_yaml(text, "f")
    else:
        with pytest.raises(ConfigError) as err:
            load_yaml(text, "f")
        assert "Fix" in str(err.value)


def test_size_is_bounded() -> None:
    assert decode_utf8(b"a" * MAX_BYTES, "f")
    with pytest.raises(ConfigError) as err:
        decode_utf8(b"a" * (MAX_BYTES + 1), "f")
    assert "bytes" in str(err.value)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        pytest.param(b"a: caf\xe9\n", "line 1, column 7: byte 0xE9", id="latin-1"),
        pytest.param("a: 1".encode("utf-16-le"), "NUL byte", id="utf-16-without-bom"),
        pytest.param("a: 1".encode("utf-16"), "UTF-16", id="utf-16-with-bom"),
        pytest.param("a: 1".encode("utf-32"), "UTF-32", id="utf-32"),
    ],
)
def test_other_encodings_are_named(data: bytes, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_yaml(decode_utf8(data, "f"), "f")
    assert words in str(err.value) and "Fix: save it as UTF-8" in str(err.value)
