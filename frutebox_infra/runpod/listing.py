"""Does a server list every weights file it needs? ComfyUI's `GET /models/<kind>` proof.

A ComfyUI server can answer its health path without holding its weights (an image whose init
starts it whatever the downloads did, as the ai-dock image did, or a file gone from the volume).
What ComfyUI lists under `/models/<kind>` is what a workflow can load, so the pod is healthy
only once every expected `kind/name` is listed there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

GetJson = Callable[[str], Any]
"""GET a URL and return its JSON body, or None when it did not answer 2xx with JSON."""


def missing_files(get_json: GetJson, base_url: str, expected: Iterable[str]) -> list[str]:
    """The `kind/name` entries of `expected` that `base_url/models/<kind>` does not list.

    Anything but a JSON list of names (a placeholder page, an error, no answer) lists nothing.
    """
    by_kind: dict[str, list[str]] = {}
    for entry in expected:
        kind, _, name = entry.partition("/")
        by_kind.setdefault(kind, []).append(name)
    missing: list[str] = []
    for kind, names in by_kind.items():
        listed = get_json(f"{base_url}/models/{kind}")
        present = {n for n in listed if isinstance(n, str)} if isinstance(listed, list) else set()
        missing += [f"{kind}/{n}" for n in names if n not in present]
    return missing
