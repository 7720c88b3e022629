"""Fixed-width tables, dollar amounts, sequence counts and wrapped bullets: each bound on both
sides."""

from __future__ import annotations

import textwrap

import pytest

from frutebox_infra.report.text import bullets, sequences_label, table, usd


@pytest.mark.parametrize(
    ("cell_width", "truncated"),
    [
        pytest.param(100 - 2 - 6, False, id="exactly-100"),
        pytest.param(100 - 2 - 5, True, id="101-truncated"),
    ],
)
def test_table_width_bound_both_sides(cell_width: int, truncated: bool) -> None:
    cell = "x" * cell_width
    rendered = table(["HEAD", "SECOND"], [[cell, "yyyyyy"]])
    row = rendered.splitlines()[2]
    assert len(row) <= 100
    assert ("…" in row) is truncated


def test_columns_take_the_width_of_their_widest_cell() -> None:
    rendered = table(["A", "B"], [["xxx", "y"], ["x", "yyyy"]]).splitlines()
    assert rendered == ["A    B", "---  ----", "xxx  y", "x    yyyy"]


@pytest.mark.parametrize(
    ("value", "text"),
    [pytest.param(0.17, "$0.17", id="cents"), pytest.param(14895.95, "$14,895.95", id="grouped")],
)
def test_usd(value: float, text: str) -> None:
    assert usd(value) == text


@pytest.mark.parametrize(
    ("held", "text"),
    [
        pytest.param(3.99, "3.9/16 seq", id="floored-never-rounded-up"),
        pytest.param(16.0, "16/16 seq", id="whole"),
        pytest.param(0.09, "0/16 seq", id="under-a-tenth"),
    ],
)
def test_sequences_held_never_claim_one_the_memory_lacks(held: float, text: str) -> None:
    assert sequences_label(held, 16) == text


@pytest.mark.parametrize(
    ("width", "lines"),
    [
        pytest.param(len("  - alpha beta"), 1, id="fits-exactly"),
        pytest.param(len("  - alpha beta") - 1, 2, id="one-short-wraps"),
    ],
)
def test_bullets_wrap_at_the_width(width: int, lines: int) -> None:
    assert len(bullets(["alpha beta"], width=width)) == lines


def test_bullets_never_split_an_id_or_a_flag() -> None:
    item = "run frutebox-prod-qwen3-8b --terminate-untracked now"
    wrapped = bullets([item], width=20)
    assert "frutebox-prod-qwen3-8b" in "\n".join(wrapped)
    assert "--terminate-untracked" in "\n".join(wrapped)
    assert wrapped[0].startswith("  - ") and all(w.startswith("    ") for w in wrapped[1:])


@pytest.mark.parametrize(
    "item",
    [
        pytest.param("short and plain", id="plain"),
        pytest.param("x" * 96, id="exactly-the-width"),
        pytest.param("x" * 97, id="one-over-the-width"),
        pytest.param("tab\there", id="a-tab"),
        pytest.param("two  spaces", id="two-spaces"),
        pytest.param(" leading space", id="leading-space"),
    ],
)
def test_a_bullet_is_what_textwrap_makes_of_it(item: str) -> None:
    expected = textwrap.wrap(item, width=100, initial_indent="  - ", subsequent_indent="    ",
                             break_on_hyphens=False, break_long_words=False)  # fmt: skip
    assert bullets([item]) == expected
