"""Command entry for Pulumi's local.Command: `python -m frutebox_infra.runpod pod|volume ACTION`."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from enum import StrEnum
from types import FrameType
from typing import Any, TextIO

import httpx

from frutebox_infra.endpoints import step_endpoint
from frutebox_infra.runpod.client import NetworkVolume
from frutebox_infra.runpod.command_io import (
    GrowRequest,
    PodRequest,
    PreviousPod,
    PreviousVolume,
    Session,
    Settings,
    VolumeRequest,
    cap_lines,
    read_previous,
    read_request,
    redactor,
)
from frutebox_infra.runpod.errors import Cancelled, ConfigurationError, NotFoundError, RunPodError
from frutebox_infra.runpod.parent_watch import ParentWatch, watching_parent
from frutebox_infra.runpod.pods import pod_create, pod_delete, pod_update
from frutebox_infra.runpod.volumes import ensure_gone, new_owner_token


class Resource(StrEnum):
    POD = "pod"
    VOLUME = "volume"


class Action(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    GROW = "grow"


def _volume_result(volume: NetworkVolume, owner: str | None) -> dict[str, Any]:
    return {
        "volumeId": volume.id,
        "name": volume.name,
        "size": volume.size,
        "dataCenter": volume.data_center,
        "type": volume.type,
        "owner": owner,
    }


def volume_create(
    session: Session, request: VolumeRequest, owner: str | None = None
) -> dict[str, Any]:
    volume, outcome, owner = session.prov.create_volume(
        request.name, request.size, request.dataCenter, request.type, owner
    )
    session.log(
        f"volume {volume.id} ({volume.name}) {outcome} in {volume.data_center}"
        f" ({volume.size} GB, {volume.type or request.type})"
    )
    return _volume_result(volume, owner)


def volume_update(
    session: Session, request: VolumeRequest, previous: PreviousVolume | None
) -> dict[str, Any]:
    if previous is None:
        return volume_create(session, request)
    prov = session.prov
    try:
        volume = prov.api.get_volume(previous.volumeId)
    except NotFoundError:
        ensure_gone("volume", previous.volumeId, prov.api.list_volumes)
        session.log(f"volume {previous.volumeId} no longer exists; creating a new one")
        return volume_create(session, request, previous.owner)
    if volume.data_center != request.dataCenter:
        raise ConfigurationError(
            f"Volume {volume.id} lives in {volume.data_center} but the request asks for"
            f" {request.dataCenter}. A volume cannot move: changing the data centre must replace"
            " it (the program's triggers), and its weights are downloaded again."
        )
    # A stack recorded before volumes carried a token gets one now; its name follows.
    owner = previous.owner or new_owner_token()
    name = f"{request.name}-{owner}"
    if volume.name != name:
        volume = prov.api.update_volume(volume.id, {"name": name})
    return _volume_result(prov.grow_volume(volume, request.size), owner)


def volume_grow(session: Session, request: GrowRequest) -> dict[str, Any]:
    volume = session.prov.api.get_volume(request.volumeId)
    return _volume_result(session.prov.grow_volume(volume, request.size), None)


def volume_delete(session: Session, previous: PreviousVolume | None) -> dict[str, Any]:
    volume_id = previous.volumeId if previous else None
    return session.delete_recorded(
        "volume", volume_id, lambda i: session.prov.delete_volume(i), "deleted"
    )


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
    if resource is Resource.POD:
        if action is Action.DELETE:
            return pod_delete(session, read_previous(PreviousPod, env))
        pod_request = read_request(PodRequest, stdin)
        if action is Action.CREATE:
            return pod_create(session, pod_request)
        return pod_update(session, pod_request, read_previous(PreviousPod, env))
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
        description="Create, update or delete a RunPod pod or volume.",
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
        out.write(redact(json.dumps(result)) + "\n")
        out.flush()
        return 0
    except RunPodError as exc:
        message, trace = str(exc), traceback.format_exc()
    except Exception as exc:  # a bug: still one paragraph, traceback on request
        message = (
            f"internal error ({type(exc).__name__}: {exc}); rerun with FRUTEBOX_DEBUG=1"
            " for a traceback and report it."
        )
        trace = traceback.format_exc()
    finally:
        if session is not None:
            session.close()
    if env.get("FRUTEBOX_DEBUG") == "1":
        err.write(cap_lines(redact(trace)))
    err.write(cap_lines(redact("error: " + " ".join(message.split()))) + "\n")
    err.flush()
    return 1


if __name__ == "__main__":
    sys.exit(main())
