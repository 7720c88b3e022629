"""Whether a pod's container can start its process at all, from how its image takes `args`.

RunPod passes `args` to the image's ENTRYPOINT and has no entrypoint override
(registry/images.yaml `entrypoint`): an image without one runs `args` as the whole command
line, so empty args run nothing and args that begin with a flag are no program; an ENTRYPOINT
that dispatches on its first word (`dispatch`) prints its usage for a word it does not know.
Such a container exits at once, and RunPod starts it again and again while the pod stays
RUNNING.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from frutebox_infra.catalog.schema import Dispatch
from frutebox_infra.emulator.gateway import start_failure
from frutebox_infra.recipes.gateway import starts_gateway

CRASH_FAULT_LINE = "RuntimeError: the server exited during start-up"
"""What the `crash-loop` fault's engine prints before it exits."""


def launch_failure(
    entrypoints: Mapping[str, str],
    body: Mapping[str, Any],
    dispatchers: Mapping[str, Dispatch] | None = None,
) -> str | None:
    """The line the container prints before it exits, or None when its launch can run."""
    image = body.get("image")
    if not isinstance(image, str):
        return None
    dispatch = (dispatchers or {}).get(image)
    if dispatch is None and entrypoints.get(image) != "none":
        return None
    args = body.get("args") or ""
    try:
        words = shlex.split(args)
    except ValueError as exc:
        return f"/bin/sh: syntax error: {exc}"
    if dispatch is not None:
        first = words[0] if words else ""
        if first in (dispatch.server_word, dispatch.python_word):
            return None  # its Python's start hook, if any, is decided with the volume
        return f"Unknown command: {first}"
    if not words:
        return f"{image} has no ENTRYPOINT and no command, and args is empty: nothing to run"
    if words[0].startswith("-"):
        return f'exec: "{words[0]}": executable file not found in $PATH'
    if starts_gateway(words):
        return start_failure(body)
    return None
