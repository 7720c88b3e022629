"""`frutebox diff`: the cost/fit difference of a config change between two git refs.

The git tests build throwaway repositories holding the project's registry and dev stack file,
commit a change, and compare; expected numbers come from planning the same files directly, so
a change to the catalog's prices cannot break them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from frutebox_infra.catalog.files import FILES, load_registry
from frutebox_infra.commands import cli
from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.planner.resolver import resolve
from frutebox_infra.report.diff_report import fit_text
from frutebox_infra.stack.stack_file import parse_settings, read_stack_config
from frutebox_infra.views.diff import Change, diff_plans, snapshot
from tests.factories import ROOT, real_registry, workflow_diff_command
from tests.git_repo import Config, Repo


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    r = Repo(tmp_path / "repo")
    (r.path / "registry").mkdir(parents=True)
    (r.path / "stacks").mkdir()
    for name in FILES:
        shutil.copy(ROOT / "registry" / name, r.path / "registry" / name)
    shutil.copy(ROOT / "stacks" / "Pulumi.dev.yaml", r.stack_file())
    r.git("init", "-q", "-b", "main")
    r.commit("base")
    return r


def run_diff(repo: Path, base: str, head: str | None = None, *, stack: str = "dev",
             fmt: str = "table", debug: bool = False) -> int:  # fmt: skip
    """`frutebox diff` as a user runs it, from inside the checkout `repo`."""
    argv = [*(["--debug"] if debug else []), "diff", f"--base={base}",
            *([f"--head={head}"] if head else []), "--stack", stack, "--format", fmt]  # fmt: skip
    cwd = Path.cwd()
    os.chdir(repo)
    try:
        return cli.main(argv)
    finally:
        os.chdir(cwd)


def diff_json(
    repo: Repo, capsys: pytest.CaptureFixture[str], base: str, head: str | None = None
) -> tuple[int, dict[str, Any]]:
    code = run_diff(repo.path, base, head, fmt="json")
    return code, json.loads(capsys.readouterr().out)


def cheapest_unarmed(repo: Repo) -> str:
    """A servable model the stack does not arm yet, the cheapest one: arming it stays in budget."""
    registry = load_registry(repo.path / "registry")
    armed = set(repo.config()["models"])
    servable = [r for r in (resolve(registry, m.id) for m in registry.models)
                if r.servable and r.model_id not in armed]  # fmt: skip
    return min(servable, key=lambda r: r.placements[0].usd_per_hour).model_id


def arm(model_id: str) -> Callable[[Config], None]:
    return lambda c: c.__setitem__("models", [*c["models"], model_id])


def by_id(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["id"]: m for m in data["models"]}


# --- through git -------------------------------------------------------------------------


def test_arming_a_model_shows_it_added_with_its_cost(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    base = repo.git("rev-parse", "HEAD")
    before = repo.plan()
    model = cheapest_unarmed(repo)
    repo.edit(arm(model))
    head = repo.commit(f"arm {model}")
    after = repo.plan()
    planned = after.model(model)
    assert planned is not None and planned.placement is not None

    code, data = diff_json(repo, capsys, base, head)

    assert code == 0
    assert [m["id"] for m in data["models"]] == [model]
    added = data["models"][0]
    assert added["change"] == "added" and added["before"] is None
    assert added["after"]["gpuType"] == planned.placement.gpu.name
    assert added["after"]["gpuCount"] == planned.placement.count
    assert added["usdPerHourBest"]["delta"] == round(planned.usd_per_hour_best, 2) > 0
    assert added["usdPerHourWorst"]["delta"] == round(planned.usd_per_hour_worst, 2)
    cost = data["cost"]["usdPerHourBest"]
    assert (cost["before"], cost["after"]) == (before.usd_per_hour_best, after.usd_per_hour_best)
    assert cost["delta"] == round(after.usd_per_hour_best - before.usd_per_hour_best, 2)
    assert data["unchanged"] == sorted(repo.config()["models"][:-1])
    assert data["ok"] is True and data["budget"]["withinBudget"] is True


def test_reverting_the_arming_commit_shows_the_exact_inverse(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    base = repo.git("rev-parse", "HEAD")
    repo.edit(arm(cheapest_unarmed(repo)))
    armed = repo.commit("arm")
    repo.git("revert", "--no-edit", armed)
    reverted = repo.git("rev-parse", "HEAD")

    _, forward = diff_json(repo, capsys, base, armed)
    _, back = diff_json(repo, capsys, armed, reverted)

    inverse = {Change.ADDED: Change.REMOVED, Change.REMOVED: Change.ADDED}
    assert by_id(forward).keys() == by_id(back).keys() != set()
    for model_id, f in by_id(forward).items():
        b = by_id(back)[model_id]
        assert b["change"] == inverse[Change(f["change"])]
        assert (b["before"], b["after"]) == (f["after"], f["before"])
        for key in ("usdPerHourBest", "usdPerHourWorst"):
            assert b[key]["delta"] == -f[key]["delta"]
    for key in ("usdPerHourBest", "usdPerHourWorst"):
        f_cost, b_cost = forward["cost"][key], back["cost"][key]
        assert (b_cost["before"], b_cost["after"]) == (f_cost["after"], f_cost["before"])
        assert b_cost["delta"] == -f_cost["delta"]
    # What a revert does not undo: the volume grew and keeps its size (and its bill).
    f_vol, b_vol = forward["volume"]["sizeGb"], back["volume"]["sizeGb"]
    assert f_vol["delta"] > 0
    assert b_vol == {"before": f_vol["after"], "after": f_vol["after"], "delta": 0}
    assert back["volume"]["shrinkIgnored"] is True
    volume_usd = forward["volume"]["usdPerMonth"]["delta"]
    for key in ("usdPerMonthBest", "usdPerMonthWorst"):
        undone = -forward["cost"][key]["delta"] + volume_usd
        assert back["cost"][key]["delta"] == pytest.approx(undone, abs=0.011)


def test_changing_a_models_context_shows_the_fit_change(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    base = repo.git("rev-parse", "HEAD")
    before = repo.plan()
    target = next(m for m in before.models
                  if m.placement and m.placement.fit.full_context_sequences)  # fmt: skip
    assert target.resolution.serving is not None and target.placement is not None
    context = target.resolution.serving.context_tokens // 2
    override = {target.model_id: {"context": context}}
    repo.edit(lambda c: c.setdefault("overrides", {}).update(override))
    head = repo.commit("halve the context")
    after_model = repo.plan().model(target.model_id)
    assert after_model is not None and after_model.placement is not None

    code, data = diff_json(repo, capsys, base, head)

    assert code == 0
    changed = by_id(data)[target.model_id]
    assert changed["change"] == "changed"
    assert {"contextTokens", "fullContextSequences"} <= set(changed["changedFields"])
    assert changed["before"]["contextTokens"] == context * 2
    assert changed["after"]["contextTokens"] == context
    seqs_before = changed["before"]["fullContextSequences"]
    seqs_after = changed["after"]["fullContextSequences"]
    assert seqs_before == round(target.placement.fit.full_context_sequences or 0, 2)
    assert seqs_after == round(after_model.placement.fit.full_context_sequences or 0, 2)
    assert seqs_after > seqs_before

    run_diff(repo.path, base, head, fmt="markdown")
    markdown = capsys.readouterr().out
    row = next(line for line in markdown.splitlines() if f"`{target.model_id}`" in line)
    assert f"| {context * 2} → {context} |" in row
    assert f"| {fit_text(snapshot(target))} → {fit_text(snapshot(after_model))} |" in row


def test_raising_the_speed_floor_shows_the_speed_and_cost_per_token_change(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    base = repo.git("rev-parse", "HEAD")
    before = repo.plan().model("qwen3-8b")
    repo.edit(lambda c: c.__setitem__("minDecodeTokensPerSecond", "30"))
    head = repo.commit("a 30 tok/s floor")
    after = repo.plan().model("qwen3-8b")
    assert before is not None and before.placement is not None
    assert after is not None and after.placement is not None
    old, new = snapshot(before), snapshot(after)
    # 1x RTX A4000 decodes qwen3-8b below 30 tok/s per stream at 4 streams: it is refused.
    assert old.decode_tok_s_per_stream is not None and old.decode_tok_s_per_stream < 30
    assert new.decode_tok_s_per_stream is not None and new.decode_tok_s_per_stream >= 30
    assert old.gpu != new.gpu

    code, data = diff_json(repo, capsys, base, head)

    assert code == 0
    changed = by_id(data)["qwen3-8b"]
    speed_keys = {"decodeTokensPerSecondPerStream", "decodeTokensPerSecondAggregate",
                  "usdPerMillionOutputTokens"}  # fmt: skip
    assert speed_keys | {"gpuType"} <= set(changed["changedFields"])
    assert changed["before"]["decodeTokensPerSecondPerStream"] == old.decode_tok_s_per_stream
    assert changed["after"]["decodeTokensPerSecondPerStream"] == new.decode_tok_s_per_stream
    assert changed["after"]["usdPerMillionOutputTokens"] == new.usd_per_million_output_tokens

    run_diff(repo.path, base, head, fmt="markdown")
    row = next(line for line in capsys.readouterr().out.splitlines() if "`qwen3-8b`" in line)
    assert f"| {old.decode_tok_s_per_stream:.1f} → {new.decode_tok_s_per_stream:.1f} |" in row
    assert (f"| ${old.usd_per_million_output_tokens:.2f} →"
            f" ${new.usd_per_million_output_tokens:.2f} |") in row  # fmt: skip


def test_an_over_budget_change_is_flagged_and_exits_1(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    # A budget just above today's worst case: arming anything crosses it.
    worst = repo.plan().usd_per_hour_worst
    repo.edit(lambda c: c.__setitem__("budgetUsdPerHour", round(worst + 0.01, 2)))
    base = repo.commit("tight budget")
    repo.edit(arm(cheapest_unarmed(repo)))
    head = repo.commit("arm one more")

    code = run_diff(repo.path, base, head, fmt="markdown")

    out, err = capsys.readouterr()
    assert code == 1
    assert out.splitlines()[0] == "### frutebox diff: `dev` — ❌ over budget"
    assert "[over-budget]" in out and "OVER by" in out
    assert "problem(s)" in err and "pulumi preview" in err
    code, data = diff_json(repo, capsys, base, head)
    assert code == 1 and data["ok"] is False and data["budget"]["withinBudget"] is False
    assert [p["rule"] for p in data["problems"]] == ["over-budget"]


def test_a_model_that_cannot_be_served_after_the_change_fails_the_check(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    base = repo.git("rev-parse", "HEAD")
    repo.edit(arm("no-such-model"))
    head = repo.commit("typo")

    code, data = diff_json(repo, capsys, base, head)

    assert code == 1
    added = by_id(data)["no-such-model"]
    assert added["change"] == "added" and added["after"]["gpuType"] is None
    assert added["after"]["problems"] and data["problems"]


@pytest.mark.parametrize("ref", ["no-such-branch", "origin/main", "-rf", "HEAD~5"])
def test_a_bad_ref_exits_2_naming_the_ref(
    repo: Repo, capsys: pytest.CaptureFixture[str], ref: str
) -> None:
    code = run_diff(repo.path, ref, fmt="markdown")

    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert f"git ref '{ref}' does not name a commit" in err
    assert "fetch-depth: 0" in err and "Traceback" not in err


def test_a_bad_head_ref_exits_2_too(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    code = run_diff(repo.path, "HEAD", "nope")
    assert code == 2 and "git ref 'nope'" in capsys.readouterr().err


def test_a_stack_missing_at_both_refs_or_a_bad_format_exits_2(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_diff(repo.path, "HEAD", stack="staging") == 2
    assert "stacks/Pulumi.staging.yaml" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        run_diff(repo.path, "HEAD", fmt="html")
    assert exc.value.code == 2 and "invalid choice: 'html'" in capsys.readouterr().err
    assert run_diff(repo.path, "HEAD", stack="../dev", fmt="json") == 2
    assert "'../dev' is not a stack name" in capsys.readouterr().err


def test_debug_shows_the_traceback_of_a_diff_error(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_diff(repo.path, "nope") == 2
    assert "Traceback" not in capsys.readouterr().err
    assert run_diff(repo.path, "nope", debug=True) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "UsageError" in err and "git ref 'nope'" in err


def test_outside_a_git_repository_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_diff(tmp_path, "HEAD")
    assert code == 2 and "not inside a git repository" in capsys.readouterr().err


def test_malformed_yaml_at_the_head_names_the_ref_and_file(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    repo.stack_file().write_text("config:\n  frutebox-infra:models: [qwen3-8b\n")
    head = repo.commit("broken")

    code = run_diff(repo.path, "HEAD~1", head)

    err = capsys.readouterr().err
    assert code == 1
    assert f"{head}:stacks/Pulumi.dev.yaml" in err and "Traceback" not in err


def test_a_new_stack_is_everything_added(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    base = repo.git("rev-parse", "HEAD")
    repo.write({**repo.config(), "budgetUsdPerHour": 5}, stack="staging")
    head = repo.commit("new stack")
    plan = repo.plan("staging")

    code = run_diff(repo.path, base, head, stack="staging", fmt="json")

    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert (data["baseExists"], data["headExists"]) == (False, True)
    assert {m["id"]: m["change"] for m in data["models"]} == {
        m.model_id: "added" for m in plan.models
    }
    assert data["cost"]["usdPerMonthBest"] == {
        "before": 0.0, "after": plan.usd_per_month_best, "delta": plan.usd_per_month_best
    }  # fmt: skip
    assert data["volume"]["sizeGb"]["after"] == plan.volume.size_gb


def test_a_removed_stack_is_everything_removed_and_keeps_its_volume(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = repo.plan()
    repo.stack_file().unlink()
    head = repo.commit("remove dev")

    code, data = diff_json(repo, capsys, "HEAD~1", head)

    assert code == 0
    assert {m["change"] for m in data["models"]} == {"removed"}
    assert len(data["models"]) == len(plan.models)
    assert data["cost"]["usdPerHourBest"]["after"] == 0
    assert data["volume"]["sizeGb"]["after"] == plan.volume.size_gb
    assert data["budget"]["withinBudget"] is None and data["headExists"] is False


def test_the_default_head_is_the_work_tree(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    model = cheapest_unarmed(repo)
    repo.edit(arm(model))  # not committed

    code = run_diff(repo.path, "HEAD")

    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("frutebox diff: stack dev, HEAD → work tree: ok, within budget")
    assert any(line.startswith(f"added   {model}") for line in out.splitlines())


def test_the_workflow_diff_command_runs_as_a_subprocess(repo: Repo) -> None:
    """The exact command line preview.yml runs, with the env the workflow step sets."""
    command = workflow_diff_command()
    repo.git("update-ref", "refs/remotes/origin/main", "HEAD")
    model = cheapest_unarmed(repo)
    repo.edit(arm(model))
    repo.commit("arm")
    env = {**repo.env, "BASE_REF": "main", "STACK": "dev",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}  # fmt: skip

    done = subprocess.run(["bash", "-c", command], cwd=repo.path, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("### frutebox diff: `dev` — ✅")
    assert "`origin/main` → `work tree`" in done.stdout
    assert f"| added | `{model}` |" in done.stdout


# --- the pure comparison -----------------------------------------------------------------


def dev_plan(**config: Any) -> FleetPlan:
    values = read_stack_config(ROOT / "stacks" / "Pulumi.dev.yaml") | config
    return plan_fleet(real_registry(), parse_settings(values, where="test"), stack="dev")


def test_a_plan_against_itself_has_no_changes() -> None:
    plan = dev_plan()
    d = diff_plans(plan, plan)
    assert d.changes == () and len(d.unchanged) == len(plan.models)
    assert all(a.delta == 0 for a in (d.usd_per_hour_best, d.usd_per_month_worst))
    assert not d.volume_shrink_ignored and d.ok


def test_diff_plans_is_antisymmetric_for_models_and_hourly_cost() -> None:
    a, b = dev_plan(), dev_plan(models=["qwen3-8b"], budgetUsdPerHour=1)
    forward, back = diff_plans(a, b), diff_plans(b, a)
    assert [m.model_id for m in forward.models] == [m.model_id for m in back.models]
    for f, r in zip(forward.models, back.models, strict=True):
        assert (r.before, r.after) == (f.after, f.before)
        assert r.usd_per_hour_best.delta == -f.usd_per_hour_best.delta
    assert back.usd_per_hour_worst.delta == -forward.usd_per_hour_worst.delta
    assert back.budget_usd_per_hour.delta == -forward.budget_usd_per_hour.delta


def test_no_side_is_empty_and_none_to_plan_is_all_added() -> None:
    plan = dev_plan()
    d = diff_plans(None, plan)
    assert {m.change for m in d.models} == {Change.ADDED}
    assert not d.base_exists and d.head_exists and d.stack == "dev"
    empty = diff_plans(None, None)
    assert empty.models == () and empty.ok and empty.within_budget is None
