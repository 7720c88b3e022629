"""Pod billing as `GET /v2/billing/pods` reports it: what each pod cost per time bucket.

A pod bills its rate (GPU or CPU) from creation until it is stopped or terminated (and again
after a start); the account keeps those intervals on each PodRecord (`billed`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from frutebox_infra.emulator.errors import ApiProblem
from frutebox_infra.emulator.records import PodRecord
from frutebox_infra.plumbing.times import parse_time

BUCKETS = ("hour", "day", "week", "month", "year")


def stamp(at: datetime) -> str:
    """Billing times keep sub-second precision: emulated pods live for seconds."""
    return at.isoformat()


def open_interval(pod: PodRecord, at: datetime) -> None:
    """The pod holds GPUs from `at` and bills its rate until the interval closes."""
    pod.billed.append([stamp(at), None, pod.cost_per_hour])


def close_interval(pod: PodRecord, at: datetime) -> None:
    if pod.billed and pod.billed[-1][1] is None:
        pod.billed[-1][1] = stamp(at)


def _floor(at: datetime, bucket: str) -> datetime:
    at = at.replace(minute=0, second=0, microsecond=0)
    if bucket == "hour":
        return at
    at = at.replace(hour=0)
    if bucket == "week":
        return at - timedelta(days=at.weekday())
    if bucket == "month":
        return at.replace(day=1)
    if bucket == "year":
        return at.replace(month=1, day=1)
    return at


def _step(at: datetime, bucket: str, n: int = 1) -> datetime:
    if bucket in ("hour", "day", "week"):
        unit = {"hour": timedelta(hours=1), "day": timedelta(days=1), "week": timedelta(weeks=1)}
        return at + unit[bucket] * n
    months = n * (12 if bucket == "year" else 1)
    index = at.year * 12 + at.month - 1 + months
    return at.replace(year=index // 12, month=index % 12 + 1)


def _parse_time(name: str, text: str) -> datetime:
    try:
        return parse_time(text)
    except ValueError:
        raise ApiProblem(400, f"{name} must be an RFC 3339 date-time, got {text!r}") from None


def _one(query: Mapping[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[-1] if values else None


def window(query: Mapping[str, list[str]], now: datetime) -> tuple[datetime, datetime, str]:
    """The resolved [start, end) and bucket size, aligned to bucket boundaries as documented."""
    bucket = _one(query, "bucketSize") or "day"
    if bucket not in BUCKETS:
        raise ApiProblem(400, f"bucketSize must be one of {', '.join(BUCKETS)}, got {bucket!r}")
    last_n, start_text, end_text = (_one(query, k) for k in ("lastN", "startTime", "endTime"))
    if last_n is not None:
        if start_text or end_text:
            raise ApiProblem(400, "lastN is mutually exclusive with startTime/endTime")
        if not last_n.isdigit() or int(last_n) < 1:
            raise ApiProblem(400, f"lastN must be an integer >= 1, got {last_n!r}")
        current = _floor(now, bucket)
        return _step(current, bucket, 1 - int(last_n)), _step(current, bucket), bucket
    end = _parse_time("endTime", end_text) if end_text else now
    start = _parse_time("startTime", start_text) if start_text else end - timedelta(days=30)
    if _floor(end, bucket) != end:
        end = _step(_floor(end, bucket), bucket)
    start = _floor(start, bucket)
    if start >= end:
        raise ApiProblem(400, "startTime must be before endTime")
    return start, end, bucket


def _amount(pod: PodRecord, start: datetime, end: datetime, now: datetime) -> float:
    total = 0.0
    for began, ended, rate in pod.billed:
        lo = max(start, datetime.fromisoformat(began))
        hi = min(end, datetime.fromisoformat(ended) if ended else now)
        if hi > lo:
            total += (hi - lo).total_seconds() / 3600 * float(rate)
    return total


def _amounts(gpu: float, cpu: float = 0.0) -> dict[str, float]:
    total = round(gpu + cpu, 6)
    return {"totalAmount": total, "gpuAmount": gpu, "cpuAmount": cpu, "diskAmount": 0.0}


def pod_billing(
    pods: Iterable[PodRecord], query: Mapping[str, list[str]], now: datetime
) -> dict[str, Any]:
    """The `ListPodBillingResponse` for `query` (bucketSize, lastN or startTime/endTime, podId)
    at `now`: a pod still holding GPUs has billed up to then."""
    start, end, bucket = window(query, now)
    pod_id = _one(query, "podId")
    records: list[dict[str, Any]] = []
    at = start
    while at < end:
        upto = _step(at, bucket)
        for pod in pods:
            if pod_id is not None and pod.id != pod_id:
                continue
            amount = round(_amount(pod, at, upto, now), 6)
            if amount > 0:
                # A CPU pod (no `gpu`) bills as CPU compute.
                split = (amount, 0.0) if pod.gpu else (0.0, amount)
                records.append(
                    {"startTime": stamp(at), "endTime": stamp(upto), "podId": pod.id}
                    | _amounts(*split)
                )
        at = upto
    gpu = round(sum(r["gpuAmount"] for r in records), 6)
    cpu = round(sum(r["cpuAmount"] for r in records), 6)
    return {
        "records": records,
        "metadata": {
            "query": {
                "startTime": stamp(start),
                "endTime": stamp(end),
                "bucketSize": bucket,
                "podId": pod_id,
            },
            "recordCount": len(records),
            "uniquePodCount": len({r["podId"] for r in records}),
            "totals": _amounts(gpu, cpu),
        },
    }
