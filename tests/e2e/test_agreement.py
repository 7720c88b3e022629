"""`frutebox plan` and the real `pulumi preview` give the same verdict on generated stack files.

The files aim at where two readers of a stack file could differ: Pulumi's typed config
(`true` for a string key, "yes" or 1 for a boolean, digits as text for an integer), YAML 1.1
words and number forms, tags, keys with and without the project's namespace, encrypted or
empty values. Each case costs a preview (about a second), so the sample is small.
"""

from __future__ import annotations

import contextlib
import io
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from frutebox_infra.commands.cli import main
from tests.e2e.project import PulumiProject

pytestmark = pytest.mark.engine

BASE = {
    "frutebox-infra:models": "[qwen3-8b]",
    "frutebox-infra:dataCenter": "EU-RO-1",
    "frutebox-infra:budgetUsdPerHour": '"5"',
}
EDGES = {
    "frutebox-infra:budgetUsdPerHour": ("true", '"3"', "3", "3.5", '"1e2"', "0x10", "null", "1_0"),
    "frutebox-infra:specDecode": ("yes", '"yes"', "1", '"true"', "True", '"True"', "false", "on"),
    "frutebox-infra:containerDiskGb": ('"40"', "40.0", "40", "true", '"4e1"', "007", "1e400"),
    "frutebox-infra:models": ("!!set {qwen3-8b}", "[qwen3-8b, qwen3-8b]", "qwen3-8b", "[1]", "[]"),
    "frutebox-infra:overrides": ("{qwen3-8b: {context: true}}", "{qwen3-8b: {context: 2048}}",
                                 "[]", "{qwen3-8b: {concurrency: 2, minConcurrentSequences: 3}}"),
    "frutebox-infra:healthTimeoutSeconds": ("1800", '"1800"', "100000000000000000000", "-5"),
    "budgetUsdPerHour": ('"3"', "true"),
    "frutebox-infra:config:cloud": ("COMMUNITY", "SECURE"),
    "frutebox-infra:modles": ("[qwen3-8b]",),
    "other-project:whatever": ("1", "{a: [b]}"),
}  # fmt: skip


@st.composite
def stack_texts(draw: st.DrawFn) -> str:
    """A valid stack file with one to three keys set to values at the edge of the rules."""
    config = dict(BASE)
    for key in draw(st.lists(st.sampled_from(sorted(EDGES)), min_size=1, max_size=3, unique=True)):
        config[key] = draw(st.sampled_from(EDGES[key]))
    if draw(st.booleans()) and "budgetUsdPerHour" in config:
        del config["frutebox-infra:budgetUsdPerHour"]  # only the unprefixed spelling left
    return stack_text(config)


def stack_text(config: dict[str, str]) -> str:
    return "config:\n" + "".join(f"  {key}: {value}\n" for key, value in config.items())


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, toolchain: Path) -> Iterator[PulumiProject]:
    yield PulumiProject.create(tmp_path_factory.mktemp("agreement"))


_names = itertools.count()


def plan_verdict(project: PulumiProject, stack: str) -> tuple[bool, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["plan", "--stack", stack, "--stacks-dir", str(project.root / "stacks")])
    assert code in (0, 1, 2) and "Traceback" not in err.getvalue()
    return code == 0, err.getvalue()


@settings(
    max_examples=10,
    deadline=None,
    phases=[Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(text=stack_texts())
def test_plan_and_preview_agree_on_generated_stack_files(project: PulumiProject, text: str) -> None:
    stack = f"agree{next(_names)}"
    # `pulumi stack init` rewrites the file it finds (as Pulumi's own YAML), so the stack is
    # created from a valid file first and the hand-written text replaces it afterwards, as
    # when a user edits the stack file of an existing stack.
    project.write_stack_text(stack, stack_text(BASE))
    project.init(stack)
    salt = project.stack_path(stack).read_text().split("encryptionsalt:", 1)[1].strip()
    project.write_stack_text(stack, f"{text}encryptionsalt: {salt}\n")
    preview = project.preview(stack)
    assert "Traceback" not in preview.diagnostics + preview.stderr
    planned_ok, plan_errors = plan_verdict(project, stack)
    stack_file = project.stack_path(stack).read_text()
    assert planned_ok == (preview.code == 0), (
        f"plan {'accepts' if planned_ok else 'refuses'} and preview"
        f" {'accepts' if preview.code == 0 else 'refuses'}:\n{stack_file}\n"
        f"plan: {plan_errors}\npreview: {preview.diagnostics}\n{preview.stderr}"
    )
