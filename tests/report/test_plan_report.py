"""The plan report: the table (readable at 100 columns, every number the plan holds shown), the
Markdown comment, and the JSON contract (keys pinned, values true)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

import pytest

from frutebox_infra.catalog.schema import Runtime
from frutebox_infra.estimates.speed import SpeedEstimate
from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.report.data_fields import speed_data
from frutebox_infra.report.plan_report import PLAN_VERSION, plan_data, plan_markdown, plan_table
from frutebox_infra.report.text import usd
from frutebox_infra.stack.environment import Environment
from frutebox_infra.views.plan import PlanView
from tests.factories import gpu, ollama_model, real_images, real_registry, registry, settings
from tests.report.test_data_fields import SPEED_KEYS

LONG_ID = "a-remarkably-long-model-identifier-that-would-push-any-table-past-its-width"


def table_lines(text: str) -> list[str]:
    """The lines of the first table in `text`: its header, rule and rows."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("MODEL"))
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


def real_plan(models: list[str], **config: object) -> FleetPlan:
    return plan_fleet(
        real_registry(), settings(models=models, **config), stack="prod", environment=Environment()
    )


def long_plan() -> FleetPlan:
    images = real_images()
    images[Runtime.OLLAMA] = replace(
        images[Runtime.OLLAMA],
        tag="an-unpinned-and-very-long-tag-name-for-the-ollama-image-that-goes-on",
    )
    reg = registry(
        [ollama_model(LONG_ID)], (gpu("NVIDIA SOME VERY LONG GPU NAME 80GB"),), images=images
    )
    return plan_fleet(reg, settings(models=[LONG_ID]), stack="long")


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(lambda: plan_table(PlanView(plan=real_plan(PROD))), id="prod-like"),
        pytest.param(lambda: plan_table(PlanView(plan=long_plan())), id="long-cells"),
    ],
)
def test_tables_fit_in_100_columns(text) -> None:  # type: ignore[no-untyped-def]
    lines = table_lines(text())
    assert len(lines) >= 3
    assert max(len(line) for line in lines) <= 100


def test_a_truncated_cell_says_so() -> None:
    rendered = table_lines(plan_table(PlanView(plan=long_plan())))
    assert any("…" in line for line in rendered)
    assert rendered[2].startswith(LONG_ID[:6])


def test_plan_table_shows_the_plan_numbers() -> None:
    plan = real_plan(["qwen3-8b", "sdxl-1.0"], budgetUsdPerHour=2)
    text = plan_table(PlanView(plan=plan))
    assert f"{plan.volume.size_gb} GB" in text
    assert usd(plan.volume.usd_per_month) in text
    assert usd(plan.usd_per_hour_best) in text and usd(plan.usd_per_month_worst) in text
    assert "within" in text
    for m in plan.models:
        assert m.placement is not None
        assert m.model_id in text and m.placement.label in text


def test_over_budget_and_problems_are_shown() -> None:
    text = plan_table(PlanView(plan=real_plan(["qwen3-8b", "ghost"], budgetUsdPerHour=0.01)))
    assert "OVER by" in text
    assert "PROBLEMS" in text and "unknown-model" in text and "Fix:" in text


def test_an_empty_stack_says_so() -> None:
    assert "(no models armed)" in plan_table(PlanView(plan=real_plan([])))


def test_coarse_estimates_are_marked() -> None:
    rows = table_lines(plan_table(PlanView(plan=real_plan(["sdxl-1.0", "qwen3-8b"]))))
    sdxl = next(r for r in rows if r.startswith("sdxl-1.0"))
    qwen = next(r for r in rows if r.startswith("qwen3-8b"))
    assert "coarse" in sdxl and "coarse" not in qwen


def test_the_fit_says_sequences_held_against_configured() -> None:
    plan = real_plan(["qwen3-8b"])
    (m,) = plan.models
    assert m.placement is not None
    f = m.placement.fit
    assert f.full_context_sequences is not None
    held = f"{int(f.full_context_sequences * 10) / 10:g}/{f.configured_sequences} seq"
    (row,) = table_lines(plan_table(PlanView(plan=plan)))[2:]
    assert f"{f.weights_gb_per_gpu:.0f}G {held}" in row


def test_an_unpinned_image_is_marked() -> None:
    images = real_images()
    images[Runtime.OLLAMA] = replace(images[Runtime.OLLAMA], tag="latest")
    reg = registry([ollama_model("o")], (gpu("G"),), images=images)
    text = plan_table(PlanView(plan=plan_fleet(reg, settings(models=["o"]), stack="t")))
    assert "latest (unpinned)" in text


def test_shared_pods_show_members_fit_sum_and_saving() -> None:
    plan = real_plan(["qwen3-8b", "llama-3.2-1b", "sdxl-1.0"], colocate=True)
    text = plan_table(PlanView(plan=plan))
    (pod,) = [p for p in plan.pods if p.shared]
    assert "shared pods (2 pods for 3 models):" in text
    assert "frutebox-prod-qwen3-8b: 1x RTX A5000, $0.26/h vs $0.34/h apart" in text
    fits = pod.placement.member_fits
    assert (
        f"fit {pod.placement.needed_gb:.1f} of {pod.placement.available_gb:.1f} GB per GPU"
        f" (sum: qwen3-8b {fits[0].needed_gb:.1f} + llama-3.2-1b {fits[1].needed_gb:.1f})"
    ) in text
    assert "co-location saves $0.08/h against one pod per model" in text
    rows = {line.split()[0]: line for line in table_lines(text)[2:]}
    assert "shared pod" in rows["qwen3-8b"] and "shared pod" in rows["llama-3.2-1b"]
    assert "shared pod" not in rows["sdxl-1.0"]
    assert all(len(line) <= 100 for line in text.splitlines() if "pod" in line)


def test_no_shared_pod_section_when_colocation_is_off() -> None:
    assert "shared pods" not in plan_table(PlanView(plan=real_plan(["qwen3-8b", "llama-3.2-1b"])))


# --- markdown ----------------------------------------------------------------------------


def rows(md: str, which: int = 0) -> list[list[str]]:
    """The cells of the `which`-th Markdown table (0: the plan's; speed, then bring-up follow)."""
    tables: list[list[list[str]]] = []
    previous = ""
    for line in md.splitlines():
        if line.startswith("|"):
            if not previous.startswith("|"):
                tables.append([])
            tables[-1].append([cell.strip() for cell in line.strip().strip("|").split("|")])
        previous = line
    return tables[which]


def test_one_row_per_model_with_consistent_columns() -> None:
    plan = real_plan(["qwen3-8b", "kimi-k2.6", "sdxl-1.0"])
    table = rows(plan_markdown(PlanView(plan=plan)))
    header, rule, *body = table
    assert header[0] == "model" and len(header) == 9
    assert all(len(r) == len(header) for r in table)
    assert set("".join(rule)) <= set("-:")
    assert [r[0] for r in body] == ["`qwen3-8b`", "`kimi-k2.6`", "`sdxl-1.0`"]
    for r, m in zip(body, plan.models, strict=True):
        assert m.placement is not None
        assert r[1] == m.resolution.engine
        assert r[3] == m.placement.label
        assert r[6] == usd(m.usd_per_hour_best) and r[7] == usd(m.usd_per_hour_worst)
        assert r[8] == str(len(m.fallbacks))


def test_totals_and_verdict_of_a_good_plan() -> None:
    plan = real_plan(["qwen3-8b", "sdxl-1.0"], budgetUsdPerHour=2)
    md = plan_markdown(PlanView(plan=plan))
    assert "`prod`" in md.splitlines()[0] and "ready to deploy" in md.splitlines()[0]
    assert f"{plan.volume.size_gb} GB" in md and usd(plan.volume.usd_per_month) in md
    assert usd(plan.usd_per_month_best) in md and usd(plan.usd_per_month_worst) in md
    assert "within budget" in md
    assert "Problems" not in md


def test_a_failing_plan_says_so_and_lists_problems_with_fixes() -> None:
    md = plan_markdown(PlanView(plan=real_plan(["qwen3-8b", "ghost"], budgetUsdPerHour=0.01)))
    assert "preview fails" in md.splitlines()[0]
    assert "**over budget**" in md
    assert "**Problems:**" in md
    problems = md.split("**Problems:**", 1)[1]
    assert "unknown-model" in problems and "over-budget" in problems and "Fix:" in problems


def test_a_model_without_a_placement_has_dashes() -> None:
    table = rows(plan_markdown(PlanView(plan=real_plan(["stable-audio-open-1.0"]))))
    assert table[2][0] == "`stable-audio-open-1.0`"
    assert all(cell in ("—", "-") for cell in table[2][3:])


def test_warnings_are_folded_away() -> None:
    md = plan_markdown(PlanView(plan=real_plan(["sdxl-1.0"])))
    assert "<details><summary>Warnings</summary>" in md and "</details>" in md
    assert "revision" in md.split("<details>", 1)[1]


def test_ends_with_a_newline() -> None:
    assert plan_markdown(PlanView(plan=real_plan([]))).endswith("\n")


# --- data --------------------------------------------------------------------------------

# The shape the issue asks for (must be present) ...
ISSUE_PLAN = {"stack", "models", "volume", "cost", "budget", "problems", "warnings"}
ISSUE_MODEL = {"id", "engine", "image", "placement", "fallbacks", "fit", "problems", "warnings"}
ISSUE_PLACEMENT = {"gpuId", "gpuType", "count", "vramGb", "usdPerHour"}
ISSUE_FIT = {
    "fits",
    "weightsGbPerGpu",
    "kvBytesPerToken",
    "kvTokens",
    "fullContextSequences",
    "configuredSequences",
    "exact",
}
ISSUE_VOLUME = {"sizeGb", "usdPerMonth"}
ISSUE_COST = {"usdPerHourBest", "usdPerHourWorst", "usdPerMonthBest", "usdPerMonthWorst"}
ISSUE_BUDGET = {"maxUsdPerHour", "withinBudget"}

# ... and the whole contract as shipped: a change here is a deliberate, versioned change.
PLAN_KEYS = ISSUE_PLAN | {"version", "dataCenter", "cloud", "exposure", "pods", "speed", "seeding"}
SPEED_SETTINGS_KEYS = {"minDecodeTokensPerSecond", "rankBy", "promptTokens", "outputTokens"}
COST_KEYS = ISSUE_COST | {"colocationSavingUsdPerHour"}
POD_KEYS = {
    "name",
    "engine",
    "models",
    "shared",
    "gpuId",
    "count",
    "neededGbPerGpu",
    "availableGbPerGpu",
    "memberNeededGbPerGpu",
    "sharing",
    "usdPerHourBest",
    "usdPerHourWorst",
    "usdPerHourApart",
    "savingUsdPerHour",
}
MODEL_KEYS = ISSUE_MODEL | {
    "podName",
    "imagePinned",
    "contextTokens",
    "usdPerHourBest",
    "usdPerHourWorst",
    "launch",
    "exposure",
    "minDecodeTokensPerSecond",
    "belowFloor",
    "bringup",
}
PLACEMENT_KEYS = ISSUE_PLACEMENT | {"speed"}
FIT_KEYS = ISSUE_FIT | {"memoryBudgetGbPerGpu", "layersOnWorstGpu"}
LAUNCH_KEYS = {
    "image",
    "args",
    "envNames",
    "secretEnvNames",
    "ports",
    "healthPath",
    "expectedFiles",
}
VOLUME_KEYS = ISSUE_VOLUME | {"weightsGb", "engineInstallsGb", "dataCenter", "type"}
BUDGET_KEYS = ISSUE_BUDGET | {"headroomUsdPerHour"}
PROBLEM_KEYS = {"model", "rule", "message", "fix", "text"}


def as_json(data: Any) -> Any:
    """Round-trip through strict JSON: NaN or Infinity would not survive `allow_nan=False`."""
    return json.loads(json.dumps(data, allow_nan=False))


PROD_LIKE = ["qwen-3.6-27b", "qwen3-235b-a22b", "kimi-k2.6", "sdxl-1.0", "qwen3-8b"]


def test_plan_json_has_the_issue_shape() -> None:
    data = as_json(plan_data(PlanView(plan=real_plan(PROD_LIKE))))
    assert data.keys() >= ISSUE_PLAN
    assert data["volume"].keys() >= ISSUE_VOLUME
    assert data["cost"].keys() >= ISSUE_COST
    assert data["budget"].keys() >= ISSUE_BUDGET
    for m in data["models"]:
        assert m.keys() >= ISSUE_MODEL
        assert m["placement"].keys() >= ISSUE_PLACEMENT
        assert m["fit"].keys() >= ISSUE_FIT
        for fb in m["fallbacks"]:
            assert fb.keys() >= ISSUE_PLACEMENT


def test_plan_json_keys_are_pinned() -> None:
    data = as_json(plan_data(PlanView(plan=real_plan([*PROD_LIKE, "ghost"], budgetUsdPerHour=1))))
    assert data["version"] == PLAN_VERSION == 1
    assert set(data) == PLAN_KEYS
    assert set(data["volume"]) == VOLUME_KEYS
    assert set(data["cost"]) == COST_KEYS
    assert set(data["budget"]) == BUDGET_KEYS
    assert set(data["speed"]) == SPEED_SETTINGS_KEYS
    assert data["pods"] and all(set(p) == POD_KEYS for p in data["pods"])
    for m in data["models"]:
        assert set(m) == MODEL_KEYS
        for refused in m["belowFloor"]:
            assert set(refused) == PLACEMENT_KEYS | {"text"}
            assert set(refused["speed"]) == SPEED_KEYS
        if m["placement"] is not None:
            assert set(m["placement"]) == PLACEMENT_KEYS
            speed = m["placement"]["speed"]
            assert speed is None or set(speed) == SPEED_KEYS
            assert set(m["fit"]) == FIT_KEYS
            assert set(m["launch"]) == LAUNCH_KEYS
        for p in m["problems"]:
            assert set(p) == PROBLEM_KEYS
    assert data["problems"] and all(set(p) == PROBLEM_KEYS for p in data["problems"])


def test_plan_json_values_are_the_plan() -> None:
    plan = real_plan(PROD_LIKE)
    data = as_json(plan_data(PlanView(plan=plan)))
    assert data["stack"] == "prod"
    assert [m["id"] for m in data["models"]] == PROD_LIKE
    assert data["cost"] == {
        "usdPerHourBest": plan.usd_per_hour_best,
        "usdPerHourWorst": plan.usd_per_hour_worst,
        "usdPerMonthBest": plan.usd_per_month_best,
        "usdPerMonthWorst": plan.usd_per_month_worst,
        "colocationSavingUsdPerHour": 0.0,
    }
    assert data["volume"]["sizeGb"] == plan.volume.size_gb
    assert data["budget"]["withinBudget"] is plan.within_budget
    for m, mp in zip(data["models"], plan.models, strict=True):
        p = mp.placement
        assert p is not None
        assert m["placement"] == {
            "gpuId": p.gpu.id,
            "gpuType": p.gpu.name,
            "count": p.count,
            "vramGb": p.gpu.vram_gb * p.count,
            "usdPerHour": p.usd_per_hour,
            "speed": speed_data(p.speed, p.serving.concurrency),
        }
        assert m["minDecodeTokensPerSecond"] == mp.min_decode_tok_s
        assert m["engine"] == mp.resolution.engine
        assert m["fit"]["fits"] is True
        assert isinstance(m["fit"]["exact"], bool)
        assert m["fit"]["kvBytesPerToken"] == p.fit.kv_bytes_per_token
        assert len(m["fallbacks"]) == len(mp.fallbacks)


def test_a_model_that_cannot_be_placed_has_nulls_not_zeros() -> None:
    data = as_json(plan_data(PlanView(plan=real_plan(["stable-audio-open-1.0"]))))
    [m] = data["models"]
    assert m["placement"] is None and m["fit"] is None and m["fallbacks"] == []
    [problem] = m["problems"]
    assert problem["rule"] == "gated-no-token" and problem["model"] == "stable-audio-open-1.0"
    assert problem["fix"] and "Fix:" in problem["text"]


def test_problems_name_model_rule_and_fix() -> None:
    data = as_json(plan_data(PlanView(plan=real_plan(["ghost"], dataCenter="MARS-1"))))
    rules = {p["rule"] for p in data["problems"]}
    assert {"unknown-model", "unknown-data-centre"} <= rules
    for p in data["problems"]:
        assert p["message"] and p["fix"]


def test_launch_says_what_will_run_with_env_names_but_never_values() -> None:
    models = ["qwen-3.6-27b", "kimi-k2.6", "sdxl-1.0", "stable-audio-open-1.0", "qwen3-8b"]
    plan = real_plan(models, hfToken={"secure": "v1:configured"})
    data = as_json(plan_data(PlanView(plan=plan)))
    text = json.dumps(data)
    for m in plan.models:
        assert m.placement is not None, m.problems
        pod = m.placement.pod
        launch = data["models"][models.index(m.model_id)]["launch"]
        assert launch["image"] == pod.image and launch["args"] == pod.args
        assert launch["ports"] == pod.ports and launch["healthPath"] == pod.health_path
        assert launch["envNames"] == sorted({*pod.env, *pod.secret_env, *pod.serving_key_env})
        for name, value in pod.env.items():
            if len(value) > 40:  # scripts and paths: named, never printed
                assert value not in text, name
    audio = plan.model("stable-audio-open-1.0")
    assert audio is not None and audio.placement is not None
    assert "HF_TOKEN" in data["models"][3]["launch"]["secretEnvNames"]
    assert audio.placement.pod.expected_files == (
        "checkpoints/stable_audio_open_1.0.safetensors",
        "text_encoders/t5_base.safetensors",
    )


def test_members_of_a_shared_pod_share_its_pod_name() -> None:
    plan = real_plan(["qwen3-8b", "llama-3.2-1b", "sdxl-1.0"], colocate=True)
    data = as_json(plan_data(PlanView(plan=plan)))
    names = {m["id"]: m["podName"] for m in data["models"]}
    assert names["qwen3-8b"] == names["llama-3.2-1b"] == "frutebox-prod-qwen3-8b"
    assert names["sdxl-1.0"] == "frutebox-prod-sdxl-1.0"
    (shared,) = [p for p in data["pods"] if p["shared"]]
    assert shared["models"] == ["qwen3-8b", "llama-3.2-1b"]
    assert shared["neededGbPerGpu"] == pytest.approx(
        sum(shared["memberNeededGbPerGpu"].values()), abs=0.02
    )
    assert shared["neededGbPerGpu"] <= shared["availableGbPerGpu"]
    assert shared["savingUsdPerHour"] == pytest.approx(
        shared["usdPerHourApart"] - shared["usdPerHourBest"]
    )
    assert data["cost"]["colocationSavingUsdPerHour"] == shared["savingUsdPerHour"] > 0
    members = [m for m in data["models"] if m["podName"] == shared["name"]]
    assert sum(m["usdPerHourBest"] for m in members) == pytest.approx(shared["usdPerHourBest"])


# --- speed ---------------------------------------------------------------------------------

PROD = ["qwen-3.6-27b", "qwen3-235b-a22b", "kimi-k2.6", "sdxl-1.0", "ace-step-v1-3.5b"]


def speed_table(text: str) -> dict[str, list[str]]:
    """The speed table's rows by model: from its `MODEL  GPU  STREAMS` header to its legend."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"MODEL\s+GPU\s+STREAMS", line))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("TOK/S ="))
    return {c[0]: c for c in (re.split(r"\s{2,}", line) for line in lines[start + 2 : end])}


def test_the_table_shows_each_model_s_speed_at_its_streams_within_100_columns() -> None:
    plan = real_plan(PROD)
    text = plan_table(PlanView(plan=plan))
    table = speed_table(text)
    assert set(table) == set(PROD)
    for m in plan.models:
        assert m.placement is not None
        row = table[m.model_id]
        speed = m.placement.speed
        if isinstance(speed, SpeedEstimate):
            assert row[1] == m.placement.label and row[2] == str(m.placement.serving.concurrency)
            assert row[3] == f"{speed.decode_tok_s_per_stream:.1f}"
            assert row[4] == f"{speed.decode_tok_s_aggregate:.0f}"
            assert row[5] == f"${speed.usd_per_million_output_tokens:,.2f}"
            assert row[6] == "20"
        else:
            assert speed is None and row[2:] == ["-"] * 5  # diffusion: no tokens, no floor
    assert all(len(line) <= 100 for line in text.splitlines() if "tok/s" in line.lower())


def test_the_table_lists_what_the_floor_refused_with_its_figures() -> None:
    text = plan_table(PlanView(plan=real_plan(PROD)))
    refused = text.split("below the speed floor", 1)[1]
    assert "qwen3-235b-a22b: 4x RTX PRO 6000: 18.5 tok/s per stream at 16 streams < 20" in refused
    assert "kimi-k2.6: 8x A100 PCIe: 13.4 tok/s per stream at 8 streams < 20" in refused
    assert "below the speed floor" not in plan_table(
        PlanView(plan=real_plan(PROD, minDecodeTokensPerSecond=0))
    )


@pytest.mark.parametrize(
    ("config", "says"),
    [
        pytest.param({}, "each stream holding its full context", id="full-context"),
        pytest.param(
            {"promptTokens": 1024, "outputTokens": 512},
            "requests of 1024 prompt + 512 output tokens, prefills paid",
            id="stated-lengths",
        ),
        pytest.param({"rankBy": "usdPerMillionTokens"}, "ranked by $ per 1M output", id="rank"),
    ],
)
def test_the_legend_says_what_the_estimate_assumes(config: dict[str, object], says: str) -> None:
    text = plan_table(PlanView(plan=real_plan(["qwen3-8b"], **config)))
    assert says in " ".join(line.strip() for line in text.splitlines())


def test_the_markdown_has_a_speed_table_and_the_refusals() -> None:
    plan = real_plan(PROD)
    md = plan_markdown(PlanView(plan=plan))
    header, rule, *body = rows(md, 1)
    assert header == ["model", "GPU", "streams", "tok/s per stream", "tok/s all streams",
                      "$ per 1M output", "floor"]  # fmt: skip
    assert set("".join(rule)) <= set("-:")
    kimi = next(r for r in body if r[0] == "`kimi-k2.6`")
    m = plan.model("kimi-k2.6")
    assert m is not None and m.placement is not None
    speed = m.placement.speed
    assert isinstance(speed, SpeedEstimate)
    assert kimi[1:4] == [m.placement.label, "8", f"{speed.decode_tok_s_per_stream:.1f}"]
    assert "`kimi-k2.6`: 8x A100 PCIe: 13.4 tok/s per stream at 8 streams < 20" in md


def test_the_json_carries_each_placement_s_speed_and_the_refused() -> None:
    plan = real_plan(PROD, promptTokens=1024, outputTokens=512, rankBy="usdPerMillionTokens")
    data = as_json(plan_data(PlanView(plan=plan)))
    assert data["speed"] == {
        "minDecodeTokensPerSecond": 20.0,
        "rankBy": "usdPerMillionTokens",
        "promptTokens": 1024,
        "outputTokens": 512,
    }
    by_id = {m["id"]: m for m in data["models"]}
    for mp in plan.models:
        assert mp.placement is not None
        entry = by_id[mp.model_id]
        assert entry["placement"]["speed"] == speed_data(
            mp.placement.speed, mp.placement.serving.concurrency
        )
        assert [f["speed"] for f in entry["fallbacks"]] == [
            speed_data(f.speed, f.serving.concurrency) for f in mp.fallbacks
        ]
        assert [b["text"] for b in entry["belowFloor"]] == [str(b) for b in mp.below_floor]
    assert by_id["sdxl-1.0"]["placement"]["speed"] is None
