"""`exposure: private` on a real `pulumi up` against the emulator: preview says the model answers
only the account's own pods; the GPU pod is created with global networking and no port (the
seeding CPU pod as before), nothing answers for it on the proxy, status says it is not
probed; switching the stack to public patches the same pod in place, and its gateway then asks
for the key on the proxy. A data centre without global networking fails preview, naming the fix."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.deployment import SEEDED, Deployment
from tests.e2e.test_status import status

pytestmark = pytest.mark.engine

SGLANG = "qwen-3.6-27b"
STACK = {**SEEDED, "models": [SGLANG], "budgetUsdPerHour": 40, "exposure": "private"}


def proxied(deployment: Deployment, pod_id: str, port: int, path: str) -> httpx.Response:
    template = deployment.emulator.app.proxy_url_template
    url = template.replace("{podId}", pod_id).replace("{port}", str(port)) + path
    return httpx.get(url, timeout=10)


def test_a_private_stack_publishes_nothing_and_switches_to_public_in_place(
    deployment: Deployment,
) -> None:
    project = deployment.project
    project.extra_env["FRUTEBOX_HEALTH_TIMEOUT_S"] = "60"
    project.write_stack("small", STACK)
    preview = project.preview("small")
    assert preview.code == 0, preview.diagnostics
    said = " ".join((preview.diagnostics + preview.stderr).split())
    assert "exposure private: no port is published" in said
    assert f"{SGLANG} private: only the account's own GPU pods, with the key (gateway)" in said
    up = project.up("small")
    assert "it is private (no published port)" in up.stdout + up.stderr
    [body] = deployment.created_bodies()
    assert body["globalNetworking"] is True and body["ports"] == []
    assert all("globalNetworking" not in b and b["ports"] for b in deployment.seed_bodies())
    outputs = project.outputs("small")
    pod_id, url = outputs["pods"][SGLANG]["podId"], outputs["pods"][SGLANG]["url"]
    port = int(url.rsplit(":", 1)[1])
    assert url == f"http://{pod_id}.runpod.internal:{port}"
    [live] = deployment.live_pods()
    assert live["ports"] == [] and live["globalNetworking"]["enabled"] is True
    # The deploy step never asked the proxy; nothing answers for the pod there.
    assert not [r for r in deployment.requests("proxy") if r.get("pod") == pod_id]
    assert proxied(deployment, pod_id, port, "/health").status_code == 404

    code, data, err = status(project, "--health-window", "0", stack="small")
    assert code == 0, (data, err)
    [model] = data["models"]
    assert model["drift"] is None and model["healthy"] is None
    assert model["private"] == {"address": f"{pod_id}.runpod.internal:{port}", "probed": False}

    # Public again: the same pod, its ports and global networking PATCHed, nothing created.
    project.write_stack("small", {**STACK, "exposure": "public"})
    project.up("small")
    after = project.outputs("small")["pods"][SGLANG]
    assert after["podId"] == pod_id and "runpod.internal" not in after["url"]
    assert len(deployment.created_bodies()) == 1
    patches = [r["body"] for r in deployment.requests("pods.update")]
    assert patches == [{"ports": [f"{port}/http"], "globalNetworking": False}]
    assert proxied(deployment, pod_id, port, "/health").status_code == 401  # its gateway


def test_private_where_global_networking_is_not_offered_fails_preview_with_the_fix(
    deployment: Deployment,
) -> None:
    project = deployment.project
    project.write_stack("small", {**STACK, "dataCenter": "EUR-IS-1"})
    preview = project.preview("small")
    said = " ".join((preview.diagnostics + preview.stderr).split())
    assert preview.code != 0 and "private-without-global-network" in said
    assert "EU-RO-1" in said and "frutebox-infra:exposure to public" in said
    assert not deployment.created_bodies() and not deployment.seed_bodies()
