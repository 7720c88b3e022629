"""The JSON contract of `plan` and `models --format json`: keys pinned, values true."""

from __future__ import annotations

import json
from typing import Any

import pytest

from frutebox_infra.environment import Environment
from frutebox_infra.plan import FleetPlan, plan_fleet
from frutebox_infra.recipes import ServeOptions
from frutebox_infra.report.data import SCHEMA_VERSION, catalog_entry, plan_data
from frutebox_infra.resolver import resolve
from tests.factories import real_registry, settings

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
ISSUE_CATALOG = {"id", "engine", "servable", "problem", "cheapest", "placements"}

# ... and the whole contract as shipped: a change here is a deliberate, versioned change.
PLAN_KEYS = ISSUE_PLAN | {"version", "dataCenter", "cloud", "pods"}
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
}
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
CATALOG_KEYS = ISSUE_CATALOG | {"name", "capability", "problemRule", "warnings"}


def fleet(models: list[str], **config: Any) -> FleetPlan:
    return plan_fleet(
        real_registry(), settings(models=models, **config), stack="prod", environment=Environment()
    )


def as_json(data: Any) -> Any:
    """Round-trip through strict JSON: NaN or Infinity would not survive `allow_nan=False`."""
    return json.loads(json.dumps(data, allow_nan=False))


PROD_LIKE = ["qwen-3.6-27b", "qwen3-235b-a22b", "kimi-k2.6", "sdxl-1.0", "qwen3-8b"]


def test_plan_json_has_the_issue_shape() -> None:
    data = as_json(plan_data(fleet(PROD_LIKE)))
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
    data = as_json(plan_data(fleet([*PROD_LIKE, "ghost"], budgetUsdPerHour=1)))
    assert data["version"] == SCHEMA_VERSION == 1
    assert set(data) == PLAN_KEYS
    assert set(data["volume"]) == VOLUME_KEYS
    assert set(data["cost"]) == COST_KEYS
    assert set(data["budget"]) == BUDGET_KEYS
    assert data["pods"] and all(set(p) == POD_KEYS for p in data["pods"])
    for m in data["models"]:
        assert set(m) == MODEL_KEYS
        if m["placement"] is not None:
            assert set(m["placement"]) == ISSUE_PLACEMENT
            assert set(m["fit"]) == FIT_KEYS
            assert set(m["launch"]) == LAUNCH_KEYS
        for p in m["problems"]:
            assert set(p) == PROBLEM_KEYS
    assert data["problems"] and all(set(p) == PROBLEM_KEYS for p in data["problems"])


def test_plan_json_values_are_the_plan() -> None:
    plan = fleet(PROD_LIKE)
    data = as_json(plan_data(plan))
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
        }
        assert m["engine"] == mp.resolution.engine
        assert m["fit"]["fits"] is True
        assert isinstance(m["fit"]["exact"], bool)
        assert m["fit"]["kvBytesPerToken"] == p.fit.kv_bytes_per_token
        assert len(m["fallbacks"]) == len(mp.fallbacks)


def test_a_model_that_cannot_be_placed_has_nulls_not_zeros() -> None:
    data = as_json(plan_data(fleet(["stable-audio-open-1.0"])))
    [m] = data["models"]
    assert m["placement"] is None and m["fit"] is None and m["fallbacks"] == []
    [problem] = m["problems"]
    assert problem["rule"] == "gated-no-token" and problem["model"] == "stable-audio-open-1.0"
    assert problem["fix"] and "Fix:" in problem["text"]


def test_problems_name_model_rule_and_fix() -> None:
    data = as_json(plan_data(fleet(["ghost"], dataCenter="MARS-1")))
    rules = {p["rule"] for p in data["problems"]}
    assert {"unknown-model", "unknown-data-centre"} <= rules
    for p in data["problems"]:
        assert p["message"] and p["fix"]


# ---- the catalog ---------------------------------------------------------------------------


def catalog(token: bool = False) -> list[dict[str, Any]]:
    reg = real_registry()
    options = ServeOptions(hf_token_configured=token)
    return as_json([catalog_entry(resolve(reg, m.id, options)) for m in reg.models])  # type: ignore[no-any-return]


def test_catalog_lists_every_registry_model() -> None:
    assert [e["id"] for e in catalog()] == [m.id for m in real_registry().models]


def test_catalog_keys_are_pinned() -> None:
    for entry in catalog():
        assert entry.keys() >= ISSUE_CATALOG
        assert set(entry) == CATALOG_KEYS
        if entry["cheapest"] is not None:
            assert set(entry["cheapest"]) == ISSUE_PLACEMENT
            assert entry["cheapest"] == entry["placements"][0]
        for p in entry["placements"]:
            assert set(p) == ISSUE_PLACEMENT


@pytest.mark.parametrize("token", [False, True])
def test_each_unservable_model_says_the_rule_and_the_fix(token: bool) -> None:
    for entry in catalog(token):
        if entry["servable"]:
            assert entry["problem"] is None and entry["cheapest"] is not None
            assert entry["engine"]
        else:
            assert entry["cheapest"] is None and entry["placements"] == []
            assert entry["problemRule"] and f"[{entry['problemRule']}]" in entry["problem"]
            assert "Fix:" in entry["problem"]


def test_catalog_says_why_the_known_gaps_are_gaps() -> None:
    by_id = {e["id"]: e for e in catalog()}
    assert by_id["stable-audio-open-1.0"]["problemRule"] == "gated-no-token"
    assert by_id["flux.1-schnell"]["problemRule"] == "no-recipe"
    assert by_id["glm-5.2"]["problemRule"] == "no-recipe"
    assert by_id["llama-3.2-1b"]["servable"] is True


def test_launch_says_what_will_run_with_env_names_but_never_values() -> None:
    models = ["qwen-3.6-27b", "kimi-k2.6", "sdxl-1.0", "stable-audio-open-1.0", "qwen3-8b"]
    plan = fleet(models, hfToken={"secure": "v1:configured"})
    text = json.dumps(as_json(plan_data(plan)))
    for m in plan.models:
        assert m.placement is not None, m.problems
        pod = m.placement.pod
        launch = as_json(plan_data(plan))["models"][models.index(m.model_id)]["launch"]
        assert launch["image"] == pod.image and launch["args"] == pod.args
        assert launch["ports"] == pod.ports and launch["healthPath"] == pod.health_path
        assert launch["envNames"] == sorted({*pod.env, *pod.secret_env})
        for name, value in pod.env.items():
            if len(value) > 40:  # scripts and paths: named, never printed
                assert value not in text, name
    audio = plan.model("stable-audio-open-1.0")
    assert audio is not None and audio.placement is not None
    assert "HF_TOKEN" in as_json(plan_data(plan))["models"][3]["launch"]["secretEnvNames"]
    assert audio.placement.pod.expected_files == (
        "checkpoints/stable_audio_open_1.0.safetensors",
        "text_encoders/t5_base.safetensors",
    )


def test_members_of_a_shared_pod_share_its_pod_name() -> None:
    plan = fleet(["qwen3-8b", "llama-3.2-1b", "sdxl-1.0"], colocate=True)
    data = as_json(plan_data(plan))
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
