"""The JSON pieces several views share: a placement and a problem, keys pinned."""

from __future__ import annotations

from frutebox_infra.report.data_fields import placement_data, problem_data
from frutebox_infra.resolver import resolve
from tests.factories import real_registry


def test_a_placement_names_gpu_count_vram_and_price() -> None:
    resolution = resolve(real_registry(), "qwen3-8b")
    p = resolution.placements[0]
    assert placement_data(p) == {
        "gpuId": p.gpu.id,
        "gpuType": p.gpu.name,
        "count": p.count,
        "vramGb": p.gpu.vram_gb * p.count,
        "usdPerHour": p.usd_per_hour,
    }


def test_a_problem_names_its_model_rule_and_fix() -> None:
    problem = resolve(real_registry(), "ghost").problem
    assert problem is not None
    data = problem_data(problem, "ghost")
    assert list(data) == ["model", "rule", "message", "fix", "text"]
    assert data["model"] == "ghost" and data["rule"] == "unknown-model"
    assert data["fix"] and data["text"] == str(problem) and "Fix:" in data["text"]
    assert problem_data(problem)["model"] is None
