"""A pod's container over time: started over successive reads, restarted after a PATCH, and,
when it exits at start, restarted again and again.

RunPod restarts a container that exits, while the pod's status stays RUNNING (it is the desired
state, not the container's): the crash loop shows only as a start time and `runtime.uptime`
that reset every cycle, no runtime while the container is down, and each exit in the log. The
account moves a crash-looping pod to `now` whenever it is read (`settle`).
"""

from __future__ import annotations

from frutebox_infra.emulator.counters import reset
from frutebox_infra.emulator.records import PodRecord, timestamp

START_LINE = "start container"
"""RunPod's system-log line each time it starts a pod's container."""


def step(pod: PodRecord, now: float) -> None:
    """One read's worth of a starting pod: PROVISIONING, STARTING, then RUNNING (or ERROR
    under the pod-error fault); a PATCH's restart, once due, starts it over."""
    if pod.restart_at_wall is not None and now >= pod.restart_at_wall:
        pod.restart_at_wall = None
        pod.status, pod.started_at, pod.started_wall = "STARTING", None, None
        pod.log("restarting the container with the new settings")
    elif pod.status == "PROVISIONING":
        pod.status = "STARTING"
    elif pod.status == "STARTING":
        pod.status = "ERROR" if pod.fault == "pod-error" else "RUNNING"
        if pod.status == "RUNNING":
            pod.started_at, pod.started_wall = timestamp(now), now
            pod.networked = bool(pod.body.get("globalNetworking"))
            pod.log(START_LINE, "system")
            pod.log("container started; loading weights")
            start_loop(pod, pod.crash, now)
        else:
            pod.log("container exited with code 1: RuntimeError: CUDA error")


def log_progress(pod: PodRecord, now: float) -> None:
    """What a running server has printed by `now`: its load's end, or the never-healthy fault's
    out-of-memory error."""
    if pod.serving_process and not pod.crash_looping and pod.started_wall is not None:
        if pod.fault == "never-healthy":
            pod.log("torch.OutOfMemoryError: CUDA out of memory")
        elif not pod.loading(now):
            pod.log("server is listening")


def start_loop(pod: PodRecord, crash: str | None, now: float) -> None:
    """The container (re)started at `now`; with `crash`, it will exit printing that line."""
    pod.crash, pod.exits, pod.restarts, pod.container_up = crash, 0, 0, True
    reset(pod)
    pod.crash_epoch = now if crash is not None else None


def settle(pod: PodRecord, now: float, *, up_s: float, gap_s: float) -> None:
    """Bring a crash-looping pod to `now`: each exit logged, the current container shown.

    Container k starts at epoch + k * (up_s + gap_s) and exits `up_s` later; all in the
    clock's real seconds.
    """
    if pod.crash is None or pod.crash_epoch is None or pod.status != "RUNNING":
        return
    cycle = max(up_s + gap_s, 1e-6)
    whole, into = divmod(max(0.0, now - pod.crash_epoch), cycle)
    exits = int(whole) + (1 if into >= up_s else 0)
    # Exit k comes before restart k, which comes before exit k + 1.
    while True:
        if pod.exits == pod.restarts and pod.exits < exits:
            pod.exits += 1
            pod.log(pod.crash)
        elif pod.restarts < pod.exits and pod.restarts < whole:
            pod.restarts += 1
            pod.log(START_LINE, "system")
        else:
            break
    pod.container_up = into < up_s
    if pod.container_up:
        started = pod.crash_epoch + whole * cycle
        pod.started_wall, pod.started_at = started, timestamp(started)
