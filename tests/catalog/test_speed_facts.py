"""registry/speed.yaml's schema, and its figures' claim to be fitted on the bench's named rows."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from frutebox_infra.catalog.schema import Runtime
from frutebox_infra.catalog.speed_facts import EngineSpeed, Parameters, SpeedFacts
from frutebox_infra.plumbing.validation import validate
from tests.factories import ROOT, real_registry

FIGURES: dict[str, Any] = {
    "bandwidth_efficiency": 0.8,
    "compute_efficiency": 0.5,
    "step_overhead_us": 100,
    "layer_overhead_us": 10,
    "fitted_on": ["row"],
    "source": "test",
}
LINKS: dict[str, Any] = {
    "pcie": {
        "collective_latency_us": 30,
        "link_efficiency": 0.5,
        "fitted_on": ["row"],
        "source": "t",
    }
}


def measurement_rows() -> list[dict[str, Any]]:
    doc = yaml.safe_load((ROOT / "bench" / "speed_measurements.yaml").read_text(encoding="utf-8"))
    rows: list[dict[str, Any]] = doc["rows"]
    return rows


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        pytest.param({**FIGURES, "compute_efficiency": None}, "compute_efficiency", id="no-figure"),
        pytest.param({**FIGURES, "fitted_on": []}, "fitted_on", id="unfitted"),
        pytest.param({"kernels_of": "llamacpp", **FIGURES}, "borrows", id="alias-with-figures"),
        pytest.param({**FIGURES, "bandwidth_efficiency": 1.2}, "less than or equal", id="over-1"),
    ],
)
def test_an_engine_has_its_figures_or_borrows_anothers(entry: dict[str, Any], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        validate(EngineSpeed, entry)


def test_the_two_kinds_of_engine_entry_are_valid() -> None:
    # The control for the table above.
    assert validate(EngineSpeed, FIGURES).kernels_of is None
    alias = validate(EngineSpeed, {"kernels_of": "llamacpp", "source": "t"})
    assert alias.kernels_of is Runtime.LLAMACPP


@pytest.mark.parametrize(
    "engines",
    [
        pytest.param({"llamacpp": FIGURES}, id="own-figures"),
        pytest.param(
            {"llamacpp": FIGURES, "ollama": {"kernels_of": "llamacpp", "source": "t"}},
            id="alias-resolves",
        ),
    ],
)
def test_an_alias_runs_at_the_figures_of_the_engine_it_names(engines: dict[str, Any]) -> None:
    facts = validate(SpeedFacts, {"engines": engines, "links": LINKS})
    assert facts.engine(Runtime.OLLAMA) == (
        facts.engine(Runtime.LLAMACPP) if "ollama" in engines else None
    )
    assert facts.engine(Runtime.LLAMACPP) is not None
    assert facts.engine(Runtime.SGLANG) is None


def test_an_alias_to_an_engine_without_figures_is_refused() -> None:
    engines = {"ollama": {"kernels_of": "llamacpp", "source": "t"}}
    with pytest.raises(ValidationError, match="ollama -> llamacpp"):
        validate(SpeedFacts, {"engines": engines, "links": LINKS})


def test_no_acceptance_assumption_for_no_speculation() -> None:
    spec = {"none": {"token_acceptance": 0.5, "draft_step_cost": 0.1, "source": "t"}}
    with pytest.raises(ValidationError, match="'none'"):
        validate(SpeedFacts, {"engines": {}, "links": LINKS, "speculative": spec})


@pytest.mark.parametrize(
    ("active", "ok"),
    [pytest.param(22, True, id="below-total"), pytest.param(236, False, id="above-total")],
)
def test_active_parameters_are_within_the_total(active: float, ok: bool) -> None:
    data = {"total_billions": 235, "active_billions": active, "source": "t"}
    if ok:
        assert validate(Parameters, data).active == active * 1e9
    else:
        with pytest.raises(ValidationError, match="more than total_billions"):
            validate(Parameters, data)


def test_every_fitted_figure_names_exactly_the_rows_it_was_fitted_on() -> None:
    """speed.yaml says which measurements fitted each figure; those rows are the engine's own
    (or, for a link, every multi-GPU row over it) in bench/speed_measurements.yaml."""
    facts = real_registry().speed
    assert facts is not None
    rows = measurement_rows()
    kinds = {g.name: g.speed.interconnect.kind for g in real_registry().gpus if g.speed}
    expected: dict[str, set[str]] = {}
    for row in rows:
        expected.setdefault(f"engines.{row['engine']}", set()).add(row["id"])
        if row["gpu_count"] > 1:
            expected.setdefault(f"links.{kinds[row['gpu']]}", set()).add(row["id"])
    assert {key: set(ids) for key, ids in facts.fitted_on.items()} == expected


def test_every_measurement_names_its_source_and_what_it_reports() -> None:
    rows = measurement_rows()
    assert len(rows) >= 30
    assert len({r["id"] for r in rows}) == len(rows)
    for row in rows:
        assert row["source"] and row["reports"], row["id"]
    assert len({r["gpu"] for r in rows}) >= 5
    assert len({r["engine"] for r in rows}) >= 3
    assert {r["concurrency"] == 1 for r in rows} == {True, False}
