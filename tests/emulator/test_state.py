"""The emulated account: placement and stock, lifecycle over reads, and the API's 400 rules."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frutebox_infra.emulator.catalog import Catalog
from frutebox_infra.emulator.clock import ManualClock
from frutebox_infra.emulator.errors import CAPACITY_DETAIL, ApiProblem
from frutebox_infra.emulator.realism import Realism
from frutebox_infra.emulator.records import PodRecord
from frutebox_infra.emulator.state import Account
from tests.emulator.conftest import network, pod_body, valid


def running_pod(account: Account) -> PodRecord:
    pod = account.create_pod(pod_body())
    account.read_pod(pod.id)
    account.read_pod(pod.id)
    return pod


def refused(account: Account, body: dict[str, Any]) -> ApiProblem:
    with pytest.raises(ApiProblem) as caught:
        account.create_pod(body)
    return caught.value


def test_a_pod_takes_stock_in_the_first_listed_data_centre_with_room() -> None:
    account = Account(
        Catalog.builtin(), {("NVIDIA A40", "EU-RO-1"): 1, ("NVIDIA A40", "EU-SE-1"): 4}
    )
    pod = account.create_pod(
        pod_body(gpu={"id": "NVIDIA A40", "count": 2}, dataCenterIds=["EU-RO-1", "EU-SE-1"])
    )
    assert pod.data_center_id == "EU-SE-1"
    assert account.stock[("NVIDIA A40", "EU-SE-1")] == 2
    assert account.stock[("NVIDIA A40", "EU-RO-1")] == 1


def test_no_stock_answers_the_capacity_400_and_terminating_frees_it() -> None:
    account = Account(Catalog.builtin(), {("NVIDIA A40", "EU-RO-1"): 1})
    first = account.create_pod(pod_body())
    problem = refused(account, pod_body())
    assert (problem.status, problem.detail) == (400, CAPACITY_DETAIL)
    account.terminate_pod(first.id)
    assert account.create_pod(pod_body()).data_center_id == "EU-RO-1"


def test_cost_is_the_gpu_price_times_the_count() -> None:
    account = Account(Catalog.builtin())
    pod = account.create_pod(pod_body(gpu={"id": "NVIDIA H100 80GB HBM3", "count": 2}))
    assert pod.cost_per_hour == pytest.approx(2 * 3.49)  # registry secure H100 price
    community = account.create_pod(
        pod_body(gpu={"id": "NVIDIA H200", "count": 1}, cloud="COMMUNITY")
    )
    assert community.cost_per_hour == pytest.approx(3.59)


def test_status_moves_one_step_per_read(account: Account) -> None:
    pod = account.create_pod(pod_body())
    seen = [pod.status] + [account.read_pod(pod.id).status for _ in range(3)]
    assert seen == ["PROVISIONING", "STARTING", "RUNNING", "RUNNING"]
    assert pod.started_wall == account.clock.now()


def test_a_pod_error_fault_ends_in_error(account: Account) -> None:
    pod = account.create_pod(pod_body())
    account.mark(pod.id, "pod-error")
    assert [account.read_pod(pod.id).status for _ in range(3)] == ["STARTING", "ERROR", "ERROR"]


def test_views_match_the_official_schemas(account: Account) -> None:
    volume = account.create_volume({"name": "w", "size": 20, "dataCenter": "EU-RO-1"})
    pod = account.create_pod(pod_body(mounts=network(volume.id)))
    now = account.clock.now()
    views = [pod.view(now), account.read_pod(pod.id).view(now), account.read_pod(pod.id).view(now)]
    account.terminate_pod(pod.id)
    views.append(pod.view(now))
    for view in views:
        valid("Pod", view)
    valid("NetworkVolume", volume.view())
    assert views[-1]["cost"] == 0.0


def test_terminated_pods_leave_the_list_and_answer_404(account: Account) -> None:
    pod = account.create_pod(pod_body())
    account.terminate_pod(pod.id)
    assert account.list_pods() == []
    with pytest.raises(ApiProblem) as caught:
        account.read_pod(pod.id)
    assert caught.value.status == 404
    assert account.pods[pod.id].status == "TERMINATED"


def test_patch_restarts_the_container_and_guards_mounts(account: Account) -> None:
    volume = account.create_volume({"name": "w", "size": 20, "dataCenter": "EU-RO-1"})
    pod = account.create_pod(pod_body(mounts=network(volume.id)))
    account.read_pod(pod.id)
    account.read_pod(pod.id)
    account.update_pod(pod.id, {"image": "img:2"})
    assert (pod.status, pod.body["image"]) == ("STARTING", "img:2")
    patches: list[dict[str, Any]] = [
        {"mounts": {"network": []}},
        {"mounts": network("other")},
        {"mounts": {"persistent": {"size": 20, "path": "/p"}}},
    ]
    for patch in patches:
        with pytest.raises(ApiProblem) as caught:
            account.update_pod(pod.id, patch)
        assert caught.value.status == 400
    account.update_pod(pod.id, {"mounts": {}, "name": "renamed"})
    assert pod.name == "renamed" and pod.volume_id == volume.id


def test_actions_follow_the_published_transitions(account: Account) -> None:
    account.initial_stock = account.stock = {("NVIDIA A40", "EU-RO-1"): 1}
    pod = account.create_pod(pod_body())
    assert account.pod_action(pod.id, "stop") is pod and pod.status == "EXITED"
    assert account.stock[("NVIDIA A40", "EU-RO-1")] == 1
    with pytest.raises(ApiProblem) as caught:
        account.pod_action(pod.id, "restart")
    assert caught.value.status == 409
    account.pod_action(pod.id, "start")
    assert (pod.status, account.stock[("NVIDIA A40", "EU-RO-1")]) == ("PROVISIONING", 0)
    assert account.pod_action(pod.id, "terminate") is None


def test_volume_rules(account: Account) -> None:
    volume = account.create_volume({"name": "w", "size": 100, "dataCenter": "EU-RO-1"})
    with pytest.raises(ApiProblem, match="cannot be reduced"):
        account.update_volume(volume.id, {"size": 99})
    assert account.update_volume(volume.id, {"size": 100, "name": "x"}).name == "x"
    pod = account.create_pod(pod_body(mounts=network(volume.id)))
    with pytest.raises(ApiProblem, match="mounted by pod"):
        account.delete_volume(volume.id)
    account.terminate_pod(pod.id)
    account.delete_volume(volume.id)
    assert account.list_volumes() == []
    with pytest.raises(ApiProblem, match="not found"):
        account.volume(volume.id)
    with pytest.raises(ApiProblem, match="unknown data center"):
        account.create_volume({"name": "w", "size": 10, "dataCenter": "MARS-1"})


def test_the_proxy_serves_only_running_healthy_pods(account: Account) -> None:
    pod = account.create_pod(pod_body())
    assert account.proxy(pod.id, 8080, "GET", "/health", None)[0] == 502
    account.read_pod(pod.id)
    account.read_pod(pod.id)
    assert account.proxy(pod.id, 8080, "GET", "/health", None)[0] == 200
    assert account.proxy(pod.id, 9999, "GET", "/health", None)[0] == 404
    account.mark(pod.id, "never-healthy")
    assert account.proxy(pod.id, 8080, "GET", "/health", None)[0] == 502
    account.terminate_pod(pod.id)
    assert account.proxy(pod.id, 8080, "GET", "/health", None)[0] == 404


OPS = st.lists(
    st.tuples(
        st.sampled_from(["create", "terminate", "stop", "start"]),
        st.integers(0, 5),
        st.integers(1, 3),
    ),
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(ops=OPS)
def test_stock_is_conserved(ops: list[tuple[str, int, int]]) -> None:
    initial = {("NVIDIA A40", "EU-RO-1"): 4, ("NVIDIA A40", "EU-SE-1"): 2}
    account = Account(Catalog.builtin(), initial)
    for op, pick, count in ops:
        ids = list(account.pods)
        try:
            if op == "create":
                account.create_pod(
                    pod_body(
                        gpu={"id": "NVIDIA A40", "count": count},
                        dataCenterIds=["EU-RO-1", "EU-SE-1"],
                    )
                )
            elif ids:
                target = ids[pick % len(ids)]
                if op == "terminate":
                    account.terminate_pod(target)
                else:
                    account.pod_action(target, op)
        except ApiProblem:
            pass
        held: dict[tuple[str, str], int] = {}
        for pod in account.pods.values():
            if pod.status not in ("EXITED", "TERMINATED"):
                key = ("NVIDIA A40", pod.data_center_id)
                held[key] = held.get(key, 0) + pod.body["gpu"]["count"]
        for key, total in initial.items():
            assert account.stock[key] + held.get(key, 0) == total
            assert account.stock[key] >= 0


def test_every_time_the_account_keeps_comes_from_its_clock(
    account: Account, clock: ManualClock
) -> None:
    created_at = clock.now()
    pod = account.create_pod(pod_body())
    assert (pod.created_wall, pod.created_at) == (created_at, "2026-11-30T12:00:00Z")
    assert pod.billed == [["2026-11-30T12:00:00+00:00", None, pod.cost_per_hour]]
    clock.advance(90.5)
    account.read_pod(pod.id)
    account.read_pod(pod.id)
    assert (pod.started_wall, pod.started_at) == (created_at + 90.5, "2026-11-30T12:01:30Z")
    clock.advance(3600)
    account.pod_action(pod.id, "stop")
    assert pod.billed[0][1] == "2026-11-30T13:01:30.500000+00:00"


def test_someone_elses_pods_have_run_for_a_day_by_the_accounts_clock(clock: ManualClock) -> None:
    realism = Realism.realistic(foreign_pod_names=("frutebox-dev-x",))
    account = Account(Catalog.builtin(), realism=realism, clock=clock)
    [theirs] = account.list_pods()
    assert theirs.foreign and theirs.uptime(clock.now()) == 86400


# Out-of-band changes


def test_a_stop_by_hand_frees_the_gpus_and_a_terminated_pod_cannot_be_stopped(
    account: Account,
) -> None:
    account.initial_stock = account.stock = {("NVIDIA A40", "EU-RO-1"): 1}
    pod = account.create_pod(pod_body())
    assert account.stop_by_hand(pod.id) is pod and pod.status == "EXITED"
    assert account.stock[("NVIDIA A40", "EU-RO-1")] == 1 and pod.billed[-1][1] is not None
    with pytest.raises(ApiProblem, match="not valid for a pod in status EXITED"):
        account.stop_by_hand(pod.id)
    account.terminate_pod(pod.id)
    with pytest.raises(ApiProblem) as caught:
        account.stop_by_hand(pod.id)
    assert caught.value.status == 404


def test_a_hand_edit_changes_only_what_the_console_offers_and_restarts(account: Account) -> None:
    pod = running_pod(account)
    with pytest.raises(ApiProblem, match="cannot edit cloud, gpu out of band"):
        account.edit_by_hand(pod.id, {"gpu": {"id": "NVIDIA H200"}, "cloud": "COMMUNITY"})
    assert pod.status == "RUNNING"
    account.edit_by_hand(pod.id, {"args": "by hand", "name": "renamed"})
    assert (pod.body["args"], pod.name, pod.status) == ("by hand", "renamed", "STARTING")


def test_a_new_price_applies_to_pods_created_after_it(account: Account) -> None:
    before = account.create_pod(pod_body())
    assert account.reprice("NVIDIA A40", 0.55) == 0.55
    after = account.create_pod(pod_body())
    assert (before.cost_per_hour, after.cost_per_hour) == (0.40, 0.55)
    assert account.initial_catalog.usd_per_hour("NVIDIA A40", "SECURE") == 0.40


@pytest.mark.parametrize(
    ("gpu_id", "secure", "message"),
    [
        pytest.param("NVIDIA GTX 1", 1.0, "unknown GPU type 'NVIDIA GTX 1'", id="gpu"),
        pytest.param("NVIDIA A40", -0.01, "secure must be a price", id="negative"),
        pytest.param("NVIDIA A40", "cheap", "secure must be a price", id="not-a-number"),
    ],
)
def test_a_bad_price_is_refused(
    account: Account, gpu_id: str, secure: object, message: str
) -> None:
    with pytest.raises(ApiProblem, match=message):
        account.reprice(gpu_id, secure)
    assert account.catalog == account.initial_catalog


def test_a_price_of_zero_is_a_price(account: Account) -> None:
    assert account.reprice("NVIDIA A40", 0) == 0.0


def test_stock_is_set_in_one_data_centre_or_in_every_one(account: Account) -> None:
    account.set_stock("NVIDIA A40", 0)
    assert {n for (g, _), n in account.stock.items() if g == "NVIDIA A40"} == {0}
    account.set_stock("NVIDIA A40", 2, "EU-SE-1")
    assert account.create_pod(pod_body(dataCenterIds=["EU-RO-1", "EU-SE-1"])).data_center_id == (
        "EU-SE-1"
    )
    assert account.stock[("NVIDIA A40", "EU-SE-1")] == 1
    for args, message in (
        (("NVIDIA A40", -1), "available must be a count"),
        (("NVIDIA A40", 1.5), "available must be a count"),
        (("NVIDIA A40", 1, "MARS-1"), "unknown data center 'MARS-1'"),
        (("NVIDIA GTX 1", 1), "unknown GPU type"),
    ):
        with pytest.raises(ApiProblem, match=message):
            account.set_stock(*args)
    assert account.stock[("NVIDIA A40", "EU-SE-1")] == 1


def test_volume_tiers_set_by_hand_replace_the_data_centres(account: Account) -> None:
    assert account.set_volume_types("EU-RO-1", []) == []
    assert account.volume_types == {"EU-RO-1": []}
    with pytest.raises(ApiProblem, match="types must be a list"):
        account.set_volume_types("EU-RO-1", "STANDARD")
    with pytest.raises(ApiProblem, match="unknown data center"):
        account.set_volume_types("MARS-1", ["STANDARD"])
    account.reset()
    assert account.volume_types == {}


def test_saved_changes_are_the_prices_and_tiers_changed_and_restore_onto_a_fresh_account(
    account: Account,
) -> None:
    assert account.saved_changes() == {"prices": {}, "volumeTypes": {}}
    account.reprice("NVIDIA A40", 0.61)
    account.reprice("NVIDIA H200", account.initial_catalog.usd_per_hour("NVIDIA H200", "SECURE"))
    account.set_volume_types("EU-RO-1", ["HIGH_PERFORMANCE"])
    saved = account.saved_changes()
    assert saved == {
        "prices": {"NVIDIA A40": 0.61},
        "volumeTypes": {"EU-RO-1": ["HIGH_PERFORMANCE"]},
    }
    fresh = Account(Catalog.builtin())
    fresh.restore_changes(
        json.loads(json.dumps({**saved, "prices": {**saved["prices"], "gone": 1}}))
    )
    assert fresh.saved_changes() == saved
    fresh.restore_changes(None)
    assert fresh.saved_changes() == saved
