"""`pulumi preview` of the real program on the real engine: what a user sees before billing."""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import pytest

from frutebox_infra.planner.plan import plan_fleet
from frutebox_infra.program.fleet import SDK_DEBUG_ENV
from frutebox_infra.report.plan_report import plan_data, plan_table
from frutebox_infra.stack.stack_file import load_settings
from frutebox_infra.views.plan import PlanView
from tests.e2e.project import PulumiProject
from tests.factories import real_registry

pytestmark = pytest.mark.engine


def test_dev_preview_plans_a_volume_and_one_pod_per_armed_model(project: PulumiProject) -> None:
    preview = project.preview("dev")
    assert preview.code == 0, preview.stderr
    settings = load_settings(project.stack_path("dev"))
    creates = preview.urns("create")
    pods = [u.rsplit("::", 1)[1] for u in creates if u.endswith("-pod")]
    assert sorted(pods) == sorted(f"{m}-pod" for m in settings.models)
    assert [u for u in creates if u.endswith("::weights-volume")]
    servers = [u for u in creates if u.split("::")[2].endswith("frutebox:index:ModelServer")]
    assert len(servers) == len(settings.models)
    # The table a user reads and the stack outputs are the same plan, number for number.
    plan = plan_fleet(real_registry(), settings, stack="dev")
    assert preview.outputs["plan"] == plan_data(PlanView(plan=plan))
    assert plan_table(PlanView(plan=plan)) in preview.diagnostics


def test_preview_declares_the_pod_request_the_plan_promised(project: PulumiProject) -> None:
    preview = project.preview("dev")
    settings = load_settings(project.stack_path("dev"))
    plan = plan_fleet(real_registry(), settings, stack="dev")
    step = preview.step("qwen3-8b-pod")
    inputs = step["new"]["inputs"]
    assert inputs["create"].endswith("-m frutebox_infra.runpod pod create")
    assert inputs["delete"].endswith("-m frutebox_infra.runpod pod delete")
    model = plan.model("qwen3-8b")
    assert model is not None and model.placement is not None
    # stdin waits on the volume id, so it is unknown in preview; the triggers are known.
    triggers = inputs["triggers"]
    assert settings.data_center in triggers
    chosen = model.placement
    assert triggers == [
        settings.data_center,
        "frutebox-dev-weights",
        f"{chosen.count}x {chosen.gpu.id}",
    ]


def test_prod_preview_shows_fit_and_the_volume_is_protected(project: PulumiProject) -> None:
    preview = project.preview("prod")
    assert preview.code == 0, preview.stderr
    plan = preview.outputs["plan"]
    assert {m["id"] for m in plan["models"]} >= {"qwen-3.6-27b", "qwen3-235b-a22b", "kimi-k2.6"}
    for model in plan["models"]:
        assert model["placement"] is not None, model["id"]
        assert model["fit"]["fits"] is True
    exact = [m for m in plan["models"] if m["engine"] in ("sglang", "llamacpp")]
    assert exact
    assert all(m["fit"]["exact"] and m["fit"]["fullContextSequences"] >= 1 for m in exact)
    assert "qwen3-235b-a22b" in preview.diagnostics and " seq " in preview.diagnostics
    assert preview.step("weights-volume")["new"]["protect"] is True


def test_prod_preview_shows_each_model_s_speed_and_what_the_floor_refused(
    project: PulumiProject,
) -> None:
    preview = project.preview("prod")
    assert preview.code == 0, preview.stderr
    plan = plan_fleet(real_registry(), load_settings(project.stack_path("prod")), stack="prod")
    shown = preview.diagnostics
    assert plan_table(PlanView(plan=plan)) in shown
    assert re.search(r"^MODEL +GPU +STREAMS +TOK/S +AGG +\$/1M +FLOOR$", shown, re.M)
    # The speed table's row for Kimi says what the stack output says, at its 8 streams.
    kimi = next(m for m in preview.outputs["plan"]["models"] if m["id"] == "kimi-k2.6")
    speed = kimi["placement"]["speed"]
    row = re.search(r"^kimi-k2\.6 +5x H200 SXM +8 +(\S+) +(\S+) +(\S+) +20$", shown, re.M)
    assert row is not None
    assert row.groups() == (
        f"{speed['decodeTokensPerSecondPerStream']:.1f}",
        f"{speed['decodeTokensPerSecondAggregate']:.0f}",
        f"${speed['usdPerMillionOutputTokens']:.2f}",
    )
    assert "kimi-k2.6: 8x A100 PCIe: 13.4 tok/s per stream at 8 streams < 20" in shown
    refused = "8x A100 PCIe: 13.4 tok/s per stream at 8 streams < 20"
    assert next(b["text"] for b in kimi["belowFloor"]) == refused


BROKEN = [
    pytest.param({"models": ["no-such-model"]}, "not in the model registry", id="unknown-model"),
    pytest.param(
        {"models": ["qwen3-8b"], "budgetUsdPerHour": 0.05}, "over its budget", id="over-budget"
    ),
    pytest.param({"models": ["flux.1-schnell"]}, "no-recipe", id="unservable-model"),
    pytest.param({"models": ["stable-audio-open-1.0"]}, "gated", id="gated-without-token"),
    pytest.param(
        {"models": ["qwen3-8b"], "dataCenter": "MARS-1"}, "MARS-1", id="unknown-data-centre"
    ),
    pytest.param(
        {"models": ["qwen3-8b"], "overrides": {"qwen3-8b": {"gpu": "TPU v9"}}},
        "TPU v9",
        id="unknown-gpu",
    ),
    pytest.param(
        {"models": ["qwen3-8b"], "cloud": "COMMUNITY"}, "Secure Cloud only", id="community"
    ),
    pytest.param(
        {"models": ["qwen3-8b"], "budgetUsdPerHour": "lots"}, "budgetUsdPerHour", id="bad-type"
    ),
    pytest.param(
        {"models": ["qwen3-8b"], "budgetUsdPerHour": -3}, "budgetUsdPerHour", id="negative-budget"
    ),
    pytest.param({"models": "qwen3-8b"}, "frutebox-infra:models", id="models-not-a-list"),
    pytest.param(
        {"models": ["qwen3-235b-a22b"], "overrides": {"qwen3-235b-a22b": {"context": 9_000_000}}},
        "above the 32768 tokens",
        id="context-above-the-model-s",
    ),
    pytest.param(
        {
            "models": ["qwen3-235b-a22b"],
            "overrides": {"qwen3-235b-a22b": {"minConcurrentSequences": 1024}},
        },
        "fits no placement",
        id="fits-nowhere",
    ),
    pytest.param({"models": ["qwen3-8b"], "specDecode": "yes"}, "specDecode", id="boolean-yes"),
    pytest.param(
        {"models": ["kimi-k2.6"], "minDecodeTokensPerSecond": "200"},
        "no placement decodes 200 tok/s per stream",
        id="below-the-speed-floor",
    ),
    pytest.param(
        {"models": ["qwen3-8b"], "promptTokens": 1024},
        "promptTokens is set without outputTokens",
        id="a-prompt-without-an-output",
    ),
    pytest.param(
        {"models": ["qwen3-8b"], "budgetUsdPerHour": True},
        "budgetUsdPerHour",
        id="budget-a-boolean",
    ),
]


@pytest.mark.parametrize(("config", "message"), BROKEN)
def test_a_broken_stack_fails_preview_and_plans_no_resource(
    project: PulumiProject, config: dict[str, Any], message: str
) -> None:
    project.write_stack("broken", {"dataCenter": "EU-RO-1", "budgetUsdPerHour": 50, **config})
    preview = project.preview("broken")
    assert preview.code != 0
    assert preview.urns("create") == []
    text = preview.diagnostics + preview.stderr
    assert message in text
    assert "Traceback" not in text


def test_malformed_stack_yaml_fails_without_a_traceback(project: PulumiProject) -> None:
    project.write_stack_text("broken", "config:\n  frutebox-infra:models: [qwen3-8b\n")
    proc = project.pulumi("preview", "--stack", "broken", check=False)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stdout + proc.stderr


def test_offline_plan_matches_the_preview_outputs(project: PulumiProject) -> None:
    preview = project.preview("prod")
    proc = subprocess.run(
        [project.env["FRUTEBOX_PYTHON"], "-m", "frutebox_infra", "plan", "--stack", "prod",
         "--format", "json", "--stacks-dir", str(project.root / "stacks")],
        capture_output=True, text=True, check=True, env=project.env,
    )  # fmt: skip
    assert json.loads(proc.stdout) == preview.outputs["plan"]


def test_the_sdk_s_registration_debug_lines_are_sent_only_when_asked_for(
    project: PulumiProject,
) -> None:
    # Each is a blocking RPC that only `--debug` shows: dropped unless the variable keeps them.
    project.init("dev")
    quiet = project.pulumi("preview", "--stack", "dev", "--debug")
    project.extra_env[SDK_DEBUG_ENV] = "1"
    kept = project.pulumi("preview", "--stack", "dev", "--debug")
    line = "resource registration successful"
    assert line not in quiet.stdout + quiet.stderr
    # Every resource the program registers says so: the volume, each server and its commands.
    assert (kept.stdout + kept.stderr).count(line) >= 9
    # Dropping them changes nothing the preview plans.
    # The serving key's mint is one of them (program/fleet.py `mint_key`).
    assert _planned(quiet.stdout) == _planned(kept.stdout) == "+ 14 to create"


def _planned(text: str) -> str | None:
    """The preview's summary of what it would do, e.g. `+ 13 to create`."""
    found = re.search(r"^\s*(\+ \d+ to create)\s*$", text, re.MULTILINE)
    return found.group(1) if found else None
