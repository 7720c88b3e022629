"""The deploy step's bounds and paces, in one place, and what a user can change of them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Timeouts:
    """Bounds of one bring-up, in seconds; these defaults are the only home of the numbers."""

    running_s: float = 900.0
    healthy_s: float = 1800.0
    poll_interval_s: float = 5.0
    api_check_s: float = 60.0
    """While waiting for health the proxy probe is the signal; the API is asked this rarely
    whether the pod died, so a fleet's waits stay far inside RunPod's quotas."""
    restart_check_s: float = 15.0
    """The API check once a container restart was seen: four reads a minute for the pod
    that may crash-loop, so its loop is confirmed in seconds rather than minutes."""
    restart_limit: int = 3
    """Container restarts seen before a bring-up counts as a crash loop and fails."""
    crash_window_s: float = 180.0
    """After the first restart, how long the pod may take to serve before it counts as a
    crash loop even with fewer restarts (a slow loop: a long load, then a crash)."""
    steady_s: float = 180.0
    """A private pod (no published port) counts as up once its container has run this long
    since its last start: the crash window, so a launch that dies within it is a crash loop,
    not a success. What fails later (weights that never load) no probe of ours can see."""
    duplicate_check_s: float = 120.0
    """The window after an ambiguous create answer during which what it made is looked for
    itself (FRUTEBOX_DUPLICATE_CHECK_S); its backoff and what happens at its end are
    adopting.AmbiguousCreates' rule. Two minutes: a volume listed 30 s after the retried
    create's went unseen and billed $70 a month (issue 38), so the window covers four times
    that lag; a volume's step waits it out only after an ambiguous answer, and a pod's
    bring-up outlasts it anyway."""
    delete_s: float = 300.0
    pull_s: float = 3600.0


# What users can change: the running bound only from the environment; the health bound is a
# stack key the program sends (the environment variable, when set, wins over it).
RUNNING_HINT = (
    f"set FRUTEBOX_RUNNING_TIMEOUT_S (seconds, default {Timeouts.running_s:g}) in the"
    " environment of `pulumi up`"
)
HEALTH_HINT = (
    "raise the stack key frutebox-infra:healthTimeoutSeconds (`pulumi config set"
    " frutebox-infra:healthTimeoutSeconds 3600`), or set FRUTEBOX_HEALTH_TIMEOUT_S, which"
    " overrides it"
)
