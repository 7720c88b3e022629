"""A seeding CPU pod as the emulator runs it: the seeder's plan read from the pod's env, each
job's files found on the emulated hub (or refused as the seeder says it), brought onto the
volume at the account's download speed, and `GET /status` answered as the seeder answers it
(the same pydantic models, seeding/protocol.py).

Jobs download one after another over the pod's one link; the real seeder runs them side by
side, which shares the same link and ends at the same time. Files already complete are
skipped, a partial one resumes, refs are written once a job's files are all in place, and
so are the directories it makes for an engine's counters. A job's release archives come
first, checked as the seeder checks them: one whose URL is gone or whose bytes do not match
its pin fails the job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from frutebox_infra.deploy.contract import wire_data
from frutebox_infra.emulator import layout, volume_files
from frutebox_infra.emulator.counters import COUNTERS
from frutebox_infra.emulator.hub import Hub
from frutebox_infra.emulator.records import PodRecord, VolumeRecord, timestamp
from frutebox_infra.emulator.volume_files import Piece
from frutebox_infra.plumbing.validation import validate_json
from frutebox_infra.seeding import seeder
from frutebox_infra.seeding.protocol import (
    PLAN_ENV,
    TOKEN_ENV,
    FilesJob,
    HfSnapshotJob,
    JobState,
    JobStatus,
    OllamaJob,
    PlacedArchive,
    SeedJob,
    SeedPlan,
    SeedState,
    SeedStatus,
)

MANIFEST_BYTES = 400


def is_seeder(pod: PodRecord) -> bool:
    env = pod.body.get("env") or {}
    return isinstance(env, Mapping) and PLAN_ENV in env


def start(
    pod: PodRecord,
    volume: VolumeRecord | None,
    hub: Hub,
    *,
    after_s: float,
    bytes_per_s: float | None,
) -> None:
    """Plan the seeding pod's jobs against the hub and the volume, and its download."""
    env = pod.body.get("env") or {}
    token = bool(env.get(TOKEN_ENV))
    try:
        plan = validate_json(SeedPlan, str(env.get(PLAN_ENV, "")))
    except ValidationError as exc:
        pod.seeding = {"error": f"the seed plan ({PLAN_ENV}) is unreadable: {exc!r}", "jobs": []}
        pod.log(f"seeder: {pod.seeding['error']}; serving that until terminated")
        return
    jobs: list[dict[str, Any]] = []
    pieces: list[Piece] = []
    free = volume_files.free_bytes(volume) if volume is not None else 0
    for job in plan.jobs:
        record: dict[str, Any] = {"modelId": job.modelId, "first": len(pieces), "count": 0}
        try:
            # Its release archives first, as the seeder places them: one gone or tampered
            # with fails the job before any weight moves.
            archives = [Piece(a.path, hub.release(a.url, *_pin(a))) for a in job.archives]
            commit, wanted, refs = _files_of(job, hub, token=token)
            wanted = [*archives, *wanted]
            need = _missing_bytes(volume, wanted)
            if volume is None or need > free:
                raise seeder.no_room(job.modelId, free, need)
        except seeder.Failed as failed:
            record["failure"] = [failed.reason, failed.fix]
            pod.log(f"seeder: {job.modelId}: failed: {failed.reason} Fix: {failed.fix}")
        else:
            free -= need
            record.update(count=len(wanted), commit=commit, refs=refs)
            if isinstance(job, HfSnapshotJob):
                record["counterDirs"] = list(job.counterDirs)
            pieces += wanted
        jobs.append(record)
    pod.seeding = {"jobs": jobs, "port": plan.port}
    if volume is not None:
        volume_files.start_transfer(pod, volume, pieces, after_s=after_s, bytes_per_s=bytes_per_s)
    pod.log(f"seeder: {len(plan.jobs)} job(s); status on port {plan.port}")


def status(pod: PodRecord, volume: VolumeRecord | None, now: float) -> dict[str, Any]:
    """`GET /status` at `now`, after writing onto the volume what has arrived by then."""
    seeding = pod.seeding or {}
    started = timestamp(pod.started_wall or now)
    if "error" in seeding:
        return _as_json(
            SeedStatus(
                version=1,
                state=SeedState.FAILED,
                startedAt=started,
                updatedAt=timestamp(now),
                jobs=(),
                error=seeding["error"],
            )
        )
    volume_files.settle(pod, volume, now)
    present = volume_files.progress(pod, now)
    pieces = (pod.transfer or {}).get("pieces", [])
    jobs = tuple(_job(record, pieces, present, volume) for record in seeding.get("jobs", []))
    states = {j.state for j in jobs}
    state = (
        SeedState.RUNNING
        if states & {JobState.PENDING, JobState.RUNNING}
        else SeedState.FAILED
        if JobState.FAILED in states
        else SeedState.DONE
    )
    return _as_json(
        SeedStatus(version=1, state=state, startedAt=started, updatedAt=timestamp(now), jobs=jobs)
    )


def _as_json(status: SeedStatus) -> dict[str, Any]:
    data: dict[str, Any] = wire_data(status)
    return data


def _job(
    record: dict[str, Any],
    pieces: list[list[Any]],
    present: list[int],
    volume: VolumeRecord | None,
) -> JobStatus:
    if "failure" in record:
        reason, fix = record["failure"]
        return JobStatus(
            modelId=record["modelId"], state=JobState.FAILED, bytesDone=0, reason=reason, fix=fix
        )
    first, count = record["first"], record["count"]
    mine = pieces[first : first + count]
    got = present[first : first + count]
    total = sum(int(size) for _, size, _ in mine)
    skipped = sum(int(size) for _, size, start in mine if start >= size)
    finished = sum(1 for (_, size, _), have in zip(mine, got, strict=True) if have >= size)
    done = finished == count
    if done and volume is not None:
        for folder in record.get("counterDirs", []):
            volume.counter_dirs.setdefault(folder, dict.fromkeys(COUNTERS, 0.0))
        for path, commit in record.get("refs", []):
            volume.refs[path] = commit  # last: a ref names a complete snapshot
    return JobStatus(
        modelId=record["modelId"],
        state=JobState.DONE if done else JobState.RUNNING,
        bytesDone=sum(got),
        bytesTotal=total,
        bytesSkipped=skipped,
        filesDone=finished,
        filesTotal=count,
        commit=record.get("commit"),
    )


def _pin(archive: PlacedArchive) -> tuple[str, str]:
    """(the checksum's kind, its hex) of a placed archive."""
    if archive.sha512 is not None:
        return "sha512", archive.sha512
    assert archive.sha256 is not None
    return "sha256", archive.sha256


def _missing_bytes(volume: VolumeRecord | None, wanted: list[Piece]) -> int:
    if volume is None:
        return sum(p.size for p in wanted)
    return sum(
        p.size - volume_files.have(volume, p.path) for p in volume_files.missing(volume, wanted)
    )


def _files_of(
    job: SeedJob, hub: Hub, *, token: bool
) -> tuple[str | None, list[Piece], list[list[str]]]:
    """(commit, the files in the order the seeder places them, [ref path, commit] pairs)."""
    if isinstance(job, HfSnapshotJob):
        commit, tree = hub.snapshot(job.repo, job.revision, token=token)
        entries = [{"path": path} for path in sorted(tree)]
        chosen = seeder.select(entries, wire_data(job))
        pieces = [
            Piece(layout.snapshot_file(job.cacheDir, job.repo, commit, e["path"]), tree[e["path"]])
            for e in chosen
        ]
        refs = [[layout.ref_file(job.cacheDir, job.repo, ref), commit] for ref in job.refs]
        # Its small files of ours (a start hook) are written whole, kept as small texts are.
        refs += [[placed.path, placed.text] for placed in job.texts]
        return commit, pieces, refs
    if isinstance(job, FilesJob):
        pieces = []
        for file in job.files:
            _, size = hub.file(file.repo, file.revision, file.path, token=token)
            if file.size is not None and file.size != size:
                raise seeder.Failed(
                    f"{file.repo}@{file.revision}:{file.path} is not the file the registry"
                    f" describes (the hub lists {size} bytes)",
                    "correct the size/sha256 in registry/models.yaml, or the revision",
                )
            pieces.append(Piece(file.destination, size))
        return None, pieces, []
    assert isinstance(job, OllamaJob)
    tag = hub.ollama(job.tag)
    blobs = [Piece(layout.ollama_blob(job.store, h), size) for h, size in tag.blobs]
    manifest = Piece(layout.ollama_manifest(job.store, job.tag), MANIFEST_BYTES)
    return None, [*blobs, manifest], []
