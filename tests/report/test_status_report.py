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
from frutebox_infra.views.drift import compute_status, with_health
from frutebox_infra.views.status_view import LiveVolume, Probe
from tests.views.test_drift import BOTH, IN_SYNC, NOW, live_of, plan, recorded, status


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
        "version", "stack", "inSync", "models", "untracked", "foreign", "untrackedVolumes",
        "foreignVolumes", "volume", "spend", "heal",
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


def test_an_unhealthy_pod_in_every_format() -> None:
    probe = Probe(ok=False, probes=3, window_s=20.0, last=502, path="/api/version")
    view = with_health(status(IN_SYNC), {"qwen3-8b": probe})
    table = status_table(view)
    [row] = [line for line in table.splitlines() if line.startswith("qwen3-8b")]
    assert "RUNNING" in row and "failing" in row and row.rstrip().endswith("unhealthy")
    assert "qwen3-8b: unhealthy: pod p1 is RUNNING but /api/version failed all 3 probes" in table
    assert table.endswith(f"heal with:\n  {view.heal}") and "--replace" in (view.heal or "")
    markdown = status_markdown(view)
    assert "| `qwen3-8b` |" in markdown and "| failing |" in markdown
    assert "| unhealthy |" in markdown and "❌ drift" in markdown
    data = json.loads(json.dumps(status_data(view)))
    [qwen] = [m for m in data["models"] if m["model"] == "qwen3-8b"]
    assert (qwen["drift"], qwen["healthy"], data["inSync"]) == ("unhealthy", False, False)


def test_untracked_and_foreign_volumes_in_every_format() -> None:
    duplicate = LiveVolume("vol999", "frutebox-s-weights-tok12345", 1001, "EU-RO-1", "STANDARD")
    theirs = LiveVolume("forvol", "frutebox-s-weights", 500, "EU-RO-1", "STANDARD")
    volumes = [LiveVolume("vol123", "frutebox-s-weights-tok12345", 20, "EU-RO-1"), duplicate,
               theirs]  # fmt: skip
    view = compute_status(plan(), recorded(BOTH), IN_SYNC, volumes, now=NOW)
    table = status_table(view)
    assert "untracked volume (named with this stack's token, not in the state):" in table
    assert "frutebox-s-weights-tok12345 (vol999, 1001 GB STANDARD in EU-RO-1)" in table
    assert "untracked volumes bill $70.05/month for nothing" in table
    assert "foreign volume, named like ours without our token, not touched:" in table
    assert "heal with:\n  frutebox status --stack s --terminate-untracked" in table
    assert "vol999" in status_markdown(view) and "forvol" in status_markdown(view)
    data = status_data(view)
    assert [v["id"] for v in data["untrackedVolumes"]] == ["vol999"]
    assert [v["id"] for v in data["foreignVolumes"]] == ["forvol"]
    assert list(data["untrackedVolumes"][0]) == ["id", "name", "sizeGb", "type", "dataCenter"]
