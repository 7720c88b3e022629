"""The one clock: the system's follows wall time and never steps back; a manual one only moves
when told."""

from __future__ import annotations

import ast
import time
from datetime import UTC, datetime

import pytest

from frutebox_infra.emulator.clock import MANUAL_START_S, Clock, ManualClock, SystemClock
from tests.factories import ROOT

READS_TIME = {"time", "monotonic", "perf_counter", "now", "utcnow", "today"}
"""`time.time()`, `datetime.now()`, ...: a read of the machine's clock."""


def test_the_system_clock_reads_wall_time_in_epoch_seconds() -> None:
    clock = SystemClock()
    before = time.time()
    now = clock.now()
    assert before - 1 < now < time.time() + 1
    assert abs(clock.utc().timestamp() - clock.now()) < 1
    assert clock.utc().tzinfo is UTC


def test_the_system_clock_ignores_a_step_of_the_wall_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = SystemClock()
    first = clock.now()
    monkeypatch.setattr(time, "time", lambda: 0.0)  # the system's clock set back to 1970
    assert clock.now() >= first


def test_a_manual_clock_moves_only_when_advanced() -> None:
    clock = ManualClock()
    assert clock.now() == MANUAL_START_S == clock.now()
    clock.advance(4.5)
    assert clock.now() == MANUAL_START_S + 4.5
    assert clock.utc() == datetime(2026, 11, 30, 12, 0, 4, 500000, tzinfo=UTC)
    clock.advance(0)
    assert clock.now() == MANUAL_START_S + 4.5


def test_a_manual_clock_never_goes_back() -> None:
    clock = ManualClock(100.0)
    with pytest.raises(ValueError, match="forwards"):
        clock.advance(-0.001)
    assert clock.now() == 100.0


def test_any_object_with_now_is_a_clock_and_gets_utc_from_it() -> None:
    class Fixed(Clock):
        def now(self) -> float:
            return 86400.0

    assert Fixed().utc() == datetime(1970, 1, 2, tzinfo=UTC)


def _time_reads(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            names = [a.name for a in node.names]
            if module == "time" or "time" in names:
                found.append(f"line {node.lineno}: imports time")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in READS_TIME
            and isinstance(node.value, ast.Name)
            and node.value.id in {"time", "datetime", "date"}
        ):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_the_emulator_reads_time_only_through_its_clock() -> None:
    """One clock: a module reading the machine's would escape a test's manual clock."""
    emulator = ROOT / "frutebox_infra" / "emulator"
    reads = {
        path.name: found
        for path in sorted(emulator.glob("*.py"))
        if path.name != "clock.py" and (found := _time_reads(path.read_text(encoding="utf-8")))
    }
    assert reads == {}
    assert _time_reads((emulator / "clock.py").read_text(encoding="utf-8"))  # the check sees


def test_the_time_check_sees_each_way_of_reading_the_clock() -> None:
    source = (
        "import time\nfrom datetime import datetime\nfrom time import monotonic\n"
        "a = time.monotonic()\nb = datetime.now()\nc = stamp.now()\n"
    )
    assert _time_reads(source) == [
        "line 1: imports time",
        "line 3: imports time",
        "line 4: time.monotonic",
        "line 5: datetime.now",
    ]
