"""A config change's cost/fit difference (`frutebox diff`): a terminal table, Markdown for the
pull-request comment (sharing the table's cells), and plain data with stable camelCase keys."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from frutebox_infra.planner import HOURS_PER_MONTH
from frutebox_infra.report import Renderers
from frutebox_infra.report.data_fields import problem_data
from frutebox_infra.report.text import sequences_label, table, usd
from frutebox_infra.views.diff import (
    Amount,
    Change,
    DiffView,
    FleetDiff,
    ModelChange,
    ModelSnapshot,
)

DIFF_VERSION = 1
"""Changes when a key of `diff_data` does."""


# --- table -------------------------------------------------------------------------------

ARROW = "→"


def signed_usd(value: float) -> str:
    if value == 0:
        return "±$0.00"
    return ("+" if value > 0 else "-") + usd(abs(value))


def amount_cell(a: Amount, unit: str = "") -> str:
    """`$before → $after (±delta)` in USD per `unit`, or the one value when it did not move."""
    if a.delta == 0:
        return usd(a.after) + unit
    return f"{usd(a.before)}{unit} {ARROW} {usd(a.after)}{unit} ({signed_usd(a.delta)}{unit})"


def fit_text(s: ModelSnapshot) -> str:
    if s.gpu is None:
        return "no placement"
    if s.full_context_sequences is None:
        return "coarse"
    return sequences_label(s.full_context_sequences, s.configured_sequences or 0)


def image_text(s: ModelSnapshot) -> str:
    return s.image.rsplit("/", 1)[-1] if s.image else "-"


def _placement(s: ModelSnapshot) -> str:
    return s.placement or "-"


def _context(s: ModelSnapshot) -> str:
    return str(s.context_tokens) if s.context_tokens is not None else "-"


def _engine(s: ModelSnapshot) -> str:
    return s.engine or "-"


def _per_stream(s: ModelSnapshot) -> str:
    return "-" if s.decode_tok_s_per_stream is None else f"{s.decode_tok_s_per_stream:.1f}"


def _aggregate(s: ModelSnapshot) -> str:
    return "-" if s.decode_tok_s_aggregate is None else f"{s.decode_tok_s_aggregate:.0f}"


def _per_million(s: ModelSnapshot) -> str:
    usd_1m = s.usd_per_million_output_tokens
    return "-" if usd_1m is None else usd(usd_1m)


COLUMNS: tuple[tuple[str, Callable[[ModelSnapshot], str]], ...] = (
    ("ENGINE", _engine),
    ("GPU", _placement),
    ("FIT", fit_text),
    ("CONTEXT", _context),
    ("IMAGE", image_text),
    ("TOK/S", _per_stream),
    ("AGG", _aggregate),
    ("$/1M", _per_million),
)
"""Per-model columns shown as `before → after` when they differ."""


def side_cell(m: ModelChange, get: Callable[[ModelSnapshot], str]) -> str:
    if m.before is None or m.after is None:
        side = m.after or m.before
        assert side is not None
        return get(side)
    old, new = get(m.before), get(m.after)
    return new if old == new else f"{old} {ARROW} {new}"


def usd_cell(m: ModelChange, *, best: bool) -> str:
    a = m.usd_per_hour_best if best else m.usd_per_hour_worst
    if m.change in (Change.ADDED, Change.REMOVED):
        return signed_usd(a.delta)
    return amount_cell(a, "/h")


def model_cells(m: ModelChange) -> list[str]:
    """CHANGE, MODEL, the COLUMNS, $/H, $/H MAX — shared by the table and the Markdown."""
    cells = [str(m.change), m.model_id]
    cells += [side_cell(m, get) for _, get in COLUMNS]
    cells += [usd_cell(m, best=True), usd_cell(m, best=False)]
    return cells


HEADERS = ["CHANGE", "MODEL", *(name for name, _ in COLUMNS), "$/H", "$/H MAX"]
TABLE_WIDTH = 160
"""Changed cells read `before → after`: wide, but cut only when a terminal must."""


def verdict(d: FleetDiff) -> str:
    if not d.head_exists:
        return "stack removed"
    if d.ok:
        return "ok, within budget"
    return "over budget" if d.within_budget is False else f"{len(d.problems)} problem(s)"


def volume_line(d: FleetDiff) -> str:
    v = d.volume_size_gb
    size = f"{v.after:g} GB" if v.delta == 0 else f"{v.before:g} GB {ARROW} {v.after:g} GB"
    line = f"{size}, {amount_cell(d.volume_usd_per_month, '/month')}"
    if d.volume_shrink_ignored:
        line += f" (the plan asks for {d.volume_planned_gb} GB, but the volume never shrinks)"
    return line


def pods_text(d: FleetDiff) -> str:
    return (f"{amount_cell(d.usd_per_hour_best, '/h')} best,"
            f" {amount_cell(d.usd_per_hour_worst, '/h')} worst")  # fmt: skip


def fleet_text(d: FleetDiff) -> str:
    return (
        f"{amount_cell(d.usd_per_month_best, '/month')} best,"
        f" {amount_cell(d.usd_per_month_worst, '/month')} worst ({HOURS_PER_MONTH} h + volume"
        + (
            "; a model with an armed window: only its armed hours plus a bring-up per opening)"
            if d.windowed
            else ")"
        )
    )


def budget_text(d: FleetDiff) -> str:
    if not d.head_exists or d.budget_headroom_usd_per_hour is None:
        return "no stack after the change"
    head = d.budget_headroom_usd_per_hour
    state = (f"within, {usd(head)}/h headroom" if d.within_budget
             else f"OVER by {usd(-head)}/h")  # fmt: skip
    return f"{amount_cell(d.budget_usd_per_hour, '/h')}: {state}"


def bringup_text(d: FleetDiff) -> str | None:
    """What bringing up the change costs once, where it costs anything."""
    if not d.added_bringup_usd and not d.first_deploy_usd.delta:
        return None
    return (f"{usd(d.added_bringup_usd)} once for the models armed (seeding + GPU before"
            f" serving); a first deploy {amount_cell(d.first_deploy_usd)}")  # fmt: skip


def diff_table(view: DiffView) -> str:
    d, base, head = view.diff, view.base, view.head
    lines = [f"frutebox diff: stack {d.stack}, {base} {ARROW} {head}: {verdict(d)}", ""]
    if not d.base_exists:
        lines += [f"new stack: it does not exist at {base}", ""]
    rows = [model_cells(m) for m in d.changes]
    lines.append(table(HEADERS, rows, width=TABLE_WIDTH) if rows else "(no model changes)")
    if d.unchanged:
        lines += ["", "unchanged: " + ", ".join(d.unchanged)]
    lines += [
        "",
        f"pods    {pods_text(d)}",
        f"fleet   {fleet_text(d)}",
        f"volume  {volume_line(d)}",
        f"budget  {budget_text(d)}",
    ]
    if (bringup := bringup_text(d)) is not None:
        lines.append(f"bring-up {bringup}")
    if d.warnings:
        lines += ["", "warnings after:"] + [f"  - {w}" for w in d.warnings]
    if d.problems:
        lines += ["", "PROBLEMS after (preview fails, nothing is created):"]
        lines += [f"  - {p}" for p in d.problems]
    return "\n".join(lines)


# --- markdown ----------------------------------------------------------------------------


def _escape(cell: str) -> str:
    # A `|` inside a cell would split the Markdown table row.
    return cell.replace("|", "\\|")


def diff_markdown(view: DiffView) -> str:
    d, base, head = view.diff, view.base, view.head
    mark = "✅" if d.ok else "❌"
    lines = [
        f"### frutebox diff: `{d.stack}` — {mark} {verdict(d)}",
        "",
        f"`{base}` {ARROW} `{head}`" + ("" if d.base_exists else " (new stack)"),
        "",
    ]
    if d.changes:
        lines.append("| " + " | ".join(h.lower().replace("1m", "1M") for h in HEADERS) + " |")
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
    if (bringup := bringup_text(d)) is not None:
        lines.append(f"- **Bring-up:** {bringup}")
    if d.warnings:
        lines += ["", "<details><summary>Warnings</summary>", ""]
        lines += [f"- {w}" for w in d.warnings]
        lines += ["", "</details>"]
    if d.problems:
        lines += ["", "**Problems** (`pulumi preview` fails, nothing is created):", ""]
        lines += [f"- {p}" for p in d.problems]
    return "\n".join(lines) + "\n"


# --- data --------------------------------------------------------------------------------


SNAPSHOT_KEYS = {
    "engine": "engine",
    "image": "image",
    "gpu": "gpuType",
    "gpu_count": "gpuCount",
    "usd_per_hour_best": "usdPerHourBest",
    "usd_per_hour_worst": "usdPerHourWorst",
    "fallbacks": "fallbacks",
    "context_tokens": "contextTokens",
    "full_context_sequences": "fullContextSequences",
    "configured_sequences": "configuredSequences",
    "problems": "problems",
    "decode_tok_s_per_stream": "decodeTokensPerSecondPerStream",
    "decode_tok_s_aggregate": "decodeTokensPerSecondAggregate",
    "usd_per_million_output_tokens": "usdPerMillionOutputTokens",
}
"""Snapshot field -> JSON key; `changedFields` uses the same keys."""


def amount_data(a: Amount) -> dict[str, float]:
    return {"before": a.before, "after": a.after, "delta": a.delta}


def snapshot_data(s: ModelSnapshot | None) -> dict[str, Any] | None:
    if s is None:
        return None
    out = {key: getattr(s, name) for name, key in SNAPSHOT_KEYS.items()}
    out["problems"] = list(s.problems)
    return out


def model_change_data(m: ModelChange) -> dict[str, Any]:
    return {
        "id": m.model_id,
        "change": str(m.change),
        "changedFields": [SNAPSHOT_KEYS[f] for f in m.changed_fields],
        "before": snapshot_data(m.before),
        "after": snapshot_data(m.after),
        "usdPerHourBest": amount_data(m.usd_per_hour_best),
        "usdPerHourWorst": amount_data(m.usd_per_hour_worst),
    }


def diff_data(view: DiffView) -> dict[str, Any]:
    d, base, head = view.diff, view.base, view.head
    size = d.volume_size_gb
    return {
        "version": DIFF_VERSION,
        "stack": d.stack,
        "base": base,
        "head": head,
        "baseExists": d.base_exists,
        "headExists": d.head_exists,
        "ok": d.ok,
        "models": [model_change_data(m) for m in d.changes],
        "unchanged": list(d.unchanged),
        "cost": {
            "usdPerHourBest": amount_data(d.usd_per_hour_best),
            "usdPerHourWorst": amount_data(d.usd_per_hour_worst),
            "usdPerMonthBest": amount_data(d.usd_per_month_best),
            "usdPerMonthWorst": amount_data(d.usd_per_month_worst),
            "firstDeployUsd": amount_data(d.first_deploy_usd),
            "addedBringupUsd": d.added_bringup_usd,
        },
        "volume": {
            "sizeGb": {
                "before": int(size.before),
                "after": int(size.after),
                "delta": int(size.delta),
            },
            "usdPerMonth": amount_data(d.volume_usd_per_month),
            "shrinkIgnored": d.volume_shrink_ignored,
        },
        "budget": {
            "maxUsdPerHour": amount_data(d.budget_usd_per_hour),
            "withinBudget": d.within_budget,
            "headroomUsdPerHour": d.budget_headroom_usd_per_hour,
        },
        "problems": [problem_data(p) for p in d.problems],
        "warnings": list(d.warnings),
    }


DIFF = Renderers[DiffView](
    name="the diff",
    table=diff_table,
    data=diff_data,
    markdown=diff_markdown,
)
