"""Stack settings: bad config is a ConfigError naming file, key and fix; never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from frutebox_infra.errors import ConfigError
from frutebox_infra.plan import FleetPlan, plan_fleet
from frutebox_infra.registry import Cloud
from frutebox_infra.report.data import plan_data
from frutebox_infra.report.markdown import plan_markdown
from frutebox_infra.report.table import plan_table
from frutebox_infra.settings import (
    StackSettings,
    load_settings,
    parse_settings,
    read_stack_config,
    stack_config_from_text,
)
from tests.factories import ROOT, real_registry, stack_yaml

WHERE = "stacks/Pulumi.test.yaml"
BASE = {"dataCenter": "EU-RO-1", "budgetUsdPerHour": 5}


def error_for(**config: Any) -> str:
    values = dict(BASE)
    values.update(config)
    with pytest.raises(ConfigError) as err:
        parse_settings(values, where=WHERE)
    return str(err.value)


def test_a_minimal_stack_has_the_documented_defaults() -> None:
    s = parse_settings(BASE, where=WHERE)
    assert s.models == ()
    assert s.cloud is Cloud.SECURE
    assert s.max_fallback_premium == 1.5
    assert s.spec_decode is True
    assert s.hf_token_configured is False


def test_string_numbers_from_pulumi_config_are_accepted() -> None:
    # `pulumi config set` writes strings; the dev stack quotes its numbers.
    s = parse_settings(
        {
            "dataCenter": "EU-RO-1",
            "budgetUsdPerHour": "2",
            "maxFallbackPremium": "1.5",
            "containerDiskGb": "40",
        },
        where=WHERE,
    )
    assert (s.budget_usd_per_hour, s.max_fallback_premium, s.container_disk_gb) == (2.0, 1.5, 40)


BAD = (
    pytest.param({"budgetUsdPerHour": -1}, "budgetUsdPerHour", id="negative-budget"),
    pytest.param({"budgetUsdPerHour": 0}, "budgetUsdPerHour", id="zero-budget"),
    pytest.param({"budgetUsdPerHour": "two"}, "budgetUsdPerHour", id="budget-not-a-number"),
    # .inf is a YAML float; it would print as `Infinity`, which is not JSON.
    pytest.param({"budgetUsdPerHour": float("inf")}, "budgetUsdPerHour", id="budget-infinite"),
    pytest.param({"containerDiskGb": "lots"}, "containerDiskGb", id="disk-not-a-number"),
    pytest.param({"containerDiskGb": 0}, "containerDiskGb", id="disk-zero"),
    pytest.param({"volumeHeadroom": -0.1}, "volumeHeadroom", id="negative-headroom"),
    pytest.param({"minVolumeGb": 5}, "minVolumeGb", id="volume-below-runpod-minimum"),
    pytest.param({"minVolumeGb": 5000}, "minVolumeGb", id="volume-above-runpod-maximum"),
    pytest.param({"maxFallbackPremium": 0.9}, "maxFallbackPremium", id="premium-below-one"),
    pytest.param({"specDecode": "maybe"}, "specDecode", id="spec-decode-not-a-bool"),
    pytest.param({"cloud": "PRIVATE"}, "cloud", id="unknown-cloud"),
    pytest.param({"models": "qwen3-8b"}, "models", id="models-as-a-string"),
    pytest.param({"models": ["qwen3-8b", "qwen3-8b"]}, "models", id="armed-twice"),
    pytest.param({"models": [1, 2]}, "models", id="models-not-strings"),
    pytest.param({"overrides": {"qwen3-8b": {"ctx": 1}}}, "overrides", id="override-unknown-key"),
    pytest.param(
        {"overrides": {"qwen3-8b": {"context": -5}}}, "overrides", id="override-negative-context"
    ),
    pytest.param({"overrides": ["qwen3-8b"]}, "overrides", id="overrides-not-a-map"),
    pytest.param({"modles": ["qwen3-8b"]}, "modles", id="unknown-key"),
)


@pytest.mark.parametrize(("config", "key"), BAD)
def test_bad_config_names_file_key_and_fix(config: dict[str, Any], key: str) -> None:
    message = error_for(**config)
    assert WHERE in message
    assert f"frutebox-infra:{key}" in message
    assert "fix" in message.lower(), f"no fix offered: {message}"


@pytest.mark.parametrize(
    "missing",
    [pytest.param("dataCenter", id="data-centre"), pytest.param("budgetUsdPerHour", id="budget")],
)
def test_required_keys_are_named_when_missing(missing: str) -> None:
    values = {k: v for k, v in BASE.items() if k != missing}
    with pytest.raises(ConfigError) as err:
        parse_settings(values, where=WHERE)
    assert f"frutebox-infra:{missing}" in str(err.value)
    assert "fix" in str(err.value).lower()


def test_duplicates_are_named() -> None:
    assert "qwen3-8b" in error_for(models=["qwen3-8b", "sdxl-1.0", "qwen3-8b"])


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        pytest.param(0.01, True, id="just-positive"),
        pytest.param(0.0, False, id="zero"),
    ],
)
def test_budget_bound_both_sides(value: float, ok: bool) -> None:
    config = {**BASE, "budgetUsdPerHour": value}
    if ok:
        assert parse_settings(config, where=WHERE).budget_usd_per_hour == value
    else:
        with pytest.raises(ConfigError):
            parse_settings(config, where=WHERE)


@pytest.mark.parametrize(
    ("value", "ok"),
    [pytest.param(1.0, True, id="one"), pytest.param(0.99, False, id="below-one")],
)
def test_fallback_premium_bound_both_sides(value: float, ok: bool) -> None:
    config = {**BASE, "maxFallbackPremium": value}
    if ok:
        assert parse_settings(config, where=WHERE).max_fallback_premium == value
    else:
        with pytest.raises(ConfigError):
            parse_settings(config, where=WHERE)


def test_secret_token_is_only_noticed_never_kept(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.s.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "config": {
                    "frutebox-infra:dataCenter": "EU-RO-1",
                    "frutebox-infra:budgetUsdPerHour": 3,
                    "frutebox-infra:hfToken": {"secure": "v1:AAAA"},
                    "frutebox-infra:runpodApiKey": {"secure": "v1:BBBB"},
                    "other-project:budgetUsdPerHour": "ignored",
                }
            }
        )
    )
    s = load_settings(path)
    assert s.hf_token_configured is True
    assert "v1:AAAA" not in s.model_dump_json() and "v1:BBBB" not in s.model_dump_json()


def test_a_missing_stack_file_names_it_and_the_stacks_that_exist(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.dev.yaml").write_text("config: {}\n")
    with pytest.raises(ConfigError) as err:
        read_stack_config(tmp_path / "Pulumi.nope.yaml")
    assert "Pulumi.nope.yaml" in str(err.value) and "dev" in str(err.value)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("config: [a, b]\n", id="config-a-list"),
        pytest.param("- just\n- a list\n", id="top-level-list"),
        pytest.param("config:\n  frutebox-infra:models: [a\n", id="malformed"),
    ],
)
def test_a_malformed_stack_file_is_a_config_error(text: str) -> None:
    with pytest.raises(ConfigError) as err:
        stack_config_from_text(text, where=WHERE)
    assert WHERE in str(err.value)


# ---- fuzz: anything a stack file can say ends in a plan or a ConfigError ---------------------

KEYS = (
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
    "hfTokenConfigured",
)
MODEL_IDS = tuple(m.id for m in real_registry().models)
GPU_IDS = tuple(g.id for g in real_registry().gpus)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(MODEL_IDS + GPU_IDS + ("EU-RO-1", "SECURE", "COMMUNITY", "1.5", "true")),
)
junk = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
override = st.fixed_dictionaries(
    {},
    optional={
        "context": st.integers(1, 10**6),
        "concurrency": st.integers(1, 64),
        "gpu": st.sampled_from((*GPU_IDS, "H200 SXM", "NVIDIA B200")),
        "minConcurrentSequences": st.integers(1, 16),
    },
)
valid = {
    "models": st.lists(st.sampled_from((*MODEL_IDS, "nope")), unique=True, max_size=5),
    "dataCenter": st.sampled_from(("EU-RO-1", "US-TX-3", "XX-NONE-1")),
    "budgetUsdPerHour": st.one_of(st.floats(0.01, 500), st.sampled_from(("2", "40.5"))),
    "maxFallbackPremium": st.floats(1.0, 10.0),
    "cloud": st.sampled_from(("SECURE", "COMMUNITY")),
    "containerDiskGb": st.integers(1, 2048),
    "volumeHeadroom": st.floats(0.0, 10.0),
    "minVolumeGb": st.integers(10, 4096),
    "minConcurrentSequences": st.integers(1, 64),
    "overrides": st.dictionaries(st.sampled_from((*MODEL_IDS, "ghost")), override, max_size=3),
    "specDecode": st.booleans(),
    "hfToken": st.one_of(st.text(max_size=4), st.just(True)),
    "healthTimeoutSeconds": st.integers(1, 10**6),
}


@st.composite
def configs(draw: st.DrawFn) -> dict[str, Any]:
    """A mostly valid stack config, then a few keys (maybe unknown ones) replaced with junk."""
    config: dict[str, Any] = {
        "dataCenter": draw(valid["dataCenter"]),
        "budgetUsdPerHour": draw(valid["budgetUsdPerHour"]),
    }
    for key in draw(st.lists(st.sampled_from(sorted(valid)), unique=True, max_size=8)):
        config[key] = draw(valid[key])
    for key in draw(st.lists(st.sampled_from((*KEYS, "surplus", "models.0")), max_size=2)):
        config[key] = draw(junk)
    if draw(st.booleans()) and isinstance(config.get("overrides"), dict) and config["overrides"]:
        target = draw(st.sampled_from(sorted(config["overrides"])))
        config["overrides"][target] = draw(junk)
    return config


def plan_or_config_error(config: dict[str, Any]) -> tuple[StackSettings, FleetPlan] | None:
    try:
        s = parse_settings(config, where=WHERE)
    except ConfigError:
        return None
    plan = plan_fleet(real_registry(), s, stack="fuzz")
    # Every rendering of a plan must work too: they are what preview prints.
    json.dumps(plan_data(plan))
    plan_table(plan)
    plan_markdown(plan)
    return s, plan


@hypothesis_settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs())
def test_fuzzed_configs_plan_or_raise_config_error(config: dict[str, Any]) -> None:
    result = plan_or_config_error(config)
    if result is not None:
        s, plan = result
        assert isinstance(s, StackSettings) and isinstance(plan, FleetPlan)


@hypothesis_settings(max_examples=50, deadline=None)
@given(configs())
def test_fuzzed_stack_files_parse_to_settings_or_config_error(config: dict[str, Any]) -> None:
    try:
        text = stack_yaml(config)
    except yaml.YAMLError:
        return
    try:
        values = stack_config_from_text(text, where=WHERE)
    except ConfigError:
        return
    plan_or_config_error(values)


FUZZED_FILES = (
    pytest.param(
        {
            "models": "qwen3-8b",
            "dataCenter": "EU-RO-1",
            "budgetUsdPerHour": 1,
        },
        id="models-string",
    ),
    pytest.param(
        {
            "models": [{"a": [1, None]}],
            "dataCenter": 7,
            "budgetUsdPerHour": float("nan"),
        },
        id="nested-junk",
    ),
    pytest.param(
        {
            "models": ["qwen3-8b", "nope"],
            "dataCenter": "XX-NONE-1",
            "budgetUsdPerHour": 0.01,
            "overrides": {"qwen3-8b": {"gpu": "NVIDIA B200"}},
        },
        id="valid-but-full-of-problems",
    ),
    pytest.param(
        {
            "models": ["sdxl-1.0"],
            "dataCenter": "EU-RO-1",
            "budgetUsdPerHour": 1,
            "overrides": {"sdxl-1.0": {"context": 10**7, "concurrency": 1024}},
        },
        id="extreme-overrides",
    ),
    pytest.param("config: {frutebox-infra:models: [a\n", id="malformed-yaml"),
    pytest.param(["not", "a", "mapping"], id="top-level-list"),
)


@pytest.mark.parametrize("content", FUZZED_FILES)
def test_cli_plan_on_a_hostile_stack_exits_0_or_1_without_traceback(
    content: str | list[str] | dict[str, Any],
) -> None:
    """`content`: a stack file's text, a YAML document, or the config written as a stack file."""
    if isinstance(content, dict):
        text = stack_yaml(content)
    else:
        text = content if isinstance(content, str) else yaml.safe_dump(content)
    done = run_cli_plan(text)
    assert done.returncode in (0, 1), done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    if done.returncode == 1:
        assert done.stderr.strip()


def run_cli_plan(stack_text: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "Pulumi.fuzz.yaml").write_text(stack_text)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FRUTEBOX_", "HF_"))}
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "frutebox_infra",
                "plan",
                "--stack",
                "fuzz",
                "--stacks-dir",
                tmp,
                "--format",
                "json",
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=60,
            check=False,
        )


@hypothesis_settings(max_examples=5, deadline=None)
@given(configs())
def test_cli_plan_on_random_stack_files_exits_0_or_1_without_traceback(
    config: dict[str, Any],
) -> None:
    done = run_cli_plan(stack_yaml(config))
    assert done.returncode in (0, 1), done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    if done.returncode == 0:
        assert json.loads(done.stdout)["problems"] == []
