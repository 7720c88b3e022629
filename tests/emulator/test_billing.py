"""Pod billing: the hours each pod held GPUs, per bucket, as `GET /v2/billing/pods` reports them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import pytest

from frutebox_infra.emulator.billing import close_interval, open_interval, pod_billing, window
from frutebox_infra.emulator.clock import ManualClock
from frutebox_infra.emulator.errors import ApiProblem
from frutebox_infra.emulator.records import PodRecord
from tests.emulator.conftest import Call, pod_body, valid

DC = "EU-RO-1"
NOW = datetime(2026, 11, 30, 12, 30, tzinfo=UTC)


def _pod(billed: list[list[Any]], pod_id: str = "p1") -> PodRecord:
    return PodRecord(pod_id, "n", {}, "RUNNING", DC, 1.0, "2026-11-30T00:00:00Z", billed=billed)


def _at(hours: float) -> str:
    return (NOW - timedelta(hours=hours)).isoformat()


def test_an_interval_opens_and_closes_at_the_times_given() -> None:
    pod = _pod([])
    open_interval(pod, NOW - timedelta(minutes=5))
    close_interval(pod, NOW)
    close_interval(pod, NOW + timedelta(hours=1))  # already closed: nothing moves
    assert pod.billed == [[_at(5 / 60), NOW.isoformat(), 1.0]]


def test_billing_buckets_a_pod_by_the_hours_it_held_gpus() -> None:
    # Ran 10:30-11:30 at $2/h, stopped, started again 12:00 at $1/h, still running.
    pods = [_pod([[_at(2), _at(1), 2.0], [_at(0.5), None, 1.0]])]
    body = valid("ListPodBillingResponse", pod_billing(pods, {"bucketSize": ["hour"],
                 "lastN": ["3"]}, NOW))  # fmt: skip
    amounts = {r["startTime"][11:16]: r["totalAmount"] for r in body["records"]}
    assert amounts == {"10:00": 1.0, "11:00": 1.0, "12:00": 0.5}
    assert body["metadata"]["totals"]["totalAmount"] == 2.5
    assert body["metadata"]["query"]["startTime"].startswith("2026-11-30T10:00")
    day = pod_billing(pods, {"bucketSize": ["day"], "lastN": ["7"]}, NOW)
    assert [r["totalAmount"] for r in day["records"]] == [2.5]
    other = pod_billing(pods, {"podId": ["p2"], "lastN": ["1"]}, NOW)
    assert other["records"] == [] and other["metadata"]["uniquePodCount"] == 0


@pytest.mark.parametrize(
    ("bucket", "start", "end"),
    [
        pytest.param("hour", datetime(2026, 11, 30, 12), datetime(2026, 11, 30, 13), id="hour"),
        pytest.param("day", datetime(2026, 11, 30), datetime(2026, 12, 1), id="day"),
        pytest.param("week", datetime(2026, 11, 30), datetime(2026, 12, 7), id="week-monday"),
        pytest.param("month", datetime(2026, 11, 1), datetime(2026, 12, 1), id="month"),
        pytest.param("year", datetime(2026, 1, 1), datetime(2027, 1, 1), id="year"),
    ],
)
def test_last_one_is_the_current_bucket(bucket: str, start: datetime, end: datetime) -> None:
    got = window({"bucketSize": [bucket], "lastN": ["1"]}, NOW)
    assert got == (start.replace(tzinfo=UTC), end.replace(tzinfo=UTC), bucket)


def test_billing_window_without_lastN_defaults_to_thirty_days() -> None:
    start, end, bucket = window({}, NOW)
    assert bucket == "day" and end == datetime(2026, 12, 1, tzinfo=UTC)
    assert start == datetime(2026, 10, 31, tzinfo=UTC)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        pytest.param({"bucketSize": ["minute"]}, "bucketSize must be one of", id="bad-bucket"),
        pytest.param({"lastN": ["0"]}, "lastN must be an integer >= 1", id="lastN-zero"),
        pytest.param(
            {"lastN": ["2"], "startTime": ["2026-11-01T00:00:00Z"]}, "exclusive", id="exclusive"
        ),
        pytest.param({"startTime": ["yesterday"]}, "RFC 3339", id="bad-time"),
        pytest.param(
            {"startTime": ["2026-12-01T00:00:00Z"], "endTime": ["2026-11-01T00:00:00Z"]},
            "before endTime",
            id="reversed",
        ),
    ],
)
def test_billing_rejects_a_bad_query(call: Call, query: dict[str, list[str]], message: str) -> None:
    with pytest.raises(ApiProblem, match=message):
        window(query, NOW)
    response = call("GET", "/v2/billing/pods?" + urlencode(query, doseq=True))
    assert response.status == 400 and message in response.body["detail"]


def test_a_pod_bills_by_the_accounts_clock_until_it_is_stopped(
    call: Call, clock: ManualClock
) -> None:
    pod = call("POST", "/v2/pods", pod_body()).body  # an A40 at $0.40/h
    clock.advance(1800)
    body = valid("ListPodBillingResponse", call("GET", "/v2/billing/pods?lastN=1").body)
    [record] = body["records"]
    assert record["podId"] == pod["id"] and record["totalAmount"] == pytest.approx(0.20)
    assert call("POST", f"/_emulator/pods/{pod['id']}/stop").status == 200
    clock.advance(3600)
    again = call("GET", "/v2/billing/pods?lastN=1").body["records"][0]["totalAmount"]
    assert again == pytest.approx(0.20)  # stopped: nothing more accrues
