"""A wait that has a look to make for what an ambiguous create made wakes when it is due, not
a poll interval later: a duplicate pod bills for as long as the look waits."""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx

from frutebox_infra.runpod.waits import Waits
from tests.runpod.command import TIMEOUTS
from tests.runpod.conftest import Clock, FakeApi, ok, pod


@dataclass
class Looker:
    """Due at the times given (the clock's), and every look it made."""

    clock: Clock
    due: list[float]
    looked: list[float] = field(default_factory=list)

    def look_if_due(self) -> None:
        if self.due and self.clock.now >= self.due[0]:
            self.looked.append(self.clock.now)
            self.due.pop(0)

    def due_in(self) -> float:
        return max(0.0, self.due[0] - self.clock.now) if self.due else float("inf")


def states(*statuses: str) -> list[httpx.Response]:
    return [ok(200, pod(status=s)) for s in statuses]


def test_waiting_for_running_wakes_for_a_due_look(
    waits: Waits, fake: FakeApi, clock: Clock
) -> None:
    fake.on("GET", "/v2/pods/pod1", *states("PROVISIONING", "STARTING", "STARTING", "RUNNING"))
    looker = Looker(clock, due=[0.5, 1.5])
    waits.wait_running("pod1", TIMEOUTS, looker=looker)
    assert looker.looked == [0.5, 1.5]  # not at the 2 s polls
    assert clock.sleeps == [0.5, 1.0, 2]


def test_nothing_to_look_for_keeps_the_poll_interval(
    waits: Waits, fake: FakeApi, clock: Clock
) -> None:
    fake.on("GET", "/v2/pods/pod1", *states("PROVISIONING", "RUNNING"))
    waits.wait_running("pod1", TIMEOUTS, looker=Looker(clock, due=[]))
    assert clock.sleeps == [2]
