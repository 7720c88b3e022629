"""Stack keys live in one place: StackSettings says what Pulumi.yaml declares, and vice versa."""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from typing import Any

import pytest
import yaml

from frutebox_infra.catalog.schema import Cloud
from frutebox_infra.plumbing.errors import ConfigError
from frutebox_infra.plumbing.validation import ALIAS
from frutebox_infra.stack.settings import (
    OVERRIDE_FIXES,
    PROJECT,
    STACK_KEYS,
    ModelOverride,
    StackSettings,
    pulumi_config_schema,
)
from frutebox_infra.stack.stack_file import parse_settings
from tests.factories import ROOT

WHERE = "stacks/Pulumi.test.yaml"
BASE = {"dataCenter": "EU-RO-1", "budgetUsdPerHour": 5}


def declared() -> dict[str, Any]:
    doc = yaml.safe_load((ROOT / "Pulumi.yaml").read_text(encoding="utf-8"))
    config: dict[str, Any] = doc["config"]
    return config


def test_pulumi_yaml_declares_exactly_the_model_s_keys_in_its_order() -> None:
    expected = yaml.safe_dump({"config": pulumi_config_schema()}, sort_keys=False, width=200)
    assert list(declared()) == list(pulumi_config_schema()), f"Pulumi.yaml should say:\n{expected}"


@pytest.mark.parametrize("key", list(STACK_KEYS))
def test_pulumi_yaml_and_the_model_agree_on_type_default_and_description(key: str) -> None:
    entry = declared()[f"{PROJECT}:{key}"]
    expected = pulumi_config_schema()[f"{PROJECT}:{key}"]
    assert entry == expected, f"Pulumi.yaml should say {yaml.safe_dump(expected, width=200)}"
    # Pulumi applies the default it declares; we read that default as any stack value.
    if "default" in entry:
        field = STACK_KEYS[key].field
        got = getattr(parse_settings({**BASE, key: entry["default"]}, where=WHERE), field)
        assert got == getattr(parse_settings(BASE, where=WHERE), field)


def test_the_required_keys_are_the_ones_without_a_default() -> None:
    required = {k for k, e in declared().items() if "default" not in e}
    assert required == {f"{PROJECT}:dataCenter", f"{PROJECT}:budgetUsdPerHour"}
    assert {f"{PROJECT}:{k.name}" for k in STACK_KEYS.values() if k.required} == required


def test_the_secrets_stay_undeclared() -> None:
    # Pulumi makes a declared secret key required, yet both may come from the environment.
    assert f"{PROJECT}:hfToken" not in declared()
    assert f"{PROJECT}:runpodApiKey" not in declared()


@pytest.mark.parametrize("key", [k for k in STACK_KEYS.values() if k.unit])
def test_every_number_s_fix_states_its_bounds_and_unit(key: Any) -> None:
    assert key.unit in key.fix
    assert any(ch.isdigit() for ch in key.fix)


def test_every_override_key_has_a_fix() -> None:
    names = {f.metadata.get(ALIAS, f.name) for f in fields(ModelOverride)}
    assert names == set(OVERRIDE_FIXES)


def test_a_minimal_stack_has_the_documented_defaults() -> None:
    s = parse_settings(BASE, where=WHERE)
    assert s.models == ()
    assert s.cloud is Cloud.SECURE
    assert s.max_fallback_premium == 1.5
    assert s.spec_decode is True
    assert s.hf_token_configured is False
    assert s.runpod_api_url == ""


def test_string_numbers_as_pulumi_config_set_writes_them_are_accepted() -> None:
    s = parse_settings(
        {**BASE, "budgetUsdPerHour": "2", "maxFallbackPremium": "1.5", "containerDiskGb": "40"},
        where=WHERE,
    )
    assert (s.budget_usd_per_hour, s.max_fallback_premium, s.container_disk_gb) == (2.0, 1.5, 40)


def error_for(**config: Any) -> str:
    with pytest.raises(ConfigError) as err:
        parse_settings({**BASE, **config}, where=WHERE)
    return str(err.value)


BAD = (
    pytest.param({"budgetUsdPerHour": -1}, "budgetUsdPerHour", id="negative-budget"),
    pytest.param({"budgetUsdPerHour": 0}, "budgetUsdPerHour", id="zero-budget"),
    pytest.param({"budgetUsdPerHour": "two"}, "budgetUsdPerHour", id="budget-not-a-number"),
    # Pulumi passes `true` to a string key as the text "true": no one means a budget of $1.
    pytest.param({"budgetUsdPerHour": True}, "budgetUsdPerHour", id="budget-a-boolean"),
    pytest.param({"budgetUsdPerHour": "1_000"}, "budgetUsdPerHour", id="budget-underscores"),
    pytest.param({"budgetUsdPerHour": 10**6}, "budgetUsdPerHour", id="budget-absurd"),
    pytest.param({"containerDiskGb": "lots"}, "containerDiskGb", id="disk-not-a-number"),
    pytest.param({"containerDiskGb": 0}, "containerDiskGb", id="disk-zero"),
    pytest.param({"containerDiskGb": 50.5}, "containerDiskGb", id="disk-a-decimal"),
    pytest.param({"containerDiskGb": True}, "containerDiskGb", id="disk-a-boolean"),
    pytest.param({"volumeHeadroom": -0.1}, "volumeHeadroom", id="negative-headroom"),
    pytest.param({"minVolumeGb": 5}, "minVolumeGb", id="volume-below-runpod-minimum"),
    pytest.param({"minVolumeGb": 5000}, "minVolumeGb", id="volume-above-runpod-maximum"),
    pytest.param({"maxFallbackPremium": 0.9}, "maxFallbackPremium", id="premium-below-one"),
    pytest.param({"specDecode": "maybe"}, "specDecode", id="spec-decode-not-a-bool"),
    pytest.param({"specDecode": "yes"}, "specDecode", id="spec-decode-yes"),
    pytest.param({"specDecode": 1}, "specDecode", id="spec-decode-one"),
    pytest.param({"specDecode": "True"}, "specDecode", id="spec-decode-quoted-True"),
    pytest.param({"healthTimeoutSeconds": 10**17}, "healthTimeoutSeconds", id="timeout-absurd"),
    pytest.param({"healthTimeoutSeconds": 10}, "healthTimeoutSeconds", id="timeout-too-short"),
    pytest.param({"volumeType": "FAST"}, "volumeType", id="unknown-volume-tier"),
    pytest.param({"downloadMBps": 0}, "downloadMBps", id="download-speed-zero"),
    pytest.param({"cloud": "PRIVATE"}, "cloud", id="unknown-cloud"),
    pytest.param({"dataCenter": 7}, "dataCenter", id="data-centre-a-number"),
    pytest.param({"models": "qwen3-8b"}, "models", id="models-as-a-string"),
    pytest.param({"models": ["qwen3-8b", "qwen3-8b"]}, "models", id="armed-twice"),
    pytest.param({"models": [1, 2]}, "models", id="models-not-strings"),
    pytest.param({"models": None}, "models", id="models-empty-value"),
    pytest.param({"overrides": {"qwen3-8b": {"ctx": 1}}}, "overrides", id="override-unknown-key"),
    pytest.param(
        {"overrides": {"qwen3-8b": {"context": -5}}}, "overrides", id="override-negative-context"
    ),
    pytest.param(
        {"overrides": {"qwen3-8b": {"context": True}}}, "overrides", id="override-context-true"
    ),
    pytest.param(
        {"overrides": {"qwen3-8b": {"context": "4096"}}}, "overrides", id="override-quoted"
    ),
    pytest.param({"overrides": ["qwen3-8b"]}, "overrides", id="overrides-not-a-map"),
    pytest.param({"runpodApiUrl": "ftp://x"}, "runpodApiUrl", id="api-url-not-http"),
    pytest.param({"modles": ["qwen3-8b"]}, "modles", id="unknown-key"),
    pytest.param({"hfToken": "hf_plaintext"}, "hfToken", id="token-in-plain-text"),
    pytest.param({"budgetUsdPerHour": {"secure": "v1:x"}}, "budgetUsdPerHour", id="secret-budget"),
)


@pytest.mark.parametrize(("config", "key"), BAD)
def test_bad_config_names_file_key_and_fix(config: dict[str, Any], key: str) -> None:
    message = error_for(**config)
    assert WHERE in message
    assert f"{PROJECT}:{key}" in message
    assert "Fix:" in message, f"no fix offered: {message}"
    assert "\n\n" not in message


def test_a_bound_error_says_the_unit() -> None:
    assert "seconds" in error_for(healthTimeoutSeconds=10**17)
    assert "GB" in error_for(containerDiskGb=5000)
    assert "tokens" in error_for(overrides={"qwen3-8b": {"context": 10**9}})


@pytest.mark.parametrize(
    "missing",
    [pytest.param("dataCenter", id="data-centre"), pytest.param("budgetUsdPerHour", id="budget")],
)
def test_required_keys_are_named_when_missing(missing: str) -> None:
    values = {k: v for k, v in BASE.items() if k != missing}
    with pytest.raises(ConfigError) as err:
        parse_settings(values, where=WHERE)
    assert f"{PROJECT}:{missing}" in str(err.value)
    assert "Fix:" in str(err.value)


def test_duplicates_are_named() -> None:
    assert "qwen3-8b" in error_for(models=["qwen3-8b", "sdxl-1.0", "qwen3-8b"])


@pytest.mark.parametrize(
    ("key", "low_ok", "low_bad", "high_ok", "high_bad"),
    [
        pytest.param("budgetUsdPerHour", 0.01, 0, 10_000, 10_000.01, id="budget"),
        pytest.param("maxFallbackPremium", 1.0, 0.99, 10, 10.01, id="premium"),
        pytest.param("containerDiskGb", 1, 0, 2048, 2049, id="disk"),
        pytest.param("healthTimeoutSeconds", 30, 29, 86_400, 86_401, id="health-timeout"),
        pytest.param("minConcurrentSequences", 1, 0, 1024, 1025, id="min-sequences"),
    ],
)
def test_numeric_bounds_on_both_sides(
    key: str, low_ok: float, low_bad: float, high_ok: float, high_bad: float
) -> None:
    for ok in (low_ok, high_ok):
        parse_settings({**BASE, key: ok}, where=WHERE)
    for bad in (low_bad, high_bad):
        with pytest.raises(ConfigError):
            parse_settings({**BASE, key: bad}, where=WHERE)


def test_secret_token_is_only_noticed_never_kept() -> None:
    s = parse_settings(
        {**BASE, "hfToken": {"secure": "v1:AAAA"}, "runpodApiKey": {"secure": "v1:BBBB"}},
        where=WHERE,
    )
    assert s.hf_token_configured is True
    assert "v1:AAAA" not in repr(s) and "v1:BBBB" not in repr(s)
    assert "v1:" not in json.dumps(asdict(s), default=str)


def test_settings_built_directly_keep_their_python_types() -> None:
    s = StackSettings(data_center="EU-RO-1", budget_usd_per_hour=3.0)
    assert s.budget_usd_per_hour == 3.0 and s.overrides == {} and s.colocate is False


@pytest.mark.parametrize(
    ("key", "value", "ok"),
    [
        pytest.param("seedVcpus", 2, True, id="vcpus-at-least"),
        pytest.param("seedVcpus", 1, False, id="vcpus-below"),
        pytest.param("seedVcpus", 32, True, id="vcpus-at-most"),
        pytest.param("seedVcpus", 64, False, id="vcpus-above"),
        pytest.param("seedVcpus", 6, False, id="vcpus-not-a-power-of-two"),
        pytest.param("seedTimeoutSeconds", 0, True, id="timeout-scales"),
        pytest.param("seedTimeoutSeconds", 299, False, id="timeout-below"),
        pytest.param("seedTimeoutSeconds", 300, True, id="timeout-at-least"),
        pytest.param("seedTimeoutSeconds", 172_800, True, id="timeout-at-most"),
        pytest.param("seedTimeoutSeconds", 172_801, False, id="timeout-above"),
        pytest.param("seedCpuFlavor", "cpu3c", True, id="flavor"),
        pytest.param("seedCpuFlavor", "CPU 3C", False, id="flavor-not-an-id"),
        pytest.param("seeding", False, True, id="seeding-off"),
    ],
)
def test_the_seeding_keys_have_bounds(key: str, value: Any, ok: bool) -> None:
    if ok:
        settings = parse_settings({**BASE, key: value}, where=WHERE)
        expected = (value or None) if key == "seedTimeoutSeconds" else value  # 0 means "scale"
        assert getattr(settings, STACK_KEYS[key].field) == expected
    else:
        with pytest.raises(ConfigError, match=key):
            parse_settings({**BASE, key: value}, where=WHERE)


def test_seeding_is_on_by_default_on_two_vcpus() -> None:
    settings = parse_settings(BASE, where=WHERE)
    assert (settings.seeding, settings.seed_vcpus, settings.seed_cpu_flavor) == (True, 2, "")
    assert settings.seed_timeout_seconds is None


# --- the speed keys ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        pytest.param({}, (20.0, "usdPerHour", None, None), id="defaults"),
        pytest.param({"minDecodeTokensPerSecond": "0"}, (0.0, "usdPerHour", None, None),
                     id="floor-off"),
        pytest.param({"minDecodeTokensPerSecond": "1000"}, (1000.0, "usdPerHour", None, None),
                     id="floor-at-most"),
        pytest.param({"rankBy": "usdPerMillionTokens"},
                     (20.0, "usdPerMillionTokens", None, None), id="rank-per-token"),
        pytest.param({"promptTokens": 1024, "outputTokens": "256"},
                     (20.0, "usdPerHour", 1024, 256), id="lengths"),
        pytest.param({"promptTokens": 0, "outputTokens": 0}, (20.0, "usdPerHour", None, None),
                     id="lengths-zero-means-unstated"),
    ],
)
def test_the_speed_keys_and_their_defaults(
    config: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    s = parse_settings({**BASE, **config}, where=WHERE)
    assert (s.min_decode_tok_s, s.rank_by, s.prompt_tokens, s.output_tokens) == expected


@pytest.mark.parametrize(
    ("config", "says"),
    [
        pytest.param({"minDecodeTokensPerSecond": "-0.1"}, "minDecodeTokensPerSecond",
                     id="floor-below"),
        pytest.param({"minDecodeTokensPerSecond": "1000.1"}, "tok/s per stream",
                     id="floor-above"),
        pytest.param({"rankBy": "usdPerToken"}, "usdPerHour or usdPerMillionTokens",
                     id="rank-unknown"),
        pytest.param({"promptTokens": 1024}, "promptTokens is set without outputTokens",
                     id="prompt-alone"),
        pytest.param({"outputTokens": 64}, "outputTokens is set without promptTokens",
                     id="output-alone"),
        pytest.param({"promptTokens": -1, "outputTokens": 1}, "promptTokens", id="prompt-below"),
        pytest.param({"promptTokens": 1, "outputTokens": 10_485_761}, "outputTokens",
                     id="output-above"),
    ],
)
def test_bad_speed_keys_name_the_key_and_the_fix(config: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match="Fix:") as raised:
        parse_settings({**BASE, **config}, where=WHERE)
    assert says in str(raised.value)


@pytest.mark.parametrize(
    ("override", "ok"),
    [
        pytest.param({"gpuCount": 1}, True, id="count-at-least"),
        pytest.param({"gpuCount": 0}, False, id="count-below"),
        pytest.param({"gpuCount": 8}, True, id="count-at-most"),
        pytest.param({"gpuCount": 9}, False, id="count-above"),
        pytest.param({"gpuCount": "2"}, False, id="count-as-text"),
        pytest.param({"engine": "llamacpp"}, True, id="engine"),
        pytest.param({"engine": "llama.cpp"}, False, id="engine-misspelt"),
        pytest.param({"minDecodeTokensPerSecond": 0}, True, id="floor-off"),
        pytest.param({"minDecodeTokensPerSecond": 12.5}, True, id="floor-decimal"),
        pytest.param({"minDecodeTokensPerSecond": -1}, False, id="floor-below"),
        pytest.param({"minDecodeTokensPerSecond": 1001}, False, id="floor-above"),
        pytest.param({"minDecodeTokensPerSecond": True}, False, id="floor-boolean"),
    ],
)
def test_the_speed_overrides_have_bounds(override: dict[str, Any], ok: bool) -> None:
    config = {**BASE, "overrides": {"m": override}}
    if ok:
        s = parse_settings(config, where=WHERE)
        (key, value), = override.items()
        field = {"gpuCount": "gpu_count", "minDecodeTokensPerSecond": "min_decode_tok_s"}
        assert getattr(s.overrides["m"], field.get(key, key)) == value
    else:
        with pytest.raises(ConfigError, match=r"overrides\.m\.") as raised:
            parse_settings(config, where=WHERE)
        key = next(iter(override))
        assert OVERRIDE_FIXES[key] in str(raised.value)
