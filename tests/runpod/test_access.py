"""A refused key is named by its source, with what the command needs; its value never shows."""

from __future__ import annotations

import pytest

from frutebox_infra.runpod.access import DEPLOY, KeyUse, Need, method_need, refusal_hint

SOURCE = "stack secret frutebox-infra:runpodApiKey"


@pytest.mark.parametrize(
    ("status", "method", "use", "says"),
    [
        pytest.param(401, "GET", KeyUse(SOURCE, DEPLOY, Need.WRITE),
                     ["does not accept the API key from " + SOURCE, "disabled",
                      "`pulumi up` and `pulumi destroy` the key needs write access"],
                     id="revoked-during-up"),
        pytest.param(403, "POST", KeyUse(SOURCE, DEPLOY, Need.WRITE),
                     [SOURCE + " is valid but may not write", "Read Only",
                      "permission All, or Restricted with Read/Write"],
                     id="read-only-during-up"),
        pytest.param(403, "GET", KeyUse("environment variable RUNPOD_API_KEY",
                                        "`frutebox status`", Need.READ),
                     ["may not read", "`frutebox status` the key needs read access",
                      "a Read Only key is enough"], id="no-read-for-status"),
        pytest.param(401, "GET", KeyUse(None, "`frutebox prices`", Need.READ),
                     ["the configured RunPod key", "RUNPOD_API_KEY",
                      "frutebox-infra:runpodApiKey"], id="unknown-source"),
    ],
)
def test_refusal_hint(status: int, method: str, use: KeyUse, says: list[str]) -> None:
    hint = refusal_hint(status, method, use)
    for part in says:
        assert part in hint


@pytest.mark.parametrize(
    ("method", "need"),
    [
        pytest.param("GET", Need.READ, id="get"),
        pytest.param("head", Need.READ, id="head"),
        *(pytest.param(m, Need.WRITE, id=m.lower()) for m in ("POST", "PATCH", "DELETE")),
    ],
)
def test_method_need(method: str, need: Need) -> None:
    assert method_need(method) is need
