"""The `/_emulator/` routes of out-of-band changes, parsed into the account's own methods.

`POST /_emulator/pods/{id}/terminate|stop|kill-host`, `PATCH /_emulator/pods/{id}` (a hand
edit), `POST /_emulator/volumes/{id}/texts {path, text}` or `{path, remove: true}` (a small file
of ours written on or deleted from a volume, e.g. a gateway's start hook),
`POST /_emulator/prices {gpuId, secure}`, `POST /_emulator/stock {gpuId, available,
dataCenterId?}`, `POST /_emulator/volume-types {dataCenterId, types}`, `POST /_emulator/keys
{key, scope}` (a key created, restricted or revoked in the console) and `POST /_emulator/hub
{repo, remove?, removeFile?, gated?}` or `{ollamaTag}` (a model's source gone or gated on the
emulated Hugging Face Hub or Ollama library). None of them is part of the RunPod API: tests use
them to make the live account drift from the state.
"""

from __future__ import annotations

import re
from typing import Any

from frutebox_infra.emulator import counters
from frutebox_infra.emulator.errors import ApiProblem
from frutebox_infra.emulator.state import Account

VOLUME_TEXT = re.compile(r"^/_emulator/volumes/(?P<id>[^/]+)/texts$")

POD = re.compile(r"^/_emulator/pods/(?P<id>[^/]+)(?:/(?P<verb>terminate|stop|kill-host|traffic))?$")


def _require(body: Any, key: str) -> Any:
    if not isinstance(body, dict) or key not in body:
        raise ApiProblem(400, f"control body needs {key!r}")
    return body[key]


def drive(account: Account, pod_id: str, body: Any) -> dict[str, Any]:
    """The traffic driver: `{requests, outputTokens, model?, key?}` served one by one through
    the pod's first HTTP port as clients would send them, with the stack's serving `key` as a
    client of a gateway pod holds it; answers how many were served."""
    requests, tokens = _require(body, "requests"), body.get("outputTokens", 16)
    if not (isinstance(requests, int) and isinstance(tokens, int) and requests >= 0 < tokens):
        raise ApiProblem(400, "traffic needs requests >= 0 and outputTokens >= 1 (integers)")
    pod = account.pod(pod_id)
    ports = [p for p in pod.body.get("ports") or [] if str(p).endswith("/http")]
    if not ports:
        raise ApiProblem(400, f"pod {pod_id} exposes no HTTP port")
    port = int(str(ports[0]).split("/")[0])
    engine = counters.engine_of(pod)
    path, request = counters.request_of(engine, tokens)
    if engine == "ollama":
        request["model"] = body.get("model") or (pod.pulled[0] if pod.pulled else "")
    key = body.get("key")
    headers = {"authorization": f"Bearer {key}"} if isinstance(key, str) and key else None
    served, last = 0, 0
    for _ in range(requests):
        last, _answer = account.proxy(pod_id, port, "POST", path, request, headers)
        served += last == 200
    return {"served": served, "lastStatus": last}


def out_of_band(account: Account, method: str, path: str, body: Any) -> tuple[int, Any] | None:
    """Apply one out-of-band change; None when `path` is not one of these controls."""
    if match := POD.match(path):
        pod_id, verb = match["id"], match["verb"]
        if method == "POST" and verb == "terminate":
            account.terminate_pod(pod_id)
            return 200, {}
        if method == "POST" and verb == "stop":
            return 200, account.stop_by_hand(pod_id).view(account.clock.now())
        if method == "POST" and verb == "kill-host":
            return 200, account.kill_host(pod_id).view(account.clock.now())
        if method == "POST" and verb == "traffic":
            return 200, drive(account, pod_id, body)
        if method == "PATCH" and verb is None:
            patch = body if isinstance(body, dict) else {}
            return 200, account.edit_by_hand(pod_id, patch).view(account.clock.now())
        return None
    if method == "POST" and (match := VOLUME_TEXT.match(path)):
        where = str(_require(body, "path"))
        text = None if body.get("remove") else str(_require(body, "text"))
        account.write_text(match["id"], where, text)
        return 200, {"path": where, "removed": text is None}
    if (method, path) == ("POST", "/_emulator/prices"):
        gpu_id = account.known_gpu(str(_require(body, "gpuId")))
        secure = account.reprice(gpu_id, _require(body, "secure"))
        return 200, {"gpuId": gpu_id, "secure": secure}
    if (method, path) == ("POST", "/_emulator/stock"):
        gpu_id = account.known_gpu(str(_require(body, "gpuId")))
        available = _require(body, "available")
        account.set_stock(gpu_id, available, body.get("dataCenterId"))
        return 200, {"gpuId": gpu_id, "available": available}
    if (method, path) == ("POST", "/_emulator/hub"):
        return 200, account.storage.hub.change(body)
    if (method, path) == ("POST", "/_emulator/volume-types"):
        dc = account.known_data_center(_require(body, "dataCenterId"))
        types = account.set_volume_types(dc, _require(body, "types"))
        return 200, {"dataCenterId": dc, "types": types}
    if (method, path) == ("POST", "/_emulator/keys"):
        scope = account.set_key(_require(body, "key"), _require(body, "scope"))
        return 200, {"scope": scope.value}
    return None
