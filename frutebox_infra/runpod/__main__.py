"""Command entry for Pulumi's local.Command: `python -m frutebox_infra.runpod pod|seed|volume
ACTION`, and `stack sweep`, which the program runs at the end of every `up`.

It parses the arguments, watches for a cancellation and dispatches: each action lives with
its resource (`pods.py`, `seeds.py`, `volumes.py`; the sweep in `leftovers.py`), the
command's input and output in `command_io.py`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator, Mapping
from enum import StrEnum
from types import FrameType
from typing import Any, TextIO

import httpx

from frutebox_infra.deploy.contract import SweepRequest
from frutebox_infra.runpod.command_io import (
    GrowRequest,
    PodRequest,
    PreviousPod,
    PreviousSeed,
    PreviousVolume,
    SeedRequest,
    Session,
    Settings,
    VolumeRequest,
    failure_text,
    read_previous,
    read_request,
    redactor,
    write_failure,
    write_result,
)
from frutebox_infra.runpod.errors import Cancelled, ConfigurationError
from frutebox_infra.runpod.leftovers import stack_sweep
from frutebox_infra.runpod.parent_watch import ParentWatch, watching_parent
from frutebox_infra.runpod.pods import pod_create, pod_delete, pod_update
from frutebox_infra.runpod.seeds import seed_create, seed_delete, seed_update
from frutebox_infra.runpod.volumes import volume_create, volume_delete, volume_grow, volume_update
from frutebox_infra.stack.endpoints import step_endpoint


class Resource(StrEnum):
    POD = "pod"
    SEED = "seed"
    VOLUME = "volume"
    STACK = "stack"


class Action(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    GROW = "grow"
    SWEEP = "sweep"


@contextlib.contextmanager
def cancellable(log: Callable[[str], None] = lambda _line: None) -> Iterator[None]:
    """SIGTERM and SIGINT raise Cancelled, once, for the teardown paths to handle.

    A stop reaches the step in one of two ways: a signal to it (a terminal's Ctrl-C goes to
    the whole process group), or the command provider SIGKILLing the shell that started
    it and signalling nothing else, which `watching_parent` turns (like the engine going
    away: nobody reads our output) into SIGTERM. The
    exception reaches whatever is running: a bring-up terminates the pod it created, a
    create in flight terminates what it made. A second signal is ignored, so that cleanup
    can finish. Outside the main thread (some tests) signals cannot be caught: no-op.
    """
    fired = False
    watch: ParentWatch | None = None

    def cancel(signum: int, frame: FrameType | None) -> None:
        nonlocal fired
        if fired:
            return
        fired = True
        why = watch.reason() if watch is not None else None
        if why is None:
            raise Cancelled(f"Cancelled by {signal.Signals(signum).name} before finishing.")
        log(f"{why}: Pulumi cancelled or stopped; stopping and removing what this run created")
        raise Cancelled(f"Cancelled: {why}.")

    previous: dict[signal.Signals, Any] = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(ValueError):
            previous[sig] = signal.signal(sig, cancel)
    try:
        if previous:
            with watching_parent(signal.SIGTERM) as watch:
                yield
        else:
            yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run(
    resource: Resource, action: Action, session: Session, stdin: TextIO, env: Mapping[str, str]
) -> dict[str, Any]:
    if action is Action.GROW:
        if resource is not Resource.VOLUME:
            raise ConfigurationError("only a volume grows; use `volume grow`")
        return volume_grow(session, read_request(GrowRequest, stdin))
    if (action is Action.SWEEP) != (resource is Resource.STACK):
        raise ConfigurationError("only the stack is swept, and it is only swept: `stack sweep`")
    if resource is Resource.STACK:
        return stack_sweep(session, read_request(SweepRequest, stdin))
    if resource is Resource.POD:
        if action is Action.DELETE:
            return pod_delete(session, read_previous(PreviousPod, env))
        pod_request = read_request(PodRequest, stdin)
        if action is Action.CREATE:
            return pod_create(session, pod_request)
        return pod_update(session, pod_request, read_previous(PreviousPod, env))
    if resource is Resource.SEED:
        if action is Action.DELETE:
            return seed_delete(session, read_previous(PreviousSeed, env))
        seed_request = read_request(SeedRequest, stdin)
        if action is Action.CREATE:
            return seed_create(session, seed_request)
        return seed_update(session, seed_request, read_previous(PreviousSeed, env))
    if action is Action.DELETE:
        return volume_delete(session, read_previous(PreviousVolume, env))
    volume_request = read_request(VolumeRequest, stdin)
    if action is Action.CREATE:
        return volume_create(session, volume_request)
    return volume_update(session, volume_request, read_previous(PreviousVolume, env))


def main(
    argv: list[str] | None = None,
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    env: Mapping[str, str] | None = None,
    transport: httpx.BaseTransport | None = None,
) -> int:
    """Result JSON on stdout, progress on stderr; 0 ok, 1 failure explained in one paragraph."""
    parser = argparse.ArgumentParser(
        prog="python -m frutebox_infra.runpod",
        description="Create, update or delete a RunPod pod, seeding pod or volume; or sweep"
        " the stack's pods and volumes its state does not record.",
    )
    parser.add_argument("resource", choices=[r.value for r in Resource])
    parser.add_argument("action", choices=[a.value for a in Action])
    args = parser.parse_args(argv)
    env = os.environ if env is None else env
    out, err = stdout or sys.stdout, stderr or sys.stderr
    redact = redactor(env)
    session: Session | None = None
    try:
        session = Session(Settings.from_env(env), err, transport, redact, step_endpoint(env))
        with cancellable(session.log):
            resource, action = Resource(args.resource), Action(args.action)
            result = run(resource, action, session, stdin or sys.stdin, env)
        write_result(out, result, redact)
        return 0
    except Exception as exc:  # a bug too is one paragraph, its traceback on request
        failure = failure_text(exc, debug=env.get("FRUTEBOX_DEBUG") == "1")
    finally:
        if session is not None:
            session.close()
    write_failure(err, failure, redact)
    return 1


if __name__ == "__main__":
    sys.exit(main())
