"""The account as JSON and back: API-shaped, complete, and carrying its lags across a restart."""

from __future__ import annotations

import json

from frutebox_infra.emulator.catalog import Catalog
from frutebox_infra.emulator.clock import ManualClock
from frutebox_infra.emulator.realism import Realism
from frutebox_infra.emulator.snapshot import restore, snapshot
from frutebox_infra.emulator.state import Account
from tests.emulator.conftest import network, pod_body


def with_pod(account: Account) -> tuple[str, str]:
    volume = account.create_volume({"name": "w", "size": 20, "dataCenter": "EU-RO-1"})
    return account.create_pod(pod_body(mounts=network(volume.id))).id, volume.id


def reloaded(account: Account, clock: ManualClock) -> Account:
    """The account as an emulator started again on `clock` reads it from its state file."""
    data = json.loads(json.dumps(snapshot(account)))
    return restore(account.initial_catalog, data, None, account.realism, clock)


def test_the_snapshot_shows_pods_and_volumes_as_the_api_does(account: Account) -> None:
    pod_id, volume_id = with_pod(account)
    account.requests.append({"op": "pods.create"})
    data = snapshot(account)
    [pod] = data["pods"]
    assert (pod["id"], pod["gpu"], pod["status"]) == (pod_id, {"id": "NVIDIA A40", "count": 1},
                                                       "PROVISIONING")  # fmt: skip
    assert pod["emulator"]["created_wall"] == account.clock.now()
    assert data["volumes"][0]["id"] == volume_id and data["volumes"][0]["dataCenter"] == "EU-RO-1"
    assert data["requests"] == [{"op": "pods.create"}]
    assert data["outOfBand"] == {"prices": {}, "volumeTypes": {}}


def test_a_round_trip_keeps_everything(account: Account, clock: ManualClock) -> None:
    pod_id, volume_id = with_pod(account)
    account.reprice("NVIDIA A40", 0.61)
    account.set_volume_types("EU-RO-1", ["HIGH_PERFORMANCE"])
    again = reloaded(account, clock)
    assert snapshot(again) == snapshot(account)
    assert again.pod(pod_id).volume_id == volume_id
    assert again.catalog.usd_per_hour("NVIDIA A40", "SECURE") == 0.61
    assert again.stock == account.stock


def test_an_explicit_stock_replaces_the_saved_one(account: Account, clock: ManualClock) -> None:
    with_pod(account)
    data = json.loads(json.dumps(snapshot(account)))
    again = restore(account.initial_catalog, data, {("NVIDIA A40", "EU-RO-1"): 7}, None, clock)
    assert again.stock == again.initial_stock == {("NVIDIA A40", "EU-RO-1"): 7}


def test_lags_and_loads_carry_on_across_a_restart(clock: ManualClock) -> None:
    realism = Realism.realistic()
    account = Account(Catalog.builtin(), realism=realism, clock=clock)
    pod_id, volume_id = with_pod(account)
    clock.advance(realism.listing_delay_s * 0.5)
    later = ManualClock(clock.now())  # a new emulator process, the same wall time
    again = reloaded(account, later)
    assert again.list_pods() == [] and again.list_volumes() == []
    later.advance(realism.listing_delay_s * 0.5)
    assert [p.id for p in again.list_pods()] == [pod_id]
    assert [v.id for v in again.list_volumes()] == [volume_id]
    again.read_pod(pod_id)
    again.read_pod(pod_id)
    restarted = reloaded(again, later)
    assert restarted.pods[pod_id].loading(later.now())
    later.advance(restarted.pods[pod_id].load_s)
    assert not restarted.pods[pod_id].loading(later.now())
    assert restarted.pods[pod_id].uptime(later.now()) == int(restarted.pods[pod_id].load_s)
