"""How the seeder reaches a CPU pod: its source and plan in the pod's env, run by its args.

RunPod takes no files and no entrypoint override, only `args` (one string, here the whole
command line of an image without ENTRYPOINT) and `env`, as the ComfyUI recipe delivers its
script. The hard limit is Linux's: each `NAME=value` string handed to the container's first
process must stay under MAX_ARG_STRLEN, 128 KiB (RunPod documents none of its own).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from frutebox_infra.seeding.protocol import PLAN_ENV, PROGRAM_ENV, SeedPlan

PROGRAM = Path(__file__).with_name("seeder.py")

MAX_ENV_STRING_BYTES = 128 * 1024
"""Linux MAX_ARG_STRLEN (32 pages of 4 KiB): the longest one environment string may be."""

LAUNCH = f"import os; exec(compile(os.environ[{PROGRAM_ENV!r}], 'seeder.py', 'exec'))"


def program_text() -> str:
    return PROGRAM.read_text(encoding="utf-8")


def pod_args() -> str:
    """The seeding pod's args: the slim Python image runs the program its env carries."""
    return shlex.join(["python3", "-u", "-c", LAUNCH])


def pod_env(plan: SeedPlan) -> dict[str, str]:
    """The program and its plan; HF_TOKEN is added by the deploy step, never stored here."""
    env = {PROGRAM_ENV: program_text(), PLAN_ENV: plan.to_json()}
    for name, value in env.items():
        size = len(f"{name}={value}".encode())
        if size >= MAX_ENV_STRING_BYTES:
            raise ValueError(
                f"{name} is {size} bytes, over the {MAX_ENV_STRING_BYTES} bytes one environment"
                " string may have (Linux MAX_ARG_STRLEN): split the seeding batch"
            )
    return env
