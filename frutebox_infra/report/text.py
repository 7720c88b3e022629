"""Fixed-width text tables that stay readable at 100 columns."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, width: int = 100) -> str:
    """Left-aligned columns; the widest column is truncated with an ellipsis to fit `width`."""
    cols = len(headers)
    widths = [max([len(headers[i])] + [len(r[i]) for r in rows]) for i in range(cols)]
    overflow = sum(widths) + 2 * (cols - 1) - width
    while overflow > 0:
        widest = max(range(cols), key=lambda i: widths[i])
        if widths[widest] <= 8:
            break
        cut = min(overflow, widths[widest] - 8)
        widths[widest] -= cut
        overflow -= cut
    lines = [_line(headers, widths), _line(["-" * w for w in widths], widths)]
    lines += [_line(r, widths) for r in rows]
    return "\n".join(lines)


def markdown_rows(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table's lines, each row's first cell (the model) set as code."""
    lines = ["| " + " | ".join(h.lower() for h in headers) + " |", "|" + "---|" * len(headers)]
    for first, *rest in rows:
        lines.append("| " + " | ".join([f"`{first}`", *rest]) + " |")
    return lines


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    out = []
    for cell, w in zip(cells, widths, strict=True):
        text = cell if len(cell) <= w else cell[: w - 1] + "…"
        out.append(text.ljust(w))
    return "  ".join(out).rstrip()


def usd(value: float) -> str:
    return f"${value:,.2f}"


def sequences_label(held: float, configured: int) -> str:
    """`held/configured seq`, held floored to one decimal: never claims a sequence it lacks."""
    return f"{math.floor(held * 10) / 10:g}/{configured} seq"


def bullets(items: Sequence[str], *, width: int = 100) -> list[str]:
    """Each item as a `  - ` bullet wrapped at `width`; ids and flags are never split."""
    lines: list[str] = []
    for item in items:
        if len(item) + 4 <= width and item == item.strip() and item.isprintable():
            lines.append("  - " + item)  # what textwrap makes of it, without its cost
            continue
        lines += textwrap.wrap(
            item,
            width=width,
            initial_indent="  - ",
            subsequent_indent="    ",
            break_on_hyphens=False,
            break_long_words=False,
        )
    return lines
