"""Faults as data: instructions queued per API operation and consumed first in, first out."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from frutebox_infra.emulator.clock import Clock, SystemClock

OPERATIONS = frozenset(
    {
        "pods.list",
        "pods.create",
        "pods.get",
        "pods.update",
        "pods.delete",
        "pods.action",
        "pods.logs",
        "volumes.list",
        "volumes.create",
        "volumes.get",
        "volumes.update",
        "volumes.delete",
    }
)


class FaultAction(StrEnum):
    RETURN_400_CAPACITY = "return-400-capacity"
    RETURN_402 = "return-402"
    RETURN_403 = "return-403"
    RETURN_404 = "return-404"
    RETURN_429 = "return-429"
    RETURN_500 = "return-500"
    RETURN_503 = "return-503"
    RETURN_503_AFTER_CREATE = "return-503-after-create"
    RETURN_201_MALFORMED = "return-201-malformed"
    POD_ERROR = "pod-error"
    NEVER_HEALTHY = "never-healthy"
    PULL_FAILS = "pull-fails"
    CRASH_LOOP = "crash-loop"
    LIST_LATE = "list-late"


# The create happens, but the answer says otherwise (503) or cannot be read (201, not JSON).
AFTER_CREATE = frozenset({FaultAction.RETURN_503_AFTER_CREATE, FaultAction.RETURN_201_MALFORMED})
# Faults after which the create has made its object, so `listAfterSeconds` may say when the
# listing shows it; `list-late` answers as usual and only lists its object late.
CREATES = AFTER_CREATE | {FaultAction.LIST_LATE}
# What the next created pod does instead of serving; the create itself succeeds.
POD_ACTIONS = frozenset(
    {
        FaultAction.POD_ERROR,
        FaultAction.NEVER_HEALTHY,
        FaultAction.PULL_FAILS,
        FaultAction.CRASH_LOOP,
    }
)
# Pod faults that also apply to the container a PATCH restarts.
UPDATE_POD_ACTIONS = frozenset({FaultAction.CRASH_LOOP})
STATUS = {
    FaultAction.RETURN_400_CAPACITY: 400,
    FaultAction.RETURN_402: 402,
    FaultAction.RETURN_403: 403,
    FaultAction.RETURN_404: 404,
    FaultAction.RETURN_429: 429,
    FaultAction.RETURN_500: 500,
    FaultAction.RETURN_503: 503,
    FaultAction.RETURN_503_AFTER_CREATE: 503,
    FaultAction.RETURN_201_MALFORMED: 201,
}


class FaultError(ValueError):
    """An instruction the emulator does not understand; the route answers 400."""


@dataclass(frozen=True)
class Fault:
    """One instruction: `op` fails once with `action` (or, with `for_s`, every time for that
    many emulated seconds); `retry_after_s` only for return-429. `list_after_s`, on a create
    that makes its object: the listing shows that object only this many emulated seconds
    after the create, instead of the account's usual lag, so objects can list in any order
    relative to later creates (RunPod's listing is eventually consistent, per object)."""

    op: str
    action: FaultAction
    retry_after_s: int = 0
    for_s: float | None = None
    list_after_s: float | None = None

    @property
    def status(self) -> int:
        return STATUS[self.action]

    @property
    def affects_pod(self) -> bool:
        return self.action in POD_ACTIONS

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"op": self.op, "action": str(self.action)}
        if self.action is FaultAction.RETURN_429:
            data["retryAfter"] = self.retry_after_s
        if self.for_s is not None:
            data["forSeconds"] = self.for_s
        if self.list_after_s is not None:
            data["listAfterSeconds"] = self.list_after_s
        return data


def parse_faults(data: Any) -> list[Fault]:
    """Read `[{op, action, retryAfter?, listAfterSeconds?, times? | forSeconds?}, ...]` (or
    one such object)."""
    items = data if isinstance(data, list) else [data]
    faults: list[Fault] = []
    for index, item in enumerate(items):
        where = f"fault {index}"
        if not isinstance(item, dict):
            raise FaultError(f"{where} is not an object with op and action")
        unknown = set(item) - {"op", "action", "retryAfter", "times", "forSeconds",
                               "listAfterSeconds"}  # fmt: skip
        if unknown:
            raise FaultError(f"{where} has unknown key(s) {', '.join(sorted(unknown))}")
        op, action = item.get("op"), item.get("action")
        if op not in OPERATIONS:
            raise FaultError(f"{where}: unknown op {op!r}; known: {', '.join(sorted(OPERATIONS))}")
        try:
            kind = FaultAction(str(action))
        except ValueError:
            known = ", ".join(a.value for a in FaultAction)
            raise FaultError(f"{where}: unknown action {action!r}; known: {known}") from None
        if kind in CREATES and not str(op).endswith(".create"):
            raise FaultError(f"{where}: {kind} only applies to a create operation")
        list_after = _list_after(item, kind, where)
        patched = kind in UPDATE_POD_ACTIONS and op == "pods.update"
        if kind in POD_ACTIONS and op != "pods.create" and not patched:
            raise FaultError(f"{where}: {kind} only applies to pods.create")
        retry_after, times = item.get("retryAfter", 0), item.get("times", 1)
        if not isinstance(retry_after, int) or retry_after < 0:
            raise FaultError(f"{where}: retryAfter must be whole seconds >= 0")
        if not isinstance(times, int) or times < 1:
            raise FaultError(f"{where}: times must be an integer >= 1")
        duration = item.get("forSeconds")
        if duration is not None:
            if not isinstance(duration, int | float) or duration <= 0 or "times" in item:
                raise FaultError(f"{where}: forSeconds must be seconds > 0, without times")
            if kind in POD_ACTIONS or kind in CREATES:
                raise FaultError(f"{where}: forSeconds applies to return-* answers only")
            faults.append(Fault(str(op), kind, retry_after, float(duration)))
            continue
        faults.extend(
            Fault(op=str(op), action=kind, retry_after_s=retry_after, list_after_s=list_after)
            for _ in range(times)
        )
    return faults


def _list_after(item: dict[str, Any], kind: FaultAction, where: str) -> float | None:
    """`listAfterSeconds`: emulated seconds >= 0, on a fault whose create makes its object."""
    if "listAfterSeconds" not in item:
        if kind is FaultAction.LIST_LATE:
            raise FaultError(f"{where}: {kind} needs listAfterSeconds (emulated seconds >= 0)")
        return None
    seconds = item["listAfterSeconds"]
    if kind not in CREATES:
        made = ", ".join(sorted(a.value for a in CREATES))
        raise FaultError(f"{where}: listAfterSeconds applies to a create that happens ({made})")
    number = not isinstance(seconds, bool) and isinstance(seconds, int | float)
    if not number or not math.isfinite(seconds) or seconds < 0:
        raise FaultError(f"{where}: listAfterSeconds must be finite emulated seconds >= 0")
    return float(seconds)


class FaultQueue:
    """Pending faults, one FIFO per operation. Not thread-safe: the routes serialise calls.

    A timed fault (`for_s`) answers every call until its period ends; its period starts at
    the first call it answers, so periods of one operation follow each other.
    """

    def __init__(self, *, time_scale: float = 1.0, clock: Clock | None = None) -> None:
        self._queues: dict[str, deque[Fault]] = {}
        self._until: dict[int, float] = {}
        self._scale = time_scale
        self._now = (clock or SystemClock()).now

    def add(self, faults: Iterable[Fault]) -> None:
        for fault in faults:
            self._queues.setdefault(fault.op, deque()).append(fault)

    def _take(self, op: str, *, affects_pod: bool) -> Fault | None:
        queue = self._queues.get(op)
        while queue and (period := queue[0].for_s) is not None:
            head = queue[0]
            # A period starts at the first call it answers, so a test's storm hits the waits
            # it aims at however long the steps before them took.
            ends = self._until.setdefault(id(head), self._now() + period / self._scale)
            if self._now() < ends:
                return head if not affects_pod else None
            del self._until[id(queue.popleft())]
        if queue and queue[0].affects_pod == affects_pod:
            return queue.popleft()
        return None

    def take_response(self, op: str) -> Fault | None:
        """The head fault for `op` if it changes the HTTP answer."""
        return self._take(op, affects_pod=False)

    def take_pod_fault(self, op: str) -> Fault | None:
        """The head fault for `op` if it changes the created pod; kept until a pod is created."""
        return self._take(op, affects_pod=True)

    def clear(self) -> None:
        self._queues.clear()
        self._until.clear()

    def pending(self) -> list[dict[str, Any]]:
        return [f.to_json() for queue in self._queues.values() for f in queue]
