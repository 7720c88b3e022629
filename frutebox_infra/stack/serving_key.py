"""The stack's serving key: the one secret every client of the stack's models sends, and how
the program, the deploy step and our probes name it."""

from __future__ import annotations

import re

from frutebox_infra.recipes.gateway import KEY_ENV, MIN_KEY_LENGTH
from frutebox_infra.stack.settings import PROJECT

STACK_SERVING_KEY = "servingKey"
"""The stack secret (`frutebox-infra:servingKey`) that sets the key; unset, the first `up`
mints one. Like every secret key, not declared in Pulumi.yaml (Pulumi would require it)."""

OUTPUT_NAME = "servingKey"
"""The secret stack output a client reads it from (`pulumi stack output --show-secrets`)."""

STEP_SERVING_KEY_ENV = "FRUTEBOX_STACK_SERVING_KEY"
"""How the program hands the key to the deploy step (a secret input, never on stdin)."""

POD_KEY_ENV = KEY_ENV
"""The pod variable the gateway reads it from, filled by the deploy step at the last moment."""

MINT_COMMAND = (
    '"${FRUTEBOX_PYTHON:-python3}" -c \'import secrets; print(secrets.token_urlsafe(32), end="")\''
)
"""What mints a key on the first `up`: 32 random bytes, URL-safe (43 characters); its stdout
is stored only as a Pulumi secret and never echoed."""

_KEY_SHAPE = re.compile(r"[A-Za-z0-9_-]+")


def key_problem(key: str) -> str | None:
    """Why `key` cannot be the serving key, with the fix; None when it can. The gateway reads
    it into its configuration, so only URL-safe characters are taken (never the value in the
    message)."""
    if len(key) < MIN_KEY_LENGTH or not _KEY_SHAPE.fullmatch(key):
        return (
            f"the stack secret {PROJECT}:{STACK_SERVING_KEY} must be at least {MIN_KEY_LENGTH}"
            " characters of A-Z, a-z, 0-9, '-' and '_'. Fix: `pulumi config set --secret"
            f" {PROJECT}:{STACK_SERVING_KEY} \"$(python3 -c 'import secrets;"
            f" print(secrets.token_urlsafe(32))')\"`, or `pulumi config rm"
            f" {PROJECT}:{STACK_SERVING_KEY}` to use the minted key"
        )
    return None
