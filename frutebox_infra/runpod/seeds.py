"""`seed create|update|delete`: a CPU pod puts models' weights on the volume, then goes.

The pod runs the seeder (seeding/seeder.py) on the request's plan. Its status (GET /status
through the proxy, seeding/protocol.py SeedStatus) is read until every job is done or failed,
the API asked once a minute whether the pod died; then the pod is terminated whatever
happened, so a seeding pod never outlives its command. A failed model fails the command with
its reason and fix before any GPU pod of it exists; what did arrive stays on the volume and
the next try resumes it. Placement, adoption after an ambiguous create, ownership and quota
pacing are the GPU pods' own (placement.py, adopting.py, lifecycle.py).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from frutebox_infra.deploy.contract import OWNER_ENV, wire_data
from frutebox_infra.plumbing.validation import validate
from frutebox_infra.runpod.adopting import AmbiguousCreates
from frutebox_infra.runpod.command_io import PreviousSeed, SeedRequest, Session
from frutebox_infra.runpod.errors import (
    ConfigurationError,
    CrashLoopError,
    MayStillBillError,
    PodFailedError,
    RunPodError,
    SeedFailedError,
)
from frutebox_infra.runpod.lifecycle import DEAD, Timeouts
from frutebox_infra.runpod.placement import Ownership, Placement
from frutebox_infra.runpod.restarts import RestartWatch
from frutebox_infra.runpod.waits import until_look
from frutebox_infra.runpod.wire import Pod
from frutebox_infra.seeding.delivery import pod_args, pod_env
from frutebox_infra.seeding.protocol import JobState, JobStatus, SeedPlan, SeedState, SeedStatus

PROGRESS_EVERY_S = 60.0
"""How often the log says how far each model is, besides when a model finishes."""
TIMEOUT_HINT = (
    "raise the stack key frutebox-infra:seedTimeoutSeconds (`pulumi config set"
    " frutebox-infra:seedTimeoutSeconds 14400`) or set FRUTEBOX_SEED_TIMEOUT_S, which overrides"
    " it; what arrived stays on the volume and the next `pulumi up` resumes it"
)


def prepare_bodies(request: SeedRequest, hf_token: str) -> list[dict[str, Any]]:
    """One create body per CPU flavor, cheapest first: the seeder and its plan in the env, the
    ownership token, and the Hugging Face token only where a job needs it, filled in here."""
    try:
        plan = validate(SeedPlan, request.plan)
        env = pod_env(plan)
    except (ValidationError, ValueError) as exc:
        raise ConfigurationError(
            f"The seed request's plan cannot be sent ({_first_line(exc)}); the planner writes"
            " it, so this is a frutebox-infra bug."
        ) from None
    env[OWNER_ENV] = request.owner
    for var in request.hfTokenEnv:
        if hf_token:
            env[var] = hf_token
    body = {**copy.deepcopy(request.pod), "name": request.name, "args": pod_args(), "env": env}
    mounts = (body.get("mounts") or {}).get("network") or [{}]
    if mounts[0].get("volumeId") != request.volumeId:
        raise ConfigurationError(
            f"The seed request's pod does not mount the stack's volume {request.volumeId}; a"
            " pod is recognised as ours by that mount, and the weights must land there."
        )
    if f"{request.status.port}/http" not in (body.get("ports") or []):
        raise ConfigurationError(
            f"The seed request's pod does not expose {request.status.port}/http, so its"
            f" {request.status.path} could never be read; add it."
        )
    return [{**body, "cpu": wire_data(cpu)} for cpu in request.cpus]


def seed_create(session: Session, request: SeedRequest) -> dict[str, Any]:
    """Create the seeding pod, follow it to the end, terminate it, and say how each model went."""
    bodies = prepare_bodies(request, session.settings.hf_token)
    prov, timeouts = session.prov, session.timeouts()
    started = prov.clock()
    deadline = started + (session.settings.seed_timeout_s or request.timeoutSeconds)
    owner = Ownership(request.owner, request.volumeId)
    placement = prov.place(request.name, bodies, owner, timeouts)
    pod_id, sweep = placement.pod.id, placement.sweep
    models = ", ".join(_model_ids(request))
    session.log(f"seeding pod {pod_id} is seeding {models}")
    failure: BaseException | None = None
    try:
        status = _follow(session, pod_id, request, timeouts, deadline, sweep)
    except BaseException as exc:
        failure = exc
        raise
    finally:
        _terminate(session, pod_id, failure)
        if sweep is not None:
            sweep.finish() if failure is None else sweep.give_up()
    return _outcome(session, request, placement, status, prov.clock() - started)


def seed_update(
    session: Session, request: SeedRequest, previous: PreviousSeed | None
) -> dict[str, Any]:
    """Nothing to do when these weights were seeded onto this volume: a changed key, CPU
    flavor or deadline moves no byte. A new volume (or no record) seeds again."""
    if previous is not None and previous.volumeId == request.volumeId and previous.state == "done":
        session.log(
            f"{', '.join(_model_ids(request))}: already seeded onto volume {request.volumeId};"
            " nothing to do"
        )
        return previous.model_dump()
    return seed_create(session, request)


def seed_delete(session: Session, previous: PreviousSeed | None) -> dict[str, Any]:
    """The weights stay on the (protected) volume; only a seeding pod still there goes."""
    pod_id = getattr(previous, "podId", None) if previous is not None else None
    session.log("the seeded weights stay on the volume")
    return session.delete_recorded(
        "seeding pod", str(pod_id) if pod_id else None, session.prov.terminate, "terminated"
    )


def _follow(
    session: Session,
    pod_id: str,
    request: SeedRequest,
    timeouts: Timeouts,
    deadline: float,
    sweep: AmbiguousCreates[Pod] | None,
) -> SeedStatus:
    """Read the status until every job ended. The seeder never exits, so a container RunPod
    restarts has crashed: restarts that bring no new byte in place are a crash loop (the
    GPU pods' own watch), while a restart after progress starts the count again."""
    prov = session.prov
    watch = RestartWatch()
    prov.wait_running(pod_id, timeouts, watch=watch, looker=sweep)
    url = session.proxy.url(pod_id, request.status.port) + request.status.path
    best = -1
    next_check = prov.clock() + timeouts.api_check_s
    progress = _Progress(session.log, prov.clock)
    status: SeedStatus | None = None
    while True:
        status = _status(session.proxy.get_json(url)) or status
        if status is not None:
            progress.show(status)
            if status.state is not SeedState.RUNNING:
                return status
            done = sum(j.bytesDone for j in status.jobs)
            if done > best:
                best, watch = done, RestartWatch(logged_before=None)
        now = prov.clock()
        if now >= next_check or now >= deadline:
            interval = timeouts.restart_check_s if watch.restarts else timeouts.api_check_s
            next_check = now + interval
            pod = _checked(session, pod_id, request, watch, timeouts)
            if pod is not None and pod.status in DEAD:
                raise PodFailedError(
                    f"Seeding pod {pod_id} went to {pod.status} while seeding"
                    f" {', '.join(_model_ids(request))}." + prov.log_tail(pod_id),
                    pod_id=pod_id,
                    last_status=pod.status,
                )
        if sweep is not None:
            sweep.look_if_due()
        if now >= deadline:
            raise _timed_out(request, pod_id, status, _budget(session, request))
        prov.pause(deadline, until_look(timeouts.poll_interval_s, sweep))


def _checked(
    session: Session, pod_id: str, request: SeedRequest, watch: RestartWatch, timeouts: Timeouts
) -> Pod | None:
    try:
        pod, _ = session.prov.watched_read(pod_id, "seeding", watch, timeouts)
    except CrashLoopError as exc:
        raise CrashLoopError(
            f"Seeding pod {pod_id} crash-loops: RunPod restarted its container {exc.restarts}"
            " time(s) without a new byte in place, so the seeder crashes. Check its log in the"
            " RunPod console." + session.prov.log_tail(pod_id),
            pod_id=pod_id,
            restarts=exc.restarts,
        ) from exc
    return pod


def _budget(session: Session, request: SeedRequest) -> float:
    return session.settings.seed_timeout_s or request.timeoutSeconds


def _status(raw: Any) -> SeedStatus | None:
    """The seeder's status, or None while nothing (or something else) answers."""
    if not isinstance(raw, dict):
        return None
    try:
        return validate(SeedStatus, raw)
    except ValidationError:
        return None


def _timed_out(
    request: SeedRequest, pod_id: str, status: SeedStatus | None, waited_s: float
) -> SeedFailedError:
    jobs = {j.modelId: j for j in (status.jobs if status else ())}
    failures = {}
    for model_id in _model_ids(request):
        job = jobs.get(model_id)
        if job is not None and job.state in (JobState.DONE, JobState.FAILED):
            continue
        where = f" ({_gb(job.bytesDone)} of {_gb(job.bytesTotal)} GB in place)" if job else ""
        failures[model_id] = (
            f"seeding did not finish within {waited_s:g}s{where}",
            f"check the source and the pod's network, or {TIMEOUT_HINT}",
        )
    return SeedFailedError(_failure_text(failures, pod_id), failures=failures)


def _outcome(
    session: Session,
    request: SeedRequest,
    placement: Placement,
    status: SeedStatus,
    seconds: float,
) -> dict[str, Any]:
    pod = placement.pod
    if status.error:
        failures = {m: (status.error, "report it: the planner wrote that plan") for m in
                    _model_ids(request)}  # fmt: skip
        raise SeedFailedError(_failure_text(failures, pod.id), failures=failures)
    for job in status.jobs:
        session.log(_job_line(job))
    failures = {j.modelId: (j.reason or "failed", j.fix or "") for j in status.jobs
                if j.state is JobState.FAILED}  # fmt: skip
    if failures:
        raise SeedFailedError(_failure_text(failures, pod.id), failures=failures)
    cpu = request.cpus[placement.candidate_index]
    return {
        "podId": pod.id,
        "name": pod.name,
        "volumeId": request.volumeId,
        "state": "done",
        "cpuId": cpu.id,
        "vcpus": cpu.vcpuCount,
        "costPerHour": pod.cost,
        "candidateIndex": placement.candidate_index,
        "candidatesTried": [
            {"cpuId": a.gpu_id, "vcpus": a.count, "outcome": a.outcome} for a in placement.attempts
        ],
        "seconds": round(seconds, 1),
        "models": [
            {
                "modelId": j.modelId,
                "state": str(j.state),
                "bytesTotal": j.bytesTotal,
                "bytesDone": j.bytesDone,
                "bytesSkipped": j.bytesSkipped,
                "filesTotal": j.filesTotal,
                "commit": j.commit,
            }
            for j in status.jobs
        ],
        "meta": request.meta,
    }


def _failure_text(failures: dict[str, tuple[str, str]], pod_id: str) -> str:
    said = [
        f"Seeding {model_id} failed: {reason.rstrip('.')}."
        + (f" Fix: {fix.rstrip('.')}." if fix else "")
        for model_id, (reason, fix) in failures.items()
    ]
    return " ".join(said) + (
        f" Seeding pod {pod_id} was terminated and no GPU pod was created for"
        f" {', '.join(failures)}; what arrived stays on the volume and the next try resumes it."
    )


def _terminate(session: Session, pod_id: str, failure: BaseException | None) -> None:
    try:
        session.prov.terminate(pod_id)
    except RunPodError as exc:
        before = f"{failure} " if failure is not None else ""
        raise MayStillBillError(
            f"{before}Terminating seeding pod {pod_id} failed ({exc}): it may still bill —"
            " delete it in the RunPod console.",
            kind="pod",
            ids=(pod_id,),
        ) from exc
    session.log(f"seeding pod {pod_id} terminated")


def _model_ids(request: SeedRequest) -> list[str]:
    jobs = request.plan.get("jobs") or []
    return [str(j.get("modelId")) for j in jobs if isinstance(j, dict)]


def _job_line(job: JobStatus) -> str:
    if job.state is JobState.FAILED:
        return f"{job.modelId}: failed: {job.reason}" + (f" Fix: {job.fix}" if job.fix else "")
    fetched = job.bytesDone - job.bytesSkipped
    return (
        f"{job.modelId}: {job.state}: {_gb(job.bytesDone)} GB in place ({_gb(job.bytesSkipped)}"
        f" GB already there, {_gb(fetched)} GB downloaded)"
    )


def _gb(value: int | None) -> str:
    return "?" if value is None else f"{value / 1e9:.1f}"


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0]


class _Progress:
    """Says how far each model is now and then, and whenever one changes state."""

    def __init__(self, log: Callable[[str], None], clock: Callable[[], float]) -> None:
        self._log, self._clock = log, clock
        self._states: dict[str, JobState] = {}
        self._said = float("-inf")

    def show(self, status: SeedStatus) -> None:
        changed = any(self._states.get(j.modelId) != j.state for j in status.jobs)
        if not changed and self._clock() - self._said < PROGRESS_EVERY_S:
            return
        self._said = self._clock()
        self._states = {j.modelId: j.state for j in status.jobs}
        for job in status.jobs:
            if job.state is JobState.RUNNING:
                self._log(
                    f"seeding {job.modelId}: {_gb(job.bytesDone)} of {_gb(job.bytesTotal)} GB"
                    f" in place ({job.filesDone} of {job.filesTotal or '?'} files)"
                )
