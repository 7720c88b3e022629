"""The usage report: each model's billed time and output beside the plan's estimate, idle hours,
why a model is not measured, and JSON with stable keys."""

from __future__ import annotations

from frutebox_infra.report.usage_report import usage_data, usage_markdown, usage_table
from tests.views.test_usage import ollama_samples, view


def test_the_table_shows_measured_cost_beside_the_estimate_and_the_reasons() -> None:
    text = usage_table(view())
    assert "$/1M PLAN" in text and "IDLE $" in text
    assert "$10,909.09" in text  # $6 over 550 tokens, per 1M
    assert "qwen3-8b: not measured: no counter sample of its pods yet" in text
    unmeasured = usage_table(view(measure=False))
    assert "qwen3-8b: not measured: Ollama keeps no counters" in unmeasured
    assert "$5.00 billed to pods of the account that are not this stack's" in text
    assert "4 h" in text and "1 idle hours ($1.50)" in text


def test_json_has_a_version_and_the_stack_totals() -> None:
    data = usage_data(view())
    assert data["version"] == 1
    assert data["total"] == {"hoursBilled": 6, "usdBilled": 6.5, "outputTokens": 550,
                             "idleHours": 1, "idleUsd": 1.5}  # fmt: skip
    pix = next(m for m in data["models"] if m["model"] == "pixtral")
    assert pix["outputTokens"] == 550 and pix["unmeasured"] is None
    ollama = next(m for m in data["models"] if m["model"] == "qwen3-8b")
    assert ollama["outputTokens"] is None and ollama["idleHours"] is None


def test_markdown_is_a_table_with_the_notes() -> None:
    text = usage_markdown(view())
    assert text.startswith("### frutebox usage: `s`")
    # A restart lost what pixtral served since the sample before it: a lower bound.
    assert "| `pixtral` | vllm | 4 | $6.00 | >=550 | <=$10,909.09 |" in text
    assert (
        "pixtral: a lower bound: 1 restart lost whatever output tokens were served since the sample"
        " before it (vLLM counted in its process's memory" in text
    )


def test_json_says_when_the_output_is_a_lower_bound_and_when_counters_were_kept() -> None:
    from tests.views.test_usage import at, compute_usage, hours, kept, plan

    pix = next(m for m in usage_data(view())["models"] if m["model"] == "pixtral")
    assert pix["outputIsLowerBound"] and pix["countsLostAtRestarts"] == 1
    assert pix["restartsSeen"] == 1 and not pix["countersKeptOnVolume"]
    samples = [kept("q", 1, 10, "s1"), kept("q", 2, 30, "s2")]
    v = compute_usage(plan=plan(), hours=4, end=at(4), billed=hours("q", 2, 1.0),
                      samples=samples, owners={"q": "qwen-3.6-27b"})  # fmt: skip
    q = next(m for m in usage_data(v)["models"] if m["model"] == "qwen-3.6-27b")
    assert q["outputTokens"] == 30 and not q["outputIsLowerBound"]
    assert q["countersKeptOnVolume"] and q["restartsSeen"] == 1
    assert "qwen-3.6-27b: 1 restart or replacement seen, nothing lost" in usage_table(v)


def test_advice_is_rendered_with_the_window_to_set_and_the_saving() -> None:
    from tests.views.test_usage import at, compute_usage, hours, plan, tok

    samples = [tok("a", "pixtral", h, 100.0 * min(h, 2), "s") for h in range(1, 25)]
    v = compute_usage(plan=plan(), hours=24, end=at(24), billed=hours("a", 24, 1.5),
                      samples=samples, owners={"a": "pixtral"})  # fmt: skip
    text = usage_table(v)
    assert "advice (usage never changes a stack by itself):" in text
    assert "armed only `daily 10:00-12:00 UTC` it would have saved" in text
    assert "set overrides.pixtral.armedWindow" in text
    (advice,) = usage_data(v)["advice"]
    assert advice["window"] == "daily 10:00-12:00 UTC" and advice["openings"] == 2


def test_several_restarts_that_lost_counts_are_counted_in_the_note() -> None:
    from tests.views.test_usage import at, compute_usage, hours, plan, tok

    samples = [tok("a", "pixtral", 1, 10, "s1"), tok("a", "pixtral", 2, 5, "s2"),
               tok("a", "pixtral", 3, 8, "s3")]  # fmt: skip
    v = compute_usage(plan=plan(), hours=4, end=at(4), billed=hours("a", 3, 1.0),
                      samples=samples, owners={"a": "pixtral"})  # fmt: skip
    assert "pixtral: a lower bound: 2 restarts each lost whatever output tokens" in usage_table(v)
    assert ">=23" in usage_table(v)


def test_answers_without_a_count_are_said_and_make_the_figures_bounds() -> None:
    samples = ollama_samples(uncounted=1)
    text = usage_table(view(samples=samples))
    assert ">=40" in text
    assert (
        "qwen3-8b: a lower bound: 1 answer carried no count of its output (OpenAI-style streams"
        " whose client did not ask for stream_options.include_usage)" in text
    )
    data = next(m for m in usage_data(view(samples=samples))["models"] if m["model"] == "qwen3-8b")
    assert data["outputIsLowerBound"] and data["answersWithoutCount"] == 1
