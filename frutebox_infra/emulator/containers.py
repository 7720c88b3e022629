"""A pod's container over time: one that exits at start is restarted again and again.

RunPod restarts a container that exits, while the pod's status stays RUNNING (it is the desired
state, not the container's): the crash loop shows only as a start time and `runtime.uptime`
that reset every cycle, no runtime while the container is down, and each exit in the log. The
account moves a crash-looping pod to `now` whenever it is read (`settle`).
"""

from __future__ import annotations

from frutebox_infra.emulator.records import PodRecord, timestamp

START_LINE = "start container"
"""RunPod's system-log line each time it starts a pod's container."""


def start_loop(pod: PodRecord, crash: str | None, now: float) -> None:
    """The container (re)started at `now`; with `crash`, it will exit printing that line."""
    pod.crash, pod.exits, pod.restarts, pod.container_up = crash, 0, 0, True
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
