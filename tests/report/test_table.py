"""The terminal tables: readable at 100 columns, and every number the plan holds is shown."""

from __future__ import annotations

import pytest

from frutebox_infra.environment import Environment
from frutebox_infra.plan import FleetPlan, plan_fleet
from frutebox_infra.recipes import ServeOptions
from frutebox_infra.registry import Runtime
from frutebox_infra.report.table import catalog_table, plan_table
from frutebox_infra.report.text import table, usd
from frutebox_infra.resolver import resolve
from tests.factories import gpu, ollama_model, real_images, real_registry, registry, settings

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
    images[Runtime.OLLAMA] = images[Runtime.OLLAMA].model_copy(
        update={"tag": "an-unpinned-and-very-long-tag-name-for-the-ollama-image-that-goes-on"}
    )
    reg = registry(
        [ollama_model(LONG_ID)], (gpu("NVIDIA SOME VERY LONG GPU NAME 80GB"),), images=images
    )
    return plan_fleet(reg, settings(models=[LONG_ID]), stack="long")


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(
            lambda: plan_table(
                real_plan(
                    ["qwen-3.6-27b", "qwen3-235b-a22b", "kimi-k2.6", "sdxl-1.0", "ace-step-v1-3.5b"]
                )
            ),
            id="prod-like",
        ),
        pytest.param(lambda: plan_table(long_plan()), id="long-cells"),
        pytest.param(
            lambda: catalog_table([resolve(real_registry(), m.id) for m in real_registry().models]),
            id="catalog",
        ),
    ],
)
def test_tables_fit_in_100_columns(text) -> None:  # type: ignore[no-untyped-def]
    lines = table_lines(text())
    assert len(lines) >= 3
    assert max(len(line) for line in lines) <= 100


def test_a_truncated_cell_says_so() -> None:
    rendered = table_lines(plan_table(long_plan()))
    assert any("…" in line for line in rendered)
    assert rendered[2].startswith(LONG_ID[:6])


@pytest.mark.parametrize(
    ("cell_width", "truncated"),
    [
        pytest.param(100 - 2 - 6, False, id="exactly-100"),
        pytest.param(100 - 2 - 5, True, id="101-truncated"),
    ],
)
def test_table_width_bound_both_sides(cell_width: int, truncated: bool) -> None:
    cell = "x" * cell_width
    rendered = table(["HEAD", "SECOND"], [[cell, "yyyyyy"]])
    row = rendered.splitlines()[2]
    assert len(row) <= 100
    assert ("…" in row) is truncated


def test_plan_table_shows_the_plan_numbers() -> None:
    plan = real_plan(["qwen3-8b", "sdxl-1.0"], budgetUsdPerHour=2)
    text = plan_table(plan)
    assert f"{plan.volume.size_gb} GB" in text
    assert usd(plan.volume.usd_per_month) in text
    assert usd(plan.usd_per_hour_best) in text and usd(plan.usd_per_month_worst) in text
    assert "within" in text
    for m in plan.models:
        assert m.placement is not None
        assert m.model_id in text and m.placement.label in text


def test_over_budget_and_problems_are_shown() -> None:
    text = plan_table(real_plan(["qwen3-8b", "ghost"], budgetUsdPerHour=0.01))
    assert "OVER by" in text
    assert "PROBLEMS" in text and "unknown-model" in text and "Fix:" in text


def test_an_empty_stack_says_so() -> None:
    assert "(no models armed)" in plan_table(real_plan([]))


def test_coarse_estimates_are_marked() -> None:
    rows = table_lines(plan_table(real_plan(["sdxl-1.0", "qwen3-8b"])))
    sdxl = next(r for r in rows if r.startswith("sdxl-1.0"))
    qwen = next(r for r in rows if r.startswith("qwen3-8b"))
    assert "coarse" in sdxl and "coarse" not in qwen


def test_an_unpinned_image_is_marked() -> None:
    images = real_images()
    images[Runtime.OLLAMA] = images[Runtime.OLLAMA].model_copy(update={"tag": "latest"})
    reg = registry([ollama_model("o")], (gpu("G"),), images=images)
    text = plan_table(plan_fleet(reg, settings(models=["o"]), stack="t"))
    assert "latest (unpinned)" in text


def test_catalog_table_counts_servable_models() -> None:
    resolutions = [resolve(real_registry(), m.id, ServeOptions()) for m in real_registry().models]
    text = catalog_table(resolutions)
    servable = sum(r.servable for r in resolutions)
    assert f"{servable} of {len(resolutions)} models servable" in text
    for r in resolutions:
        assert r.model_id in text


@pytest.mark.parametrize(
    ("value", "text"),
    [pytest.param(0.17, "$0.17", id="cents"), pytest.param(14895.95, "$14,895.95", id="grouped")],
)
def test_usd(value: float, text: str) -> None:
    assert usd(value) == text


def test_the_catalog_explains_every_blocked_model_in_full_within_100_columns() -> None:
    from frutebox_infra.report.table import catalog_table
    from frutebox_infra.resolver import resolve
    from tests.factories import real_registry

    registry = real_registry()
    resolutions = [resolve(registry, m.id) for m in registry.models]
    text = catalog_table(resolutions)
    assert all(len(line) <= 100 for line in text.splitlines())
    unwrapped = " ".join(
        line.strip() for line in text.split("Why not, and the fix:")[1].splitlines()
    )
    for r in resolutions:
        if r.problem is not None:
            assert r.problem.rule in text
            assert r.problem.fix in unwrapped


def test_shared_pods_show_members_fit_sum_and_saving() -> None:
    plan = real_plan(["qwen3-8b", "llama-3.2-1b", "sdxl-1.0"], colocate=True)
    text = plan_table(plan)
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
    assert "shared pods" not in plan_table(real_plan(["qwen3-8b", "llama-3.2-1b"]))
