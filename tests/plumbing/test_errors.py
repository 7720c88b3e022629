"""The errors we explain: which exit code each means, and how a value is quoted in one."""

from __future__ import annotations

import pytest

from frutebox_infra.plumbing.errors import (
    EXIT_DRIFT,
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_USAGE,
    ConfigError,
    FruteboxError,
    UsageError,
    exit_code,
    printable,
    shown,
)


def test_exit_codes_are_distinct_and_documented_values() -> None:
    assert (EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, EXIT_DRIFT) == (0, 1, 2, 3)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        pytest.param(UsageError("no stack"), EXIT_USAGE, id="usage"),
        pytest.param(ConfigError("bad file"), EXIT_PROBLEMS, id="config"),
        pytest.param(FruteboxError("other"), EXIT_PROBLEMS, id="base"),
    ],
)
def test_a_usage_error_exits_2_and_every_other_explained_error_1(
    error: FruteboxError, code: int
) -> None:
    assert exit_code(error) == code


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param(True, "true", id="yaml-true"),
        pytest.param(False, "false", id="yaml-false"),
        pytest.param(None, "null", id="null"),
        pytest.param("yes", "'yes'", id="text-quoted"),
        pytest.param(40, "40", id="number-bare"),
        pytest.param("x" * 40, "'" + "x" * 36 + "...", id="cut-at-40"),
        pytest.param("x" * 38, "'" + "x" * 38 + "'", id="fits-at-40"),
    ],
)
def test_a_value_is_quoted_as_yaml_spells_it_and_cut_to_a_line(value: object, text: str) -> None:
    assert shown(value) == text


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        pytest.param("qwen3-8b", "qwen3-8b", id="plain"),
        pytest.param("\r", "\\r", id="carriage-return"),
        pytest.param("a\nb", "a\\nb", id="newline"),
        pytest.param("caf\u00e9", "caf\u00e9", id="printable-unicode-kept"),
    ],
)
def test_a_name_is_quoted_on_one_line(text: str, quoted: str) -> None:
    assert printable(text) == quoted
