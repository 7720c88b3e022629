"""The out-of-band routes: each parsed into the account's own change, bad bodies named."""

from __future__ import annotations

from typing import Any

import pytest

from frutebox_infra.emulator.control import out_of_band
from frutebox_infra.emulator.errors import ApiProblem
from frutebox_infra.emulator.routes import App
from frutebox_infra.emulator.state import Account
from tests.emulator.conftest import Call, pod_body, valid

A40, DC = "NVIDIA A40", "EU-RO-1"


def test_terminate_stop_and_hand_edit_a_pod(call: Call, app: App) -> None:
    pod = call("POST", "/v2/pods", pod_body()).body
    edited = call("PATCH", f"/_emulator/pods/{pod['id']}", {"args": "by hand"})
    assert edited.status == 200 and valid("Pod", edited.body)["args"] == "by hand"
    refused = call("PATCH", f"/_emulator/pods/{pod['id']}", {"cloud": "X"})
    assert (refused.status, refused.body["detail"]) == (400, "cannot edit cloud out of band")
    stopped = call("POST", f"/_emulator/pods/{pod['id']}/stop")
    assert stopped.status == 200 and valid("Pod", stopped.body)["status"] == "EXITED"
    assert call("POST", f"/_emulator/pods/{pod['id']}/terminate").body == {}
    assert call("GET", f"/v2/pods/{pod['id']}").status == 404
    assert call("POST", f"/_emulator/pods/{pod['id']}/stop").status == 404


def test_price_stock_and_tiers_change_what_the_api_then_answers(call: Call, app: App) -> None:
    assert call("POST", "/_emulator/prices", {"gpuId": A40, "secure": 0.55}).body == {
        "gpuId": A40,
        "secure": 0.55,
    }
    gpus = call("GET", "/v2/catalog/gpus").body["gpus"]
    assert next(g for g in gpus if g["id"] == A40)["price"]["secure"] == 0.55
    assert call("POST", "/v2/pods", pod_body()).body["cost"] == 0.55
    stock = call("POST", "/_emulator/stock", {"gpuId": A40, "available": 0, "dataCenterId": DC})
    assert stock.body == {"gpuId": A40, "available": 0}
    assert call("POST", "/v2/pods", pod_body()).status == 400
    tiers = call("POST", "/_emulator/volume-types", {"dataCenterId": DC, "types": ["STANDARD"]})
    assert tiers.body == {"dataCenterId": DC, "types": ["STANDARD"]}
    call("POST", "/_emulator/reset")
    assert app.account.catalog.usd_per_hour(A40, "SECURE") == 0.40
    assert app.account.volume_types == {}


@pytest.mark.parametrize(
    ("path", "body", "detail"),
    [
        pytest.param("prices", {"secure": 1}, "control body needs 'gpuId'", id="price-gpu"),
        pytest.param(
            "prices", {"gpuId": "nope"}, "unknown GPU type 'nope'", id="price-gpu-before-secure"
        ),
        pytest.param("prices", {"gpuId": A40}, "control body needs 'secure'", id="price-value"),
        pytest.param("prices", {"gpuId": A40, "secure": -1}, "USD per GPU", id="price-negative"),
        pytest.param("prices", [A40], "control body needs 'gpuId'", id="price-not-an-object"),
        pytest.param("stock", {"gpuId": A40}, "control body needs 'available'", id="stock-count"),
        pytest.param(
            "stock", {"gpuId": A40, "available": "lots"}, "count of GPUs", id="stock-not-a-count"
        ),
        pytest.param(
            "stock",
            {"gpuId": A40, "available": 1, "dataCenterId": "MARS-1"},
            "unknown data center 'MARS-1'",
            id="stock-centre",
        ),
        pytest.param("volume-types", {"types": []}, "needs 'dataCenterId'", id="tiers-centre"),
        pytest.param(
            "volume-types", {"dataCenterId": "MARS-1"}, "unknown data center", id="tiers-unknown"
        ),
        pytest.param("volume-types", {"dataCenterId": DC}, "needs 'types'", id="tiers-types"),
        pytest.param(
            "volume-types", {"dataCenterId": DC, "types": [1]}, "list of volume types", id="tiers"
        ),
    ],
)
def test_a_bad_control_body_is_a_400_naming_what_is_wrong(
    account: Account, path: str, body: Any, detail: str
) -> None:
    with pytest.raises(ApiProblem) as caught:
        out_of_band(account, "POST", f"/_emulator/{path}", body)
    assert caught.value.status == 400 and detail in caught.value.detail
    assert account.saved_changes() == {"prices": {}, "volumeTypes": {}}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        pytest.param("GET", "/_emulator/prices", id="wrong-method"),
        pytest.param("POST", "/_emulator/pods/p1/restart", id="unknown-verb"),
        pytest.param("PATCH", "/_emulator/pods/p1/stop", id="patch-a-verb"),
        pytest.param("DELETE", "/_emulator/pods/p1", id="delete"),
        pytest.param("POST", "/_emulator/weather", id="unknown-control"),
    ],
)
def test_anything_else_is_not_a_control(account: Account, method: str, path: str) -> None:
    assert out_of_band(account, method, path, {}) is None


def test_an_unknown_control_is_404_and_a_body_that_is_not_json_400(call: Call) -> None:
    assert call("POST", "/_emulator/weather").status == 404
    assert call("POST", "/_emulator/prices", raw=b"{").body["detail"] == (
        "control body is not valid JSON"
    )


def test_the_hub_control_takes_a_source_away(call: Call, app: App) -> None:
    app.account.storage.hub.repo("org/m").files["a.safetensors"] = 10
    changed = call("POST", "/_emulator/hub", {"repo": "org/m", "removeFile": "a.safetensors"})
    assert changed.status == 200 and changed.body == {"repo": "org/m", "files": 0, "gated": False}
    assert call("POST", "/_emulator/hub", {"repo": "no/such"}).status == 400
    app.account.reset()  # the hub as built again
    assert "org/m" not in app.account.storage.hub.repos
