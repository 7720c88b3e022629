"""The estimate learns: a measured row in registry/speed.yaml (the fleet's own) replaces the
speed model's decode rate for the same model, engine, GPU type and count, in the estimate and
the floor alike, and says so; `usage --learn` writes such rows with their provenance."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from frutebox_infra.catalog.files import load_registry, validate_registry
from frutebox_infra.commands.usage import learned_rows, write_learned
from frutebox_infra.planner import SpeedEstimate
from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.plumbing.paths import REGISTRY_DIR
from frutebox_infra.views.usage import BilledHour, CounterSample, compute_usage
from tests.factories import files_with, real_files, real_registry, settings

MODEL = "kimi-k2.6"


def plan(registry_files: object | None = None) -> FleetPlan:
    reg = validate_registry(registry_files) if registry_files else real_registry()  # type: ignore[arg-type]
    config = settings(models=[MODEL], measureUsage=True, minDecodeTokensPerSecond=0,
                      overrides={MODEL: {"context": 16384}})  # fmt: skip
    return plan_fleet(reg, config, stack="p")


def row(p: FleetPlan, rate: float) -> dict[str, object]:
    placement = p.models[0].placement
    assert placement is not None
    return {"model": MODEL, "engine": "llamacpp", "gpu": placement.gpu.id,
            "gpu_count": placement.count, "decode_tok_s_per_stream": rate, "pod": "pod-1",
            "engine_version": "full-cuda-b11382", "date": "2026-12-03",
            "source": "test"}  # fmt: skip


def with_rows(*rows: dict[str, object]) -> object:
    text = real_files().texts["speed.yaml"] + "measured:\n"
    text += "".join(f"  - {json.dumps(r)}\n" for r in rows)
    return files_with(speed=text)


def test_a_measured_row_replaces_the_estimate_for_its_placement() -> None:
    before = plan()
    placement = before.models[0].placement
    assert placement is not None and isinstance(placement.speed, SpeedEstimate)
    after = plan(with_rows(row(before, 3.0)))
    learned = after.models[0].placement
    assert learned is not None and (learned.gpu.id, learned.count) == (
        placement.gpu.id, placement.count)  # fmt: skip
    speed = learned.speed
    assert isinstance(speed, SpeedEstimate) and speed.decode_tok_s_per_stream == 3.0
    assert speed.usd_per_million_output_tokens is not None
    assert before.models[0].placement.speed.usd_per_million_output_tokens < (  # type: ignore[union-attr]
        speed.usd_per_million_output_tokens
    )
    assert any("decode measured by our fleet: 3 tok/s per stream on pod pod-1" in a
               for a in speed.assumptions)  # fmt: skip
    # The floor reads the same rate: below it, the measured placement is refused.
    floored = plan_fleet(
        validate_registry(with_rows(row(before, 3.0))),  # type: ignore[arg-type]
        settings(models=[MODEL], measureUsage=True,
                 overrides={MODEL: {"context": 16384, "minDecodeTokensPerSecond": 5}}),
        stack="p",
    )  # fmt: skip
    chosen = floored.models[0].placement
    assert chosen is None or (chosen.gpu.id, chosen.count) != (placement.gpu.id, placement.count)


def test_usage_learn_writes_rows_with_provenance_and_plans_use_them(tmp_path: Path) -> None:
    registry_dir = tmp_path / "registry"
    shutil.copytree(REGISTRY_DIR, registry_dir)
    p = plan()
    at = datetime(2026, 12, 3, 10, tzinfo=UTC)
    samples = [
        CounterSample(at=at, pod_id="pod-9", model_id=MODEL, started_at="s",
                      output_tokens=0.0, decode_seconds=0.0),
        CounterSample(at=at.replace(hour=11), pod_id="pod-9", model_id=MODEL, started_at="s",
                      output_tokens=4000.0, decode_seconds=500.0),
    ]  # fmt: skip
    billed = [BilledHour(pod_id="pod-9", start=at, usd=5.0)]
    view = compute_usage(plan=p, hours=2, end=at.replace(hour=12), billed=billed,
                         samples=samples, owners={"pod-9": MODEL})  # fmt: skip
    (learned,) = learned_rows(view, p, "2026-12-03")
    assert learned["decode_tok_s_per_stream"] == 8.0 and learned["pod"] == "pod-9"
    assert learned["engine_version"] == "full-cuda-b11382" and learned["date"] == "2026-12-03"
    write_learned(registry_dir, [learned])
    registry = load_registry(registry_dir)
    assert registry.speed is not None and registry.speed.measured[-1].pod == "pod-9"
    text = (registry_dir / "speed.yaml").read_text()
    assert text.count("measured:") == 1 and "# The fleet's own decode measurements" in text
    write_learned(registry_dir, [learned | {"date": "2026-12-04"}])  # appended, one list
    assert (registry_dir / "speed.yaml").read_text().count("\nmeasured:") == 1
    # A row the registry refuses is not left behind.
    good = (registry_dir / "speed.yaml").read_text()
    with pytest.raises(Exception, match="gpu_count"):
        write_learned(registry_dir, [learned | {"gpu_count": 99}])
    assert (registry_dir / "speed.yaml").read_text() == good
