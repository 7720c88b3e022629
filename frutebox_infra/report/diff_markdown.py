"""A config change's cost/fit difference as Markdown, for the pull-request comment."""

from __future__ import annotations

from frutebox_infra.diff import FleetDiff
from frutebox_infra.report.diff_table import (
    ARROW,
    HEADERS,
    budget_text,
    fleet_text,
    model_cells,
    pods_text,
    verdict,
    volume_line,
)


def _escape(cell: str) -> str:
    # A `|` inside a cell would split the Markdown table row.
    return cell.replace("|", "\\|")


def diff_markdown(d: FleetDiff, *, base: str, head: str) -> str:
    mark = "✅" if d.ok else "❌"
    lines = [
        f"### frutebox diff: `{d.stack}` — {mark} {verdict(d)}",
        "",
        f"`{base}` {ARROW} `{head}`" + ("" if d.base_exists else " (new stack)"),
        "",
    ]
    if d.changes:
        lines.append("| " + " | ".join(h.lower() for h in HEADERS) + " |")
        lines.append("|" + "---|" * (len(HEADERS) - 2) + "---:|---:|")
        for m in d.changes:
            cells = model_cells(m)
            cells[1] = f"`{cells[1]}`"
            lines.append("| " + " | ".join(_escape(c) for c in cells) + " |")
    else:
        lines.append("No model changes.")
    if d.unchanged:
        lines += ["", "Unchanged: " + ", ".join(f"`{m}`" for m in d.unchanged)]
    lines += [
        "",
        f"- **Pods:** {pods_text(d)}",
        f"- **Fleet:** {fleet_text(d)}",
        f"- **Volume:** {volume_line(d)}",
        f"- **Budget:** {budget_text(d)}",
    ]
    if d.warnings:
        lines += ["", "<details><summary>Warnings</summary>", ""]
        lines += [f"- {w}" for w in d.warnings]
        lines += ["", "</details>"]
    if d.problems:
        lines += ["", "**Problems** (`pulumi preview` fails, nothing is created):", ""]
        lines += [f"- {p}" for p in d.problems]
    return "\n".join(lines) + "\n"
