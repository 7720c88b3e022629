"""The emulated account: placement and stock, lifecycle over reads, and the API's 400 rules."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frutebox_infra.emulator.catalog import Catalog
from frutebox_infra.emulator.contract import Contract
from frutebox_infra.emulator.errors import CAPACITY_DETAIL, ApiProblem
from frutebox_infra.emulator.records import PodRecord, RawBody
from frutebox_infra.emulator.state import Account
from tests.emulator.conftest import pod_body

CONTRACT = Contract()


def network(volume_id: str) -> dict[str, Any]:
    return {"network": [{"volumeId": volume_id, "path": "/workspace"}]}


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
    assert pod.view()["cost"] == pytest.approx(2 * 3.49)  # registry secure H100 price
    community = account.create_pod(
        pod_body(gpu={"id": "NVIDIA H200", "count": 1}, cloud="COMMUNITY")
    )
    assert community.view()["cost"] == pytest.approx(3.59)


def test_status_moves_one_step_per_read(account: Account) -> None:
    pod = account.create_pod(pod_body())
    seen = [pod.status] + [account.read_pod(pod.id).status for _ in range(3)]
    assert seen == ["PROVISIONING", "STARTING", "RUNNING", "RUNNING"]
    assert account.pod(pod.id).view()["runtime"] is not None


def test_a_pod_error_fault_ends_in_error(account: Account) -> None:
    pod = account.create_pod(pod_body())
    account.mark(pod.id, "pod-error")
    assert [account.read_pod(pod.id).status for _ in range(3)] == ["STARTING", "ERROR", "ERROR"]


def test_views_match_the_official_schemas(account: Account) -> None:
    volume = account.create_volume({"name": "w", "size": 20, "dataCenter": "EU-RO-1"})
    pod = account.create_pod(pod_body(mounts=network(volume.id)))
    views = [pod.view(), account.read_pod(pod.id).view(), account.read_pod(pod.id).view()]
    account.terminate_pod(pod.id)
    views.append(pod.view())
    for view in views:
        assert CONTRACT.errors("Pod", view) == [], view["status"]
    assert CONTRACT.errors("NetworkVolume", volume.view()) == []
    assert views[-1]["cost"] == 0.0


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        pytest.param(pod_body(cpu={"id": "cpu5c", "vcpuCount": 2}), "exactly one", id="gpu+cpu"),
        pytest.param({"name": "p", "image": "i"}, "exactly one", id="neither"),
        pytest.param(
            pod_body(gpu={"id": "NVIDIA GTX 9000", "count": 1}), "unknown GPU", id="unknown-gpu"
        ),
        pytest.param(pod_body(gpu={"id": "NVIDIA A40", "count": 9}), "at most 8", id="count"),
        pytest.param(pod_body(dataCenterIds=["MARS-1"]), "unknown data center", id="unknown-dc"),
        pytest.param(pod_body(mounts=network("nope")), "does not exist", id="no-volume"),
        pytest.param(
            pod_body(
                gpu={"id": "NVIDIA A40", "allowedCudaVersions": ["12.8"], "minCudaVersion": "12.1"}
            ),
            "exclusive",
            id="cuda",
        ),
    ],
)
def test_rules_the_schema_cannot_express_answer_400(
    account: Account, body: dict[str, Any], detail: str
) -> None:
    problem = refused(account, body)
    assert problem.status == 400 and detail in problem.detail


def test_a_network_volume_pins_the_data_centre_and_the_secure_cloud(account: Account) -> None:
    volume = account.create_volume({"name": "w", "size": 20, "dataCenter": "EU-SE-1"})
    elsewhere = refused(account, pod_body(mounts=network(volume.id)))
    assert "dataCenterIds must include it" in elsewhere.detail
    community = refused(
        account, pod_body(mounts=network(volume.id), cloud="COMMUNITY", dataCenterIds=["EU-SE-1"])
    )
    assert "SECURE" in community.detail
    pod = account.create_pod(
        pod_body(mounts=network(volume.id), dataCenterIds=["EU-RO-1", "EU-SE-1"])
    )
    assert pod.data_center_id == "EU-SE-1"


def test_a_template_is_not_found(account: Account) -> None:
    assert refused(account, pod_body(templateId="t1")).status == 404


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
    assert (pod.status, pod.view()["image"]) == ("STARTING", "img:2")
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


def pull_events(answer: tuple[int, Any]) -> tuple[int, list[Any]]:
    status, body = answer
    assert isinstance(body, RawBody) and body.content_type == "application/x-ndjson"
    return status, [json.loads(line) for line in body.data.decode().splitlines()]


def running_pod(account: Account) -> PodRecord:
    pod = account.create_pod(pod_body())
    account.read_pod(pod.id)
    account.read_pod(pod.id)
    return pod


def test_a_streamed_pull_answers_ndjson_progress_then_success(account: Account) -> None:
    pod = running_pod(account)
    status, events = pull_events(account.proxy(pod.id, 8080, "POST", "/api/pull", {"model": "m:1"}))
    assert status == 200
    assert events[0] == {"status": "pulling manifest"}
    assert events[-1] == {"status": "success"}
    progress = [e for e in events if "total" in e]
    assert [e["completed"] for e in progress] == [
        0,
        progress[0]["total"] // 2,
        progress[0]["total"],
    ]
    assert pod.pulled == ["m:1"]


def test_a_failing_pull_streams_an_error_line(account: Account) -> None:
    pod = running_pod(account)
    account.mark(pod.id, "pull-fails")
    body = {"model": "m:1", "stream": True}
    status, events = pull_events(account.proxy(pod.id, 8080, "POST", "/api/pull", body))
    assert status == 200 and "file does not exist" in events[-1]["error"]
    assert not any(e.get("status") == "success" for e in events)
    assert pod.pulled == []


def test_a_pull_that_does_not_stream_is_cut_by_the_proxy(account: Account) -> None:
    pod = running_pod(account)
    body = {"model": "m:1", "stream": False}
    status, answer = account.proxy(pod.id, 8080, "POST", "/api/pull", body)
    assert status == 524 and isinstance(answer, RawBody) and b"524" in answer.data
    assert pod.pulled == []
    assert account.proxy(pod.id, 8080, "POST", "/api/pull", {"stream": True})[0] == 400


def test_ollama_serves_lists_and_deletes_each_pulled_model_of_a_shared_pod(
    account: Account,
) -> None:
    pod = running_pod(account)
    ask = lambda method, path, body=None: account.proxy(pod.id, 8080, method, path, body)  # noqa: E731
    for tag in ("qwen3:8b", "llama3.2:1b"):
        assert ask("POST", "/api/pull", {"model": tag})[0] == 200
    status, tags = ask("GET", "/api/tags")
    assert status == 200 and [m["name"] for m in tags["models"]] == ["qwen3:8b", "llama3.2:1b"]
    for tag in ("qwen3:8b", "llama3.2:1b"):
        status, answer = ask("POST", "/api/generate", {"model": tag, "prompt": "hi"})
        assert status == 200 and answer["model"] == tag
    assert ask("POST", "/api/chat", {"model": "gemma:2b"})[0] == 404  # never pulled
    assert ask("DELETE", "/api/delete", {"model": "llama3.2:1b"})[0] == 200
    assert ask("DELETE", "/api/delete", {"model": "llama3.2:1b"})[0] == 404  # already gone
    assert ask("POST", "/api/generate", {"model": "llama3.2:1b"})[0] == 404
    assert ask("POST", "/api/generate", {"model": "qwen3:8b"})[0] == 200
    assert pod.pulled == ["qwen3:8b"]


def test_snapshot_and_restore_round_trip(account: Account) -> None:
    volume = account.create_volume({"name": "w", "size": 20, "dataCenter": "EU-RO-1"})
    pod = account.create_pod(pod_body(mounts=network(volume.id)))
    account.requests.append({"op": "pods.create"})
    snapshot = account.snapshot()
    assert snapshot["pods"][0]["gpu"] == {"id": "NVIDIA A40", "count": 1}  # API-shaped
    assert snapshot["volumes"][0]["dataCenter"] == "EU-RO-1"
    again = Account.restore(account.catalog, snapshot, None)
    assert again.snapshot() == account.snapshot()
    assert again.pod(pod.id).volume_id == volume.id


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
