"""What the deploy step writes stays readable by upstream's provider (64 KiB line limit)."""

from __future__ import annotations

from frutebox_infra.runpod.command_io import MAX_LOG_LINE, cap_lines


def test_long_lines_are_cut_and_short_ones_kept() -> None:
    text = "short\n" + "x" * (MAX_LOG_LINE + 5) + "\nlast"
    lines = cap_lines(text).split("\n")
    assert lines[0] == "short" and lines[2] == "last"
    assert lines[1] == "x" * MAX_LOG_LINE + "… (5 more characters cut)"
    assert max(len(line.encode()) for line in lines) < 64 * 1024


def test_text_within_the_limit_is_unchanged() -> None:
    text = "a\n" + "y" * MAX_LOG_LINE + "\n"
    assert cap_lines(text) == text
