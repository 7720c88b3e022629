"""The deploy step's inputs: its environment (one pydantic model, every bad value a clear
error) and what it writes (readable by upstream's provider, which has a 64 KiB line limit)."""

from __future__ import annotations

import ast
import io
import json

import pytest

from frutebox_infra.deploy.contract import PodRequest
from frutebox_infra.plumbing.validation import validate
from frutebox_infra.runpod.command_io import (
    MAX_LOG_LINE,
    Session,
    Settings,
    cap_lines,
    failure_text,
    redactor,
    scaled_waits,
    write_failure,
    write_result,
)
from frutebox_infra.runpod.errors import ConfigurationError
from frutebox_infra.runpod.lifecycle import Timeouts
from frutebox_infra.runpod.retrying import RetryPolicy
from tests.factories import ROOT
from tests.runpod.command import pod_request


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("FRUTEBOX_PULL_TIMEOUT_S", "0"),
        ("FRUTEBOX_HEALTH_TIMEOUT_S", "-5"),
        ("FRUTEBOX_RUNNING_TIMEOUT_S", "soon"),
        ("FRUTEBOX_POLL_INTERVAL_S", "-1"),
        ("FRUTEBOX_RETRY_ATTEMPTS", "0"),
    ],
)
def test_a_bad_value_names_the_variable_instead_of_becoming_a_default(
    name: str, value: str
) -> None:
    with pytest.raises(ConfigurationError, match=name) as caught:
        Settings.from_env({name: value})
    assert "fix or unset" in str(caught.value)


def test_unset_and_empty_variables_keep_the_defaults() -> None:
    settings = Settings.from_env({"FRUTEBOX_PULL_TIMEOUT_S": "  ", "RUNPOD_API_KEY": "k"})
    assert settings.pull_timeout_s == Timeouts.pull_s
    assert settings.healthy_timeout_s is None


def test_hf_token_falls_back_and_secrets_stay_out_of_the_repr() -> None:
    settings = Settings.from_env({"HF_TOKEN": "hf_plain_token", "RUNPOD_API_KEY": "rpa_secret"})
    assert settings.hf_token == "hf_plain_token"
    assert "rpa_secret" not in repr(settings) and "hf_plain_token" not in repr(settings)


def test_the_real_environment_is_never_read_behind_our_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FRUTEBOX_PULL_TIMEOUT_S", "0")
    assert Settings.from_env({}).pull_timeout_s == Timeouts.pull_s


def test_long_lines_are_cut_and_short_ones_kept() -> None:
    text = "short\n" + "x" * (MAX_LOG_LINE + 5) + "\nlast"
    lines = cap_lines(text).split("\n")
    assert lines[0] == "short" and lines[2] == "last"
    assert lines[1] == "x" * MAX_LOG_LINE + "… (5 more characters cut)"
    assert max(len(line.encode()) for line in lines) < 64 * 1024


def test_text_within_the_limit_is_unchanged() -> None:
    text = "a\n" + "y" * MAX_LOG_LINE + "\n"
    assert cap_lines(text) == text


def timeouts_under(env: dict[str, str], **request: float) -> Timeouts:
    session = Session(Settings.from_env(env), io.StringIO(), None, lambda text: text)
    return session.timeouts(validate(PodRequest, pod_request("v", timeouts=request)))


@pytest.mark.parametrize(
    "scale", [pytest.param(10.0, id="rehearsal"), pytest.param(100.0, id="e2e")]
)
def test_scaled_waits_are_the_defaults_on_a_faster_clock(scale: float) -> None:
    env = scaled_waits(scale)
    got, default = timeouts_under(env), Timeouts()
    assert got.poll_interval_s * scale == pytest.approx(default.poll_interval_s)
    assert got.api_check_s * scale == pytest.approx(default.api_check_s)
    assert got.duplicate_check_s * scale == pytest.approx(default.duplicate_check_s)
    backoff = Settings.from_env(env).retry.backoff_s
    assert backoff * scale == pytest.approx(RetryPolicy().backoff_s)
    # Deadlines are the caller's to choose: a faster clock does not shorten them by itself.
    assert (got.pull_s, got.delete_s) == (default.pull_s, default.delete_s)


PACE = (
    "FRUTEBOX_POLL_INTERVAL_S",
    "FRUTEBOX_API_CHECK_S",
    "FRUTEBOX_DUPLICATE_CHECK_S",
    "FRUTEBOX_RETRY_BACKOFF_S",
)


def test_only_the_settings_spell_the_pace_variables() -> None:
    """Whoever speeds the step up goes through scaled_waits, so its numbers keep one home."""
    spelt = {}
    for path in sorted((ROOT / "frutebox_infra").rglob("*.py")):
        nodes = list(ast.walk(ast.parse(path.read_text(encoding="utf-8"))))
        names = {n.value for n in nodes if isinstance(n, ast.Constant) and n.value in PACE}
        names |= {n.arg for n in nodes if isinstance(n, ast.keyword) and n.arg in PACE}
        if names:
            spelt[path.relative_to(ROOT).as_posix()] = sorted(names)
    assert spelt == {"frutebox_infra/runpod/command_io.py": sorted(PACE)}


def test_the_environment_wins_over_the_request_and_unset_keeps_the_defaults() -> None:
    got = timeouts_under({"FRUTEBOX_HEALTH_TIMEOUT_S": "7"}, runningSeconds=123, healthySeconds=9)
    assert (got.running_s, got.healthy_s) == (123, 7)
    assert timeouts_under({}) == Timeouts()
    assert Settings.from_env({}).retry == RetryPolicy()


def test_the_result_is_one_redacted_line() -> None:
    out = io.StringIO()
    write_result(
        out, {"podId": "p1", "image": "secret-abcdef"}, redactor({"HF_TOKEN": "secret-abcdef"})
    )
    assert out.getvalue().count("\n") == 1
    assert json.loads(out.getvalue()) == {"podId": "p1", "image": "***"}


def test_a_failure_is_one_paragraph_and_a_bug_says_so() -> None:
    known = failure_text(ConfigurationError("Fix\n  this."), debug=False)
    assert known == "error: Fix this."
    try:
        raise KeyError("oops")
    except KeyError as exc:
        bug = failure_text(exc, debug=False)
        traced = failure_text(exc, debug=True)
    assert bug.startswith("error: internal error (KeyError: 'oops')") and "FRUTEBOX_DEBUG=1" in bug
    assert traced.startswith("Traceback") and traced.endswith(bug)
    err = io.StringIO()
    write_failure(err, "error: " + "x" * (MAX_LOG_LINE + 1), lambda text: text)
    assert err.getvalue().endswith("(8 more characters cut)\n")  # "error: " and one x
