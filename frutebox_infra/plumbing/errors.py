"""Domain errors the command line and the Pulumi program report without a traceback.

FruteboxError
└── ConfigError      bad registry or stack file: names the file, the key and the fix
    └── UsageError   the command named something that is not there (a stack, a ref)

A plan with problems is not an error: it is a `FleetPlan` whose `problems` the caller reports.
"""

from __future__ import annotations

from typing import Any

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, EXIT_DRIFT = 0, 1, 2, 3
"""Exit codes of every command, their one home: ok; problems (preview would fail, or RunPod or
the backend could not be read); a usage error; `status` found drift."""


class FruteboxError(Exception):
    """Base of every error we expect and explain."""


class ConfigError(FruteboxError):
    """A registry or stack file is malformed or names something that does not exist."""


class UsageError(ConfigError):
    """The user asked for a stack, file or ref that does not exist."""


def exit_code(error: FruteboxError) -> int:
    """What a command exits with for an error it explained: 2 for usage, 1 otherwise."""
    return EXIT_USAGE if isinstance(error, UsageError) else EXIT_PROBLEMS


def shown(value: Any) -> str:
    """A value as an error message quotes it: YAML's spelling, cut to fit on a line."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif value is None:
        text = "null"
    else:
        text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def printable(text: str) -> str:
    """A name from a file as a one-line message quotes it: control characters escaped, so an
    error stays one paragraph whatever a key holds."""
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")
