"""Fuzz: whatever a stack file or a registry copy says, `frutebox plan` answers in one paragraph.

Each case runs the real command line in-process on files written to a temporary directory: it
exits 0 (a plan), 1 (problems, or a file it explains) or 2 (a usage error), and an error names
the file, the key or field (or the line, for YAML syntax) and the fix. Never a traceback.
A stack-file case plans against the checkout's registry, whose validated copy the session
parses once (`real_registry`): those cases vary the stack file alone, and the registry cases
load every mangled copy from its files in full.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frutebox_infra.catalog.files import FILES, load_registry
from frutebox_infra.catalog.schema import Registry
from frutebox_infra.commands import cli
from frutebox_infra.commands.cli import main
from frutebox_infra.plumbing.paths import REGISTRY_DIR
from tests.factories import real_files, real_registry

MODEL_IDS = tuple(m.id for m in real_registry().models)
GPU_IDS = tuple(g.id for g in real_registry().gpus)
STACK_KEYS = (
    "models",
    "dataCenter",
    "budgetUsdPerHour",
    "maxFallbackPremium",
    "cloud",
    "containerDiskGb",
    "volumeHeadroom",
    "minVolumeGb",
    "minConcurrentSequences",
    "overrides",
    "specDecode",
    "runpodApiUrl",
    "healthTimeoutSeconds",
    "hfToken",
)


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str


def run_plan(stack: bytes, registry: dict[str, bytes] | None = None) -> Outcome:
    """`frutebox plan --stack fuzz` on these files, in this process; `registry`: files of the
    registry replaced in a copy of it, else the checkout's registry, parsed once a session."""
    with tempfile.TemporaryDirectory(prefix="frutebox-fuzz-") as tmp, _registry_read_once():
        stacks, reg = Path(tmp) / "stacks", Path(tmp) / "registry"
        stacks.mkdir()
        (stacks / "Pulumi.fuzz.yaml").write_bytes(stack)
        if registry is None:
            reg = REGISTRY_DIR
        else:
            texts = {n: t.encode() for n, t in real_files().texts.items()} | registry
            for name, data in texts.items():
                (reg / name).parent.mkdir(parents=True, exist_ok=True)
                (reg / name).write_bytes(data)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(
                ["plan", "--stack", "fuzz", "--format", "json", "--stacks-dir", str(stacks),
                 "--registry-dir", str(reg)]
            )  # fmt: skip
    return Outcome(code, out.getvalue(), err.getvalue())


def _registry_read_once() -> contextlib.AbstractContextManager[object]:
    """The command's registry load, with the checkout's registry served from the session's
    parse (`real_registry`, the same validation of the same files) and any other directory
    loaded from its files as the command does."""

    def load(directory: Path = REGISTRY_DIR) -> Registry:
        return real_registry() if directory == REGISTRY_DIR else load_registry(directory)

    return mock.patch.object(cli, "load_registry", load)


def assert_explained(outcome: Outcome, file: str) -> None:
    """Exit 0/1/2; an explained error is one paragraph naming the file, where, and the fix."""
    assert outcome.code in (0, 1, 2), outcome
    assert "Traceback" not in outcome.stderr + outcome.stdout
    if outcome.code == 0:
        assert json.loads(outcome.stdout)["problems"] == []
        return
    text = outcome.stderr.strip()
    assert text and "\n\n" not in text, outcome.stderr
    if outcome.stdout:  # the plan itself has problems: each comes with its fix
        problems = json.loads(outcome.stdout)["problems"]
        assert problems and all(p["fix"] for p in problems), problems
        return
    assert file in text, text
    for line in text.splitlines():
        assert "Fix" in line, line
        assert "key '" in line or "field '" in line or "line " in line or file in line, line


# ---- stack files ------------------------------------------------------------------------------

scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=10),
    st.sampled_from(("yes", "on", "0x1F", "1_000", "007", ".inf", "1e400", "true", "True")),
    st.sampled_from((*MODEL_IDS, *GPU_IDS, "EU-RO-1", "SECURE", "COMMUNITY", "1.5", "40")),
    st.just({"secure": "v1:AAAA"}),
)
junk = st.recursive(
    scalar,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
override = st.fixed_dictionaries(
    {},
    optional={
        "context": st.one_of(st.integers(1, 2 * 10**5), st.just(True), st.just("4096")),
        "concurrency": st.integers(1, 64),
        "gpu": st.sampled_from((*GPU_IDS, "H200 SXM", "NVIDIA B200")),
        "minConcurrentSequences": st.integers(1, 16),
    },
)
valid = {
    "models": st.lists(st.sampled_from((*MODEL_IDS, "nope")), unique=True, max_size=4),
    "dataCenter": st.sampled_from(("EU-RO-1", "US-TX-3", "XX-NONE-1")),
    "budgetUsdPerHour": st.one_of(st.floats(0.01, 500), st.sampled_from(("2", "40.5"))),
    "maxFallbackPremium": st.sampled_from(("1", "1.5", "3")),
    "cloud": st.sampled_from(("SECURE", "COMMUNITY")),
    "containerDiskGb": st.integers(1, 2048),
    "volumeHeadroom": st.sampled_from(("0", "0.2", "1")),
    "minVolumeGb": st.integers(10, 4096),
    "minConcurrentSequences": st.integers(1, 16),
    "overrides": st.dictionaries(st.sampled_from((*MODEL_IDS, "ghost")), override, max_size=2),
    "specDecode": st.booleans(),
    "hfToken": st.just({"secure": "v1:AAAA"}),
    "healthTimeoutSeconds": st.integers(30, 86_400),
}


@st.composite
def stack_configs(draw: st.DrawFn) -> dict[str, Any]:
    """A mostly valid config, then a few keys (maybe unknown or unprefixed) made junk."""
    config: dict[str, Any] = {
        "frutebox-infra:dataCenter": draw(valid["dataCenter"]),
        "frutebox-infra:budgetUsdPerHour": draw(valid["budgetUsdPerHour"]),
    }
    for key in draw(st.lists(st.sampled_from(sorted(valid)), unique=True, max_size=6)):
        config[f"frutebox-infra:{key}"] = draw(valid[key])
    for key in draw(st.lists(st.sampled_from((*STACK_KEYS, "surplus")), max_size=2)):
        prefix = draw(st.sampled_from(("frutebox-infra:", "", "other:", "a:b:")))
        config[f"{prefix}{key}"] = draw(junk)
    if draw(st.booleans()):
        del config[draw(st.sampled_from(sorted(config)))]
    return config


TEXT_MUTATIONS: dict[str, Callable[[bytes, Any], bytes]] = {
    "latin-1 byte": lambda b, n: b[: n % (len(b) + 1)] + b"\xe9" + b[n % (len(b) + 1) :],
    "utf-16": lambda b, n: b.decode().encode("utf-16"),
    "truncated": lambda b, n: b[: n % (len(b) + 1)],
    "deep nesting": lambda b, n: b + b"  x: " + b"[" * (n % 2000) + b"]" * (n % 2000),
    "yaml tag": lambda b, n: b.replace(b"fra:models:", b"fra:models: !!set", 1),
    "anchor": lambda b, n: b + b"  a: &x 1\n  b: *x\n",
    "duplicate key": lambda b, n: b + b"  frutebox-infra:dataCenter: EU-RO-1\n",
    "tab": lambda b, n: b.replace(b"\n  ", b"\n\t", 1),
    "yaml 1.1 boolean": lambda b, n: b + b"  frutebox-infra:specDecode: on\n",
    "a list": lambda b, n: b"- " + b,
    "null byte": lambda b, n: b + b"\x00",
    "huge": lambda b, n: b + b"  #" + b"x" * 4_000_001 + b"\n",
}  # fmt: skip


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    stack_configs(),
    st.one_of(st.none(), st.sampled_from(sorted(TEXT_MUTATIONS))),
    st.integers(0, 10**6),
)
def test_any_stack_file_plans_or_is_explained(
    config: dict[str, Any], mutation: str | None, n: int
) -> None:
    data = yaml.safe_dump({"config": config}, sort_keys=False, allow_unicode=True).encode()
    if mutation is not None:
        data = TEXT_MUTATIONS[mutation](data, n)
    assert_explained(run_plan(data), "Pulumi.fuzz.yaml")


# ---- registry copies -------------------------------------------------------------------------

REGISTRY_JUNK = (
    b"true", b"false", b"-1", b"0", b"16376", b"1e400", b".inf", b"0x10", b"'x'", b"[]", b"{}",
    b"null", b"!!set {a}", b"&a 1", b"99999999999999999999", b"1.5", b"yes",
)  # fmt: skip


@st.composite
def registry_copies(draw: st.DrawFn) -> tuple[str, bytes]:
    """One registry file with a value replaced, a line dropped, or its bytes mangled."""
    name = draw(st.sampled_from(FILES))
    lines = real_files().texts[name].encode().split(b"\n")
    index = draw(st.integers(0, len(lines) - 1))
    how = draw(st.sampled_from(("value", "drop", "latin-1", "utf-16", "truncate", "indent")))
    line = lines[index]
    if how == "value" and b": " in line:
        key, _, _ = line.partition(b": ")
        lines[index] = key + b": " + draw(st.sampled_from(REGISTRY_JUNK))
    elif how == "drop":
        del lines[index]
    elif how == "latin-1":
        lines[index] = line + b" \xe9"
    elif how == "indent":
        lines[index] = b" " + line
    data = b"\n".join(lines)
    if how == "utf-16":
        data = data.decode().encode("utf-16")
    elif how == "truncate":
        data = data[: draw(st.integers(0, len(data)))]
    return name, data


GOOD_STACK = b"config:\n  frutebox-infra:models: [qwen3-8b, sdxl-1.0, kimi-k2.6]\n" + (
    b"  frutebox-infra:dataCenter: EU-RO-1\n  frutebox-infra:budgetUsdPerHour: '100'\n"
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(registry_copies())
def test_any_registry_copy_plans_or_is_explained(copy: tuple[str, bytes]) -> None:
    name, data = copy
    assert_explained(run_plan(GOOD_STACK, {name: data}), name)


def test_the_fuzz_harness_sees_a_good_plan_and_an_explained_error() -> None:
    """The harness can fail: a good stack plans (0), a bad one is explained (1)."""
    good = run_plan(GOOD_STACK)
    assert good.code == 0, good.stderr
    bad = run_plan(GOOD_STACK.replace(b"'100'", b"true"))
    assert bad.code == 1 and "frutebox-infra:budgetUsdPerHour" in bad.stderr
    assert_explained(bad, "Pulumi.fuzz.yaml")
