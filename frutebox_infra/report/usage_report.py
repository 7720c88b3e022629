"""`frutebox usage`: billed hours and dollars, output served, measured $/1M beside the plan's
estimate and idle hours, as a table, Markdown, and data with stable camelCase keys."""

from __future__ import annotations

from typing import Any

from frutebox_infra.report import Renderers
from frutebox_infra.report.text import markdown_rows, table, usd
from frutebox_infra.views.usage import Advice, ModelUsage, UsageView

USAGE_VERSION = 1
"""Changes when a key of `usage_data` changes or goes; a key added beside them keeps it."""
USAGE_HEADERS = (
    "MODEL",
    "ENGINE",
    "HOURS",
    "BILLED",
    "OUTPUT",
    "$/1M",
    "$/1M PLAN",
    "TOK/S",
    "TOK/S PLAN",
    "IDLE H",
    "IDLE $",
)


def _count(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:.2f}M"
    if value >= 1e4:
        return f"{value / 1e3:.1f}k"
    return f"{value:.0f}"


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:,.2f}"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _output(m: ModelUsage) -> str:
    if m.unmeasured is not None:
        return "?"
    at_least = ">=" if m.lower_bound else ""  # counts lost or answers without one
    if m.prompts is not None:
        return f"{at_least}{_count(m.prompts)} prompts"
    return at_least + _count(m.output_tokens or 0.0)


def _measured_cost(m: ModelUsage) -> str:
    if m.unmeasured is not None:
        return "?"
    cost = _money(m.usd_per_million_measured)
    return f"<={cost}" if m.lower_bound and m.usd_per_million_measured is not None else cost


def usage_row(m: ModelUsage) -> list[str]:
    return [
        m.model_id,
        m.engine,
        str(m.hours_billed),
        usd(m.usd_billed),
        _output(m),
        _measured_cost(m),
        _money(m.usd_per_million_estimate),
        _rate(m.decode_tok_s_measured),
        _rate(m.decode_tok_s_estimate),
        str(m.idle_hours) if m.idle_hours is not None else "?",
        usd(m.idle_usd) if m.idle_usd is not None else "?",
    ]


def _period(view: UsageView) -> str:
    return (
        f"{view.hours // 24} days"
        if view.hours % 24 == 0 and view.hours > 24
        else f"{view.hours} h"
    )


def _stack_line(view: UsageView) -> str:
    return (
        f"stack {view.stack}, last {_period(view)} ({view.start:%Y-%m-%d %H:%M} to"
        f" {view.end:%Y-%m-%d %H:%M} UTC): {view.hours_billed} pod-hours, {usd(view.usd_billed)}"
        f" billed, {_count(view.output_tokens)} output tokens, {view.idle_hours} idle hours"
        f" ({usd(view.idle_usd)})"
    )


def _restarts(m: ModelUsage) -> str:
    n = m.restarts_seen
    return f"{n} restart{'s' if n != 1 else ''} or replacement{'s' if n != 1 else ''}"


def _counting_notes(m: ModelUsage) -> list[str]:
    """What restarts did to the count: lost (a lower bound, and why) or kept; and answers that
    carried no count."""
    if m.unmeasured is not None:
        return []
    return _restart_notes(m) + _uncounted_notes(m)


def _uncounted_notes(m: ModelUsage) -> list[str]:
    if not m.answers_uncounted:
        return []
    n = m.answers_uncounted
    return [
        f"{m.model_id}: a lower bound: {n} answer{'s' if n != 1 else ''} carried no count of"
        f" {'their' if n != 1 else 'its'} output (OpenAI-style streams whose client did not ask"
        " for stream_options.include_usage); its $/1M is an upper bound"
    ]


def _restart_notes(m: ModelUsage) -> list[str]:
    if m.counts_lost:
        what = "prompts" if m.prompts is not None else "output tokens"
        lost = (
            f"1 restart lost whatever {what} were served since the sample before it"
            if m.counts_lost == 1
            else f"{m.counts_lost} restarts each lost whatever {what} were served since the"
            " sample before"
        )
        return [f"{m.model_id}: a lower bound: {lost} ({m.lost_why}); its $/1M is an upper bound"]
    if m.restarts_seen and m.counts_kept:
        return [
            f"{m.model_id}: {_restarts(m)} seen, nothing lost: its counters are kept on the volume"
        ]
    return []


def _notes(view: UsageView) -> list[str]:
    notes = [f"{m.model_id}: not measured: {m.unmeasured}" for m in view.models if m.unmeasured]
    notes += [n for m in view.models for n in _counting_notes(m)]
    notes += [
        f"{m.model_id}: measured {m.decode_tok_s_measured:.1f} tok/s per stream against the"
        f" estimate's {m.decode_tok_s_estimate:.1f}, beyond its"
        f" ±{(m.decode_error or 0) * 100:.0f}%: `frutebox usage --learn` writes the"
        " measurement into registry/speed.yaml, and later plans decode at it"
        for m in view.models
        if m.speed_off and m.decode_tok_s_measured and m.decode_tok_s_estimate
    ]
    if view.foreign_usd:
        notes.append(
            f"{usd(view.foreign_usd)} billed to pods of the account that are not this stack's"
        )
    return notes


def advice_line(a: Advice) -> str:
    if a.window is None:
        return (
            f"{a.model_id}: served nothing and billed {usd(a.saved_usd)}: disarm it (remove it"
            " from frutebox-infra:models; its weights stay on the volume)"
        )
    return (
        f"{a.model_id}: {usd(a.idle_usd)} idle; armed only `{a.window}` it would have saved"
        f" {usd(a.saved_usd)} ({a.openings} re-arms at {usd(a.rearm_usd)} each already taken"
        f" off): set overrides.{a.model_id}.armedWindow"
    )


MEANING = (
    "$/1M: billed dollars over output tokens counted; $/1M PLAN: the plan's full-load estimate."
    " Idle: billed hours in which the engine served nothing."
)


def usage_table(view: UsageView) -> str:
    rows = [usage_row(m) for m in view.models]
    lines = [table(USAGE_HEADERS, rows, width=140), "", _stack_line(view), MEANING]
    notes = _notes(view)
    if notes:
        lines += ["", "notes:"] + [f"  - {n}" for n in notes]
    if view.advice:
        lines += ["", "advice (usage never changes a stack by itself):"]
        lines += [f"  - {advice_line(a)}" for a in view.advice]
    return "\n".join(lines)


def usage_markdown(view: UsageView) -> str:
    lines = [f"### frutebox usage: `{view.stack}`", ""]
    lines += markdown_rows(USAGE_HEADERS, [usage_row(m) for m in view.models])
    lines += ["", f"- {_stack_line(view)}", f"- {MEANING}"]
    lines += [f"- {n}" for n in _notes(view)]
    if view.advice:
        lines += ["", "**Advice** (usage never changes a stack by itself):", ""]
        lines += [f"- {advice_line(a)}" for a in view.advice]
    return "\n".join(lines) + "\n"


def _model_data(m: ModelUsage) -> dict[str, Any]:
    return {
        "model": m.model_id,
        "engine": m.engine,
        "podIds": list(m.pod_ids),
        "hoursBilled": m.hours_billed,
        "usdBilled": m.usd_billed,
        "outputTokens": m.output_tokens,
        "prompts": m.prompts,
        "usdPerMillionMeasured": m.usd_per_million_measured,
        "usdPerMillionEstimate": m.usd_per_million_estimate,
        "decodeTokSMeasured": m.decode_tok_s_measured,
        "decodeTokSEstimate": m.decode_tok_s_estimate,
        "speedOffEstimate": m.speed_off,
        "idleHours": m.idle_hours,
        "idleUsd": m.idle_usd,
        "unmeasured": m.unmeasured,
        "restartsSeen": m.restarts_seen,
        "countsLostAtRestarts": m.counts_lost,
        "outputIsLowerBound": m.lower_bound,
        "answersWithoutCount": m.answers_uncounted,
        "countersKeptOnVolume": m.counts_kept,
        "countsLostWhy": m.lost_why,
    }


def usage_data(view: UsageView) -> dict[str, Any]:
    return {
        "version": USAGE_VERSION,
        "stack": view.stack,
        "hours": view.hours,
        "start": view.start.isoformat(),
        "end": view.end.isoformat(),
        "models": [_model_data(m) for m in view.models],
        "total": {
            "hoursBilled": view.hours_billed,
            "usdBilled": view.usd_billed,
            "outputTokens": view.output_tokens,
            "idleHours": view.idle_hours,
            "idleUsd": view.idle_usd,
        },
        "foreignUsd": view.foreign_usd,
        "notes": _notes(view),
        "advice": [
            {
                "model": a.model_id,
                "window": a.window,
                "idleUsd": a.idle_usd,
                "savedUsd": a.saved_usd,
                "openings": a.openings,
                "rearmUsd": a.rearm_usd,
            }
            for a in view.advice
        ],
    }


USAGE = Renderers[UsageView](
    name="the usage",
    table=usage_table,
    data=usage_data,
    markdown=usage_markdown,
)
