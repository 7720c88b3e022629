"""The step's bounds: one home for their defaults, each bound of a crash loop stated."""

from __future__ import annotations

from frutebox_infra.runpod.timeouts import Timeouts


def test_the_timeout_defaults_live_in_timeouts() -> None:
    assert (Timeouts().running_s, Timeouts().healthy_s) == (900, 1800)


def test_a_crash_loop_is_bounded_in_restarts_and_in_time() -> None:
    t = Timeouts()
    assert (t.restart_limit, t.crash_window_s) == (3, 180)
    # Once a restart is seen the pod is read four times as often, never faster than it polls.
    assert t.poll_interval_s <= t.restart_check_s < t.api_check_s
