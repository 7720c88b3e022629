"""The status report as a table, Markdown and JSON: verdict, drift, notes, the heal command, and
the JSON contract's keys pinned."""

from __future__ import annotations

import json

from frutebox_infra.report.status_report import (
    STATUS_VERSION,
    status_data,
    status_markdown,
    status_table,
)
from tests.test_drift import IN_SYNC, live_of, status


def test_in_sync_says_so_and_offers_no_heal() -> None:
    view = status(IN_SYNC)
    table = status_table(view)
    assert "stack s: in sync" in table and "heal with" not in table
    assert "2h00m" in table and "last 24 h: $1.50 billed" in table
    assert status_markdown(view).startswith("### frutebox status: `s` — ✅ in sync")
    assert status_data(view)["inSync"] is True and status_data(view)["heal"] is None


def test_drift_rows_notes_and_the_heal_command() -> None:
    foreign = live_of("qwen3-8b", "theirs", volume_id="elsewhere")
    view = status([IN_SYNC[1], foreign])
    table = status_table(view)
    assert view.heal is not None
    assert "missing" in table and "gone" in table
    assert "qwen3-8b: missing: pod p1 is gone from RunPod" in table
    assert "foreign, same name, not touched: frutebox-s-qwen3-8b (theirs" in table
    assert table.endswith(f"heal with:\n  {view.heal}")
    markdown = status_markdown(view)
    assert "❌ drift" in markdown and f"```sh\n{view.heal}\n```" in markdown
    data = json.loads(json.dumps(status_data(view)))
    assert data["heal"] == view.heal and [p["id"] for p in data["foreign"]] == ["theirs"]
    assert {m["model"]: m["drift"] for m in data["models"]} == {
        "qwen3-8b": "missing",
        "llama-3.2-1b": None,
    }


def test_the_json_is_versioned_and_its_keys_are_pinned() -> None:
    foreign = live_of("qwen3-8b", "theirs", volume_id="elsewhere")
    data = json.loads(json.dumps(status_data(status([IN_SYNC[1], foreign])), allow_nan=False))
    assert list(data) == [
        "version", "stack", "inSync", "models", "untracked", "foreign", "volume", "spend", "heal",
    ]  # fmt: skip
    assert data["version"] == STATUS_VERSION == 1 and data["inSync"] is False
    assert [list(m) for m in data["models"]] == [[
        "model", "podName", "recordedPodId", "live", "uptimeSeconds", "healthy", "planned",
        "drift", "details", "urn",
    ]] * 2  # fmt: skip
    running = data["models"][1]
    assert list(running["live"]) == [
        "id", "name", "status", "gpuId", "gpuCount", "usdPerHour", "dataCenterId",
    ]  # fmt: skip
    assert list(running["planned"]) == ["gpuId", "gpuCount", "usdPerHour"]
    assert list(data["foreign"][0]) == list(running["live"])
    assert list(data["volume"]) == [
        "recordedId", "missing", "sizeGb", "type", "dataCenter", "plannedSizeGb",
    ]  # fmt: skip
    assert [list(s) for s in data["spend"]] == [["hours", "billedUsd", "plannedUsd"]]
