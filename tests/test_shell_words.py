"""Args joined and split as shlex joins and splits them: on any words and text, and on every
launch the catalog produces."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from frutebox_infra.planner.resolver import resolve
from frutebox_infra.recipes.base import ServeOptions
from frutebox_infra.shell_words import join_words, quote_word, split_words
from tests.factories import real_registry


@given(st.text(alphabet=" \t\n'\"\\ab$=-", max_size=40))
def test_args_split_exactly_as_shlex_splits_them(text: str) -> None:
    try:
        expected: list[str] | None = shlex.split(text)
    except ValueError:
        expected = None
    if expected is None:
        with pytest.raises(ValueError):
            split_words(text)
    else:
        assert split_words(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("--tp 2\t--model  org/m\n", id="unquoted-split-at-whitespace"),
        pytest.param("--c '{\"a\": 1}' --x", id="quoted-word-kept-whole"),
        pytest.param("bash -c 'a '\"'\"'b'\"'\"''", id="plain-words-then-one-quoted"),
        pytest.param("bash -c 'a' ", id="one-quoted-then-space"),
        pytest.param("bash -c'a'", id="a-quote-inside-a-word"),
        pytest.param("a\\ b 'c'", id="a-backslash-before-the-quoted-word"),
        pytest.param("'a'", id="only-the-quoted-word"),
    ],
)
def test_split_words_on_both_sides_of_the_unquoted_path(text: str) -> None:
    assert split_words(text) == shlex.split(text)


def test_every_catalog_launch_splits_as_shlex_splits_it() -> None:
    reg = real_registry()
    launches = [
        p.pod.args
        for m in reg.models
        for p in resolve(reg, m.id, ServeOptions(hf_token_configured=True)).placements
    ]
    assert len(launches) > 50
    assert all(split_words(args) == shlex.split(args) for args in launches)


@given(st.lists(st.text(alphabet=" \t'\"\\ab$=-./@%+:,_é", max_size=8), max_size=6))
def test_words_join_exactly_as_shlex_joins_them(words: list[str]) -> None:
    assert join_words(words) == shlex.join(words)


@given(st.text(alphabet=" \t'\"\\aZ09$=-./@%+:,_~é\n", max_size=12))
def test_a_word_is_quoted_exactly_as_shlex_quotes_it(word: str) -> None:
    assert quote_word(word) == shlex.quote(word)


@pytest.mark.parametrize(
    "words",
    [
        pytest.param(["--tp", "2", "--model", "org/m-1.5"], id="plain-words-joined-plainly"),
        pytest.param(["--x", ""], id="empty-word-quoted"),
        pytest.param(["--x", "a b"], id="word-with-a-space-quoted"),
        pytest.param(["--c", '{"a":1}'], id="json-quoted"),
        pytest.param(["--name", "café"], id="non-ascii-quoted"),
        pytest.param([], id="no-words"),
    ],
)
def test_join_words_on_both_sides_of_the_plain_path(words: list[str]) -> None:
    assert join_words(words) == shlex.join(words)
    assert split_words(join_words(words)) == words


@given(st.lists(st.text(alphabet=" \t\n'\"\\ab$=-", max_size=12), max_size=6))
def test_what_shlex_joins_splits_back_into_its_words(words: list[str]) -> None:
    assert split_words(shlex.join(words)) == words
