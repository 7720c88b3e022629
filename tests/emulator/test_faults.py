"""Fault instructions: parsing, rejection of unknown ones, and FIFO consumption per operation."""

from __future__ import annotations

from typing import Any

import pytest

from frutebox_infra.emulator.clock import ManualClock
from frutebox_infra.emulator.faults import Fault, FaultAction, FaultError, FaultQueue, parse_faults


def test_parses_a_list_or_a_single_instruction() -> None:
    assert parse_faults({"op": "pods.create", "action": "return-500"}) == [
        Fault("pods.create", FaultAction.RETURN_500)
    ]
    faults = parse_faults(
        [
            {"op": "pods.create", "action": "return-429", "retryAfter": 2, "times": 2},
            {"op": "volumes.delete", "action": "return-403"},
        ]
    )
    assert [(f.op, f.status, f.retry_after_s) for f in faults] == [
        ("pods.create", 429, 2),
        ("pods.create", 429, 2),
        ("volumes.delete", 403, 0),
    ]


@pytest.mark.parametrize(
    ("item", "message"),
    [
        pytest.param({"op": "pods.create", "action": "explode"}, "unknown action", id="action"),
        pytest.param({"op": "pods.create"}, "unknown action", id="no-action"),
        pytest.param({"op": "pods.fly", "action": "return-500"}, "unknown op", id="op"),
        pytest.param(
            {"op": "pods.create", "action": "return-500", "x": 1}, "unknown key", id="key"
        ),
        pytest.param(
            {"op": "pods.get", "action": "never-healthy"},
            "only applies to pods.create",
            id="pod-fault-elsewhere",
        ),
        pytest.param(
            {"op": "pods.update", "action": "never-healthy"},
            "only applies to pods.create",
            id="only-a-crash-loop-follows-a-patch",
        ),
        pytest.param(
            {"op": "pods.get", "action": "crash-loop"},
            "only applies to pods.create",
            id="crash-loop-elsewhere",
        ),
        pytest.param(
            {"op": "pods.get", "action": "return-503-after-create"},
            "create operation",
            id="after-create-elsewhere",
        ),
        pytest.param(
            {"op": "pods.list", "action": "return-201-malformed"},
            "create operation",
            id="malformed-elsewhere",
        ),
        pytest.param(
            {"op": "pods.list", "action": "return-429", "retryAfter": -1},
            "retryAfter",
            id="retry-after",
        ),
        pytest.param({"op": "pods.list", "action": "return-500", "times": 0}, "times", id="times"),
        pytest.param("return-500", "not an object", id="not-object"),
    ],
)
def test_unknown_or_misplaced_instructions_are_rejected(item: Any, message: str) -> None:
    with pytest.raises(FaultError, match=message):
        parse_faults([item])


@pytest.mark.parametrize("op", ["pods.create", "pods.update"])
def test_a_crash_loop_applies_to_a_created_or_a_patched_container(op: str) -> None:
    [fault] = parse_faults({"op": op, "action": "crash-loop"})
    queue = FaultQueue()
    queue.add([fault])
    assert fault.affects_pod and queue.take_response(op) is None
    assert queue.take_pod_fault(op) == Fault(op, FaultAction.CRASH_LOOP)


def test_each_operation_has_its_own_fifo() -> None:
    queue = FaultQueue()
    queue.add(
        parse_faults(
            [
                {"op": "pods.create", "action": "return-500"},
                {"op": "pods.list", "action": "return-503"},
                {"op": "pods.create", "action": "return-403"},
            ]
        )
    )
    assert queue.take_response("pods.create") == Fault("pods.create", FaultAction.RETURN_500)
    assert queue.take_response("pods.create") == Fault("pods.create", FaultAction.RETURN_403)
    assert queue.take_response("pods.create") is None
    assert queue.pending() == [{"op": "pods.list", "action": "return-503"}]
    queue.clear()
    assert queue.pending() == []


def test_a_pod_fault_blocks_nothing_and_is_taken_only_as_a_pod_fault() -> None:
    queue = FaultQueue()
    queue.add(
        parse_faults(
            [
                {"op": "pods.create", "action": "pull-fails"},
                {"op": "pods.create", "action": "return-500"},
            ]
        )
    )
    assert queue.take_response("pods.create") is None
    taken = queue.take_pod_fault("pods.create")
    assert taken is not None and taken.affects_pod
    assert queue.take_pod_fault("pods.create") is None
    assert queue.take_response("pods.create") == Fault("pods.create", FaultAction.RETURN_500)


def test_a_timed_fault_answers_every_call_for_its_period_and_periods_follow_each_other() -> None:
    clock = ManualClock(0.0)
    queue = FaultQueue(time_scale=100.0, clock=clock)
    queue.add(parse_faults([
        {"op": "pods.get", "action": "return-503", "forSeconds": 300},
        {"op": "pods.get", "action": "return-429", "retryAfter": 30, "forSeconds": 300},
    ]))  # fmt: skip
    seen = []
    for at in (0.0, 2.9, 3.1, 6.0, 6.2):  # real seconds: the periods last 3 s each at x100
        clock.advance(at - clock.now())
        fault = queue.take_response("pods.get")
        seen.append(fault.status if fault else None)
    assert seen == [503, 503, 429, 429, None]  # the 429 period began at its first call, 3.1


def test_for_seconds_excludes_times_and_pod_faults() -> None:
    with pytest.raises(FaultError, match="forSeconds"):
        parse_faults({"op": "pods.get", "action": "return-503", "forSeconds": 5, "times": 2})
    with pytest.raises(FaultError, match="forSeconds"):
        parse_faults({"op": "pods.create", "action": "never-healthy", "forSeconds": 5})
