"""What an emulated ComfyUI pod lists under `GET /models/<kind>`, from its provisioning script.

A real ComfyUI lists the files in its models folders; here the files are the ones the pod's
provisioning script (env FRUTEBOX_PROVISION, one `fetch DIR NAME URL` line per file) would
download. A pod without such a script is not ComfyUI: the proxy gives it the generic 200, as
ai-dock's placeholder page answers every GET, and lists nothing.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

MODELS_DIR = "/workspace/ComfyUI/models/"
LISTED_AS = {"clip": "text_encoders", "unet": "diffusion_models"}
"""ComfyUI folds models/clip into text_encoders and models/unet into diffusion_models."""


def models_listing(body: Mapping[str, Any], path: str) -> list[str] | None:
    """ComfyUI's answer to GET `path` (/models/<kind>), or None when this is not such a pod."""
    env = body.get("env") or {}
    script = env.get("FRUTEBOX_PROVISION") if isinstance(env, Mapping) else None
    if not isinstance(script, str) or not path.startswith("/models/"):
        return None
    kind = path.removeprefix("/models/").strip("/")
    names: list[str] = []
    for line in script.splitlines():
        words = shlex.split(line.split("||", 1)[0]) if line.startswith("fetch ") else []
        if len(words) >= 3 and words[1].startswith(MODELS_DIR):
            folder = words[1].removeprefix(MODELS_DIR)
            if LISTED_AS.get(folder, folder) == kind:
                names.append(words[2])
    return sorted(names)
