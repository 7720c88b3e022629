"""What is on each network volume, and the downloads that put it there, on the account's clock.

A volume keeps files across pods: what a seeding CPU pod fetched is there for the GPU pod that
mounts it next. A download is kept on the pod making it (`PodRecord.transfer`): the files it
brings, in order, at one speed from a moment after its container started. Where it stands is
worked out when someone looks (a status read, a later pod's start, the pod's end), so nothing
runs in the background and a manual clock moves every byte.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from frutebox_infra.emulator.records import PodRecord, VolumeRecord


@dataclass(frozen=True)
class Piece:
    """One file a pod brings: its path below the mount and its size, bytes."""

    path: str
    size: int


def have(volume: VolumeRecord, path: str) -> int:
    """Bytes of `path` on the volume (0 when absent)."""
    entry = volume.files.get(path)
    return entry[1] if entry else 0


def complete(volume: VolumeRecord, path: str, size: int) -> bool:
    return have(volume, path) >= size and path in volume.files


def missing(volume: VolumeRecord, pieces: Iterable[Piece]) -> list[Piece]:
    return [p for p in pieces if not complete(volume, p.path, p.size)]


def used_bytes(volume: VolumeRecord) -> int:
    return sum(entry[1] for entry in volume.files.values())


def free_bytes(volume: VolumeRecord) -> int:
    return max(0, volume.size * 10**9 - used_bytes(volume))


def write(volume: VolumeRecord, path: str, size: int, present: int) -> None:
    """Record `present` bytes of `path`; a file never shrinks by another pod's lag."""
    before = have(volume, path)
    volume.files[path] = [size, min(size, max(before, present))]


def remove(volume: VolumeRecord, path: str) -> None:
    volume.files.pop(path, None)


def listed(volume: VolumeRecord, prefix: str) -> list[str]:
    """Complete files below `prefix`, as a directory listing would show them."""
    return sorted(
        path
        for path, (size, present) in volume.files.items()
        if path.startswith(prefix) and present >= size
    )


def start_transfer(
    pod: PodRecord,
    volume: VolumeRecord,
    pieces: Sequence[Piece],
    *,
    after_s: float,
    bytes_per_s: float | None,
    refs: Sequence[tuple[str, str]] = (),
) -> None:
    """`pod` brings `pieces` (in order) onto `volume` from `after_s` real seconds after its
    container starts, at `bytes_per_s` real (None: at once); partial files resume. `refs`
    ([path, text]) are written once every piece is in place."""
    pod.transfer = {
        "volumeId": volume.id,
        "afterS": after_s,
        "bytesPerS": bytes_per_s,
        "pieces": [[p.path, p.size, have(volume, p.path)] for p in pieces],
        "refs": [list(r) for r in refs],
        "endedAt": None,
    }


def progress(pod: PodRecord, now: float) -> list[int]:
    """Bytes in place of each of the pod's pieces at `now` (what was there, plus what the
    download delivered since it began)."""
    transfer = pod.transfer
    if transfer is None:
        return []
    pieces: list[list[Any]] = transfer["pieces"]
    began = _began(pod)
    if began is None:
        return [int(start) for _, _, start in pieces]
    until = now if transfer["endedAt"] is None else min(now, transfer["endedAt"])
    rate = transfer["bytesPerS"]
    budget = float("inf") if rate is None else max(0.0, until - began) * rate
    if until < began:
        budget = 0.0
    out = []
    for _, size, start in pieces:
        need = size - start
        moved = min(need, budget)
        budget -= moved
        out.append(round(start + moved))
    return out


def done_at(pod: PodRecord) -> float | None:
    """When the pod's last byte lands (its clock's seconds), once the container has started."""
    transfer, began = pod.transfer, _began(pod)
    if transfer is None or began is None:
        return None
    rate = transfer["bytesPerS"]
    need = sum(size - start for _, size, start in transfer["pieces"])
    return began if rate is None or need == 0 else began + need / rate


def settle(pod: PodRecord, volume: VolumeRecord | None, now: float) -> None:
    """Write what the pod's download has delivered by `now` onto its volume; a stopped pod's
    was written when it stopped (`end`), and a file removed since stays removed."""
    if pod.transfer is None or volume is None or volume.id != pod.transfer["volumeId"]:
        return
    if pod.transfer["endedAt"] is not None:
        return
    pieces = pod.transfer["pieces"]
    arrived = progress(pod, now)
    for (path, size, _), present in zip(pieces, arrived, strict=True):
        if present:
            write(volume, path, size, present)
    if all(present >= size for (_, size, _), present in zip(pieces, arrived, strict=True)):
        for path, text in pod.transfer.get("refs", []):
            volume.refs[path] = text


def end(pod: PodRecord, volume: VolumeRecord | None, now: float) -> None:
    """The pod stopped: what it delivered stays, nothing more moves."""
    if pod.transfer is None or pod.transfer["endedAt"] is not None:
        return
    settle(pod, volume, now)
    pod.transfer["endedAt"] = now


def _began(pod: PodRecord) -> float | None:
    if pod.started_wall is None or pod.transfer is None:
        return None
    return float(pod.started_wall) + float(pod.transfer["afterS"])
