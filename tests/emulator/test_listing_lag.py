"""A created object listed late by a delay stated per object, in any order relative to later
creates: RunPod's listing is eventually consistent per object, and the emulator stays as unkind."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from frutebox_infra.emulator.catalog import Catalog
from frutebox_infra.emulator.clock import ManualClock
from frutebox_infra.emulator.faults import FaultAction, FaultError, parse_faults
from frutebox_infra.emulator.realism import Realism
from frutebox_infra.emulator.routes import App
from frutebox_infra.emulator.snapshot import restore, snapshot
from frutebox_infra.emulator.state import Account
from tests.emulator.conftest import OPENAPI, Call, network, pod_body

LAG_S = 5.0
"""The account's own listing lag in these tests (the realistic account's)."""
VOLUME = {"name": "v", "size": 10, "dataCenter": "EU-RO-1"}


@pytest.fixture
def account(clock: ManualClock) -> Account:
    lagging = replace(Realism.fast(), listing_delay_s=LAG_S)
    return Account(Catalog.builtin(), realism=lagging, clock=clock)


@pytest.fixture
def app(account: Account) -> App:
    return App(account, proxy_base="http://127.0.0.1:9", openapi=OPENAPI)


def listed_volumes(call: Call) -> list[str]:
    return [v["id"] for v in call("GET", "/v2/network-volumes").body["networkVolumes"]]


def listed_pods(call: Call) -> list[str]:
    return [p["id"] for p in call("GET", "/v2/pods").body["pods"]]


def fault(call: Call, **item: Any) -> None:
    assert call("POST", "/_emulator/faults", item).status == 200


def created_volume(call: Call) -> str:
    """The id of the volume the last create made, whatever its answer said."""
    return str(call("GET", "/_emulator/state").body["volumes"][-1]["id"])


def test_a_503_d_volume_lists_after_its_own_delay_later_than_the_retried_one(
    call: Call, clock: ManualClock
) -> None:
    fault(call, op="volumes.create", action="return-503-after-create", listAfterSeconds=40)
    assert call("POST", "/v2/network-volumes", VOLUME).status == 503
    first = created_volume(call)
    clock.advance(2)
    retried = call("POST", "/v2/network-volumes", VOLUME).body["id"]
    clock.advance(LAG_S)
    assert listed_volumes(call) == [retried]  # the later create lists first
    clock.advance(40 - LAG_S - 2 - 0.5)
    assert listed_volumes(call) == [retried]
    clock.advance(1)
    assert sorted(listed_volumes(call)) == sorted([first, retried])
    # It was there all along: a read by id does not lag.
    assert call("GET", f"/v2/network-volumes/{first}").status == 200


def test_a_list_late_create_answers_as_usual_and_only_lists_late(
    call: Call, clock: ManualClock
) -> None:
    fault(call, op="pods.create", action="list-late", listAfterSeconds=0)
    fault(call, op="volumes.create", action="list-late", listAfterSeconds=60)
    made = call("POST", "/v2/network-volumes", VOLUME)
    assert made.status == 201 and made.body["name"] == "v"
    at_once = call("POST", "/v2/pods", pod_body(mounts=network(made.body["id"])))
    assert at_once.status == 201
    assert listed_pods(call) == [at_once.body["id"]]  # a stated 0 s beats the account's lag
    clock.advance(59)
    assert listed_volumes(call) == []
    clock.advance(1)
    assert listed_volumes(call) == [made.body["id"]]


def test_an_unreadable_201_can_list_late_too(call: Call, clock: ManualClock) -> None:
    fault(call, op="pods.create", action="return-201-malformed", listAfterSeconds=30)
    assert call("POST", "/v2/pods", pod_body()).status == 201
    clock.advance(LAG_S)
    assert listed_pods(call) == []
    clock.advance(30 - LAG_S)
    assert len(listed_pods(call)) == 1


def test_a_late_listing_outlives_a_restart_of_the_emulator(
    account: Account, call: Call, clock: ManualClock
) -> None:
    fault(call, op="volumes.create", action="list-late", listAfterSeconds=100)
    fault(call, op="pods.create", action="list-late", listAfterSeconds=100)
    call("POST", "/v2/network-volumes", VOLUME)
    call("POST", "/v2/pods", pod_body())
    again = restore(account.catalog, snapshot(account), None, account.realism, clock)
    clock.advance(99)
    assert again.list_volumes() == [] and again.list_pods() == []
    clock.advance(1)
    assert len(again.list_volumes()) == 1 and len(again.list_pods()) == 1


@pytest.mark.parametrize(
    ("item", "message"),
    [
        pytest.param({"op": "volumes.create", "action": "list-late"}, "needs listAfterSeconds",
                     id="list-late-without-delay"),
        pytest.param({"op": "pods.get", "action": "list-late", "listAfterSeconds": 1},
                     "create operation", id="not-a-create"),
        pytest.param({"op": "pods.create", "action": "return-500", "listAfterSeconds": 1},
                     "a create that happens", id="the-create-did-not-happen"),
        pytest.param({"op": "pods.create", "action": "list-late", "listAfterSeconds": -1},
                     "finite emulated seconds >= 0", id="negative"),
        pytest.param({"op": "pods.create", "action": "list-late", "listAfterSeconds": True},
                     "finite emulated seconds >= 0", id="a-boolean"),
        pytest.param({"op": "pods.create", "action": "list-late", "listAfterSeconds": "5"},
                     "finite emulated seconds >= 0", id="text"),
        pytest.param({"op": "pods.create", "action": "list-late", "listAfterSeconds": 5,
                      "forSeconds": 3}, "answers only", id="with-a-period"),
    ],
)  # fmt: skip
def test_a_bad_listing_delay_is_refused_with_its_reason(item: dict[str, Any], message: str) -> None:
    with pytest.raises(FaultError, match=message):
        parse_faults(item)


def test_a_listing_delay_parses_repeats_and_shows_in_the_pending_faults(call: Call) -> None:
    faults = parse_faults({"op": "pods.create", "action": "return-503-after-create",
                           "listAfterSeconds": 30, "times": 2})  # fmt: skip
    assert [(f.action, f.list_after_s) for f in faults] == [
        (FaultAction.RETURN_503_AFTER_CREATE, 30.0)
    ] * 2
    fault(call, op="volumes.create", action="list-late", listAfterSeconds=12.5)
    assert call("GET", "/_emulator/state").body["faults"] == [
        {"op": "volumes.create", "action": "list-late", "listAfterSeconds": 12.5}
    ]
