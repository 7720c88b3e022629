"""A stack file read as Pulumi reads it: namespacing, top-level keys, secrets, encodings."""

from __future__ import annotations

from pathlib import Path

import pytest

from frutebox_infra.plumbing.errors import ConfigError, UsageError
from frutebox_infra.stack.stack_file import (
    check_pulumi_agrees,
    load_settings,
    parse_settings,
    read_stack_config,
    stack_config_from_text,
)

WHERE = "stacks/Pulumi.test.yaml"
GOOD = "config:\n  frutebox-infra:dataCenter: EU-RO-1\n  frutebox-infra:budgetUsdPerHour: '5'\n"


def config(text: str) -> dict[str, object]:
    return stack_config_from_text(text, where=WHERE)


def test_a_key_without_a_namespace_is_the_project_s_as_pulumi_reads_it() -> None:
    text = "config:\n  models: [qwen3-8b]\n  frutebox-infra:config:dataCenter: EU-RO-1\n"
    assert config(text) == {"models": ["qwen3-8b"], "dataCenter": "EU-RO-1"}


def test_other_packages_keys_are_left_to_them() -> None:
    text = GOOD + "  pulumi:tags: {team: ml}\n  command:someSetting: x\n"
    assert set(config(text)) == {"dataCenter", "budgetUsdPerHour"}


@pytest.mark.parametrize(
    ("text", "words"),
    [
        pytest.param(
            "config:\n  models: [a]\n  frutebox-infra:models: [b]\n", "set twice", id="twice"
        ),
        pytest.param("config:\n  a:b:c:d: 1\n", "not a Pulumi config key", id="bad-key"),
        pytest.param("config:\n  ':x': 1\n", "not a Pulumi config key", id="empty-namespace"),
        pytest.param("config: [a, b]\n", "must be a mapping", id="config-a-list"),
        pytest.param("- just\n- a list\n", "expected a mapping", id="top-level-list"),
        pytest.param("confg:\n  models: []\n", "unknown top-level key 'confg'", id="typo"),
        pytest.param("environment: [prod]\n", "ESC", id="esc-environment"),
        pytest.param("encryptionsalt: 5\n", "encryptionsalt", id="salt-not-text"),
        pytest.param("config:\n  frutebox-infra:models: [a\n", "not valid YAML", id="malformed"),
        pytest.param("config:\n  models: !!set {a, b}\n", "!!set", id="yaml-set"),
        pytest.param("config:\n  specDecode: !!bool yes\n", "!!bool", id="explicit-tag"),
    ],
)
def test_a_malformed_stack_file_is_one_clear_error(text: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        config(text)
    message = str(err.value)
    assert message.startswith(WHERE) and words in message and "Fix" in message
    assert "\n" not in message


def test_yaml_1_1_words_are_text_as_pulumi_reads_them() -> None:
    # yaml.v3 (Pulumi) reads `yes` as text, so a boolean key refuses it; so must we.
    values = config(GOOD + "  frutebox-infra:specDecode: yes\n")
    assert values["specDecode"] == "yes"
    with pytest.raises(ConfigError) as err:
        parse_settings(values, where=WHERE)
    assert "frutebox-infra:specDecode" in str(err.value)


def test_an_empty_stack_file_is_missing_its_required_keys(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.empty.yaml"
    path.write_text("")
    with pytest.raises(ConfigError) as err:
        load_settings(path)
    assert "frutebox-infra:dataCenter" in str(err.value)
    assert "frutebox-infra:budgetUsdPerHour" in str(err.value)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        pytest.param(
            GOOD.replace("EU-RO-1", "EU-RO-1 caf\xe9").encode("latin-1"),
            "byte 0xE9 is not UTF-8",
            id="latin-1",
        ),
        pytest.param(GOOD.encode("utf-16"), "UTF-16", id="utf-16-with-bom"),
        pytest.param(b"\xff" * 3, "not UTF-8", id="garbage"),
    ],
)
def test_a_file_that_is_not_utf8_is_named_with_the_fix(
    tmp_path: Path, data: bytes, words: str
) -> None:
    path = tmp_path / "Pulumi.enc.yaml"
    path.write_bytes(data)
    with pytest.raises(ConfigError) as err:
        read_stack_config(path)
    assert str(path) in str(err.value) and words in str(err.value) and "UTF-8" in str(err.value)


def test_a_utf8_byte_order_mark_is_dropped_as_pulumi_does(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.bom.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + GOOD.encode())
    assert load_settings(path).data_center == "EU-RO-1"


def test_a_missing_stack_file_names_it_and_the_stacks_that_exist(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.dev.yaml").write_text("config: {}\n")
    with pytest.raises(UsageError) as err:
        read_stack_config(tmp_path / "Pulumi.nope.yaml")
    assert "Pulumi.nope.yaml" in str(err.value) and "dev" in str(err.value)


def test_pulumi_s_config_agrees_with_the_file_it_came_from() -> None:
    s = parse_settings(
        config(GOOD + "  models: [qwen3-8b]\n  overrides: {qwen3-8b: {context: 4096}}\n"),
        where=WHERE,
    )
    # What the engine passes: text per key, JSON for structures, Pulumi.yaml defaults added.
    passed = {
        "dataCenter": "EU-RO-1",
        "budgetUsdPerHour": "5",
        "models": '["qwen3-8b"]',
        "overrides": '{"qwen3-8b":{"context":4096}}',
        "maxFallbackPremium": "1.5",
        "containerDiskGb": "50",
        "specDecode": "true",
        "runpodApiUrl": "",
        "hfToken": "hf_secret_never_parsed",
    }
    check_pulumi_agrees(s, passed, where=WHERE)


def test_config_from_elsewhere_than_the_file_is_refused() -> None:
    s = parse_settings(config(GOOD), where=WHERE)
    with pytest.raises(ConfigError) as err:
        check_pulumi_agrees(
            s,
            {"dataCenter": "EU-RO-1", "budgetUsdPerHour": "500"},
            where=WHERE,
        )
    assert "frutebox-infra:budgetUsdPerHour" in str(err.value) and "Fix" in str(err.value)


def test_a_key_with_a_control_character_is_named_on_one_line() -> None:
    # A raw "\r" in a model id would split the one-paragraph error in two.
    config = {"dataCenter": "EU-RO-1", "budgetUsdPerHour": "1", "overrides": {"\r": None}}
    with pytest.raises(ConfigError) as err:
        parse_settings(config, where="Pulumi.s.yaml")
    text = str(err.value)
    assert "overrides.\\r" in text and len(text.splitlines()) == 1 and "Fix:" in text


def test_settings_read_through_the_cache_follow_the_stack_file(tmp_path: Path) -> None:
    path, cache = tmp_path / "Pulumi.test.yaml", tmp_path / "cache"
    path.write_text(GOOD + "  frutebox-infra:colocate: true\n", encoding="utf-8")
    validated = load_settings(path, cache=None)
    for _ in range(2):  # validated and kept, then read back
        assert load_settings(path, cache=cache) == validated and validated.colocate is True
    # One changed byte is read afresh, never the settings kept for the old text.
    path.write_text(GOOD + "  frutebox-infra:colocate: false\n", encoding="utf-8")
    assert load_settings(path, cache=cache).colocate is False


def test_a_bad_stack_file_is_never_kept_so_it_is_explained_every_time(tmp_path: Path) -> None:
    path, cache = tmp_path / "Pulumi.test.yaml", tmp_path / "cache"
    path.write_text(GOOD + "  frutebox-infra:seedVcpus: 3\n", encoding="utf-8")
    for _ in range(2):
        with pytest.raises(ConfigError, match="power of two"):
            load_settings(path, cache=cache)
    assert not list(cache.glob("*.pickle"))


def test_pulumi_s_config_is_checked_alike_through_the_cache(tmp_path: Path) -> None:
    s = parse_settings(config(GOOD), where=WHERE)
    passed = {"dataCenter": "EU-RO-1", "budgetUsdPerHour": "5"}
    for _ in range(2):  # checked and kept, then read back
        check_pulumi_agrees(s, passed, where=WHERE, cache=tmp_path)
    with pytest.raises(ConfigError, match="budgetUsdPerHour"):
        check_pulumi_agrees(s, {**passed, "budgetUsdPerHour": "6"}, where=WHERE, cache=tmp_path)
