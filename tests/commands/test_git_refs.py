"""Reading a stack's config at a git ref: what is there, what is not, and errors naming the ref."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from frutebox_infra.catalog.files import ENGINE_OPTIONS_DIR, FILES
from frutebox_infra.commands.git_refs import (
    WORK_TREE,
    git_toplevel,
    plan_config,
    read_config_at,
    stack_path,
)
from frutebox_infra.plumbing.errors import ConfigError, UsageError
from frutebox_infra.stack.environment import Environment
from tests.factories import ROOT
from tests.git_repo import Repo


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    r = Repo(tmp_path / "repo")
    (r.path / "stacks").mkdir(parents=True)
    (r.path / "stacks" / "Pulumi.dev.yaml").write_text(
        (ROOT / "stacks" / "Pulumi.dev.yaml").read_text()
    )
    r.git("init", "-q", "-b", "main")
    r.commit("stack only")
    (r.path / "registry").mkdir()
    for name in FILES:
        (r.path / "registry" / name).write_text((ROOT / "registry" / name).read_text())
    r.commit("registry")
    return r


def test_a_ref_gives_the_stack_and_the_registry_as_they_were(repo: Repo) -> None:
    (repo.path / "stacks" / "Pulumi.dev.yaml").write_text("config: {}\n")  # work tree only

    at_head = read_config_at(repo.path, "HEAD", "dev")
    in_tree = read_config_at(repo.path, None, "dev")

    assert at_head is not None and in_tree is not None
    assert at_head.label == "HEAD" and in_tree.label == WORK_TREE
    assert at_head.stack_text == (ROOT / "stacks" / "Pulumi.dev.yaml").read_text()
    assert in_tree.stack_text == "config: {}\n"
    assert sorted(at_head.registry.texts) == sorted(FILES)


def test_a_stack_absent_at_a_ref_is_none_and_a_partial_registry_names_the_ref(
    repo: Repo,
) -> None:
    assert read_config_at(repo.path, "HEAD", "prod") is None
    assert read_config_at(repo.path, None, "prod") is None
    first = read_config_at(repo.path, "HEAD~1", "dev")
    assert first is not None and first.registry.texts == {}
    with pytest.raises(ConfigError, match=r"HEAD~1:registry: .*missing"):
        plan_config(first, "dev", Environment())


def test_the_planned_side_is_the_planners_plan(repo: Repo) -> None:
    config = read_config_at(repo.path, "HEAD", "dev")
    assert config is not None
    plan = plan_config(config, "dev", Environment())
    assert plan.stack == "dev" and plan.models


@pytest.mark.parametrize("stack", ["../dev", "dev/x", "", "a b"])
def test_a_stack_name_cannot_leave_the_stacks_directory(stack: str) -> None:
    with pytest.raises(UsageError, match="is not a stack name"):
        stack_path(stack)


def test_errors_name_the_ref_and_the_fix(repo: Repo, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"git ref 'nope' .*fetch-depth: 0"):
        read_config_at(repo.path, "nope", "dev")
    outside = tmp_path / "outside"
    outside.mkdir()
    with pytest.raises(UsageError, match="not inside a git repository"):
        git_toplevel(outside)
    (repo.path / "stacks" / "Pulumi.dev.yaml").write_bytes(b"config: {\xff}\n")
    repo.commit("not utf-8")
    with pytest.raises(ConfigError, match=r"HEAD:stacks/Pulumi.dev.yaml: line 1, .* is not UTF-8"):
        read_config_at(repo.path, "HEAD", "dev")


def test_the_top_level_is_found_from_a_subdirectory(repo: Repo) -> None:
    top = subprocess.run(["git", "-C", str(repo.path), "rev-parse", "--show-toplevel"],
                         capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    assert git_toplevel(repo.path / "stacks") == Path(top)


def test_engine_facts_are_read_at_a_ref_and_a_ref_before_them_plans_unchecked(repo: Repo) -> None:
    facts_dir = repo.path / "registry" / ENGINE_OPTIONS_DIR
    facts_dir.mkdir()
    for path in sorted((ROOT / "registry" / ENGINE_OPTIONS_DIR).glob("*.json")):
        (facts_dir / path.name).write_text(path.read_text())
    repo.commit("engine facts")
    facts = sorted(f"{ENGINE_OPTIONS_DIR}/{p.name}" for p in facts_dir.glob("*.json"))
    assert len(facts) == 5

    for ref in ("HEAD", None):
        config = read_config_at(repo.path, ref, "dev")
        assert config is not None
        assert sorted(config.registry.texts) == sorted([*FILES, *facts])
        plan = plan_config(config, "dev", Environment())
        assert not [p for p in plan.problems if p.rule == "launch-rejected"]

    before = read_config_at(repo.path, "HEAD~1", "dev")
    assert before is not None and sorted(before.registry.texts) == sorted(FILES)
    assert plan_config(before, "dev", Environment()).models  # plans, without the check
