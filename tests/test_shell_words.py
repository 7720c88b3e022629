"""Args split as shlex splits them: on any text, and on every launch the catalog produces."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from frutebox_infra.recipes.base import ServeOptions
from frutebox_infra.resolver import resolve
from frutebox_infra.shell_words import split_words
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


def test_every_catalog_launch_splits_as_shlex_splits_it() -> None:
    reg = real_registry()
    launches = [
        p.pod.args
        for m in reg.models
        for p in resolve(reg, m.id, ServeOptions(hf_token_configured=True)).placements
    ]
    assert len(launches) > 50
    assert all(split_words(args) == shlex.split(args) for args in launches)
