"""Command entry for Pulumi's local.Command: `python -m frutebox_infra.runpod pod|volume ACTION`."""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import traceback
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any, TextIO

import httpx

from frutebox_infra.runpod.client import NetworkVolume, Pod
from frutebox_infra.runpod.command_io import (
    GrowRequest,
    PodRequest,
    PreviousPod,
    PreviousVolume,
    Session,
    Settings,
    VolumeRequest,
    read_previous,
    read_request,
    redactor,
)
from frutebox_infra.runpod.errors import Attempt, ConfigurationError, NotFoundError, RunPodError
from frutebox_infra.runpod.lifecycle import LIVE, Health
from frutebox_infra.runpod.placement import gpu_of


class Resource(StrEnum):
    POD = "pod"
    VOLUME = "volume"


class Action(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    GROW = "grow"


def prepare_candidates(request: PodRequest, hf_token: str) -> list[dict[str, Any]]:
    """Candidate bodies as sent: our name on each, the HF token filled in only here."""
    bodies = []
    for index, raw in enumerate(request.candidates):
        body = copy.deepcopy(raw)
        where = f"candidates[{index}]"
        if body.setdefault("name", request.name) != request.name:
            raise ConfigurationError(
                f"{where}.name is {body['name']!r} but the request's name is {request.name!r};"
                " they must match, because a pod is found again by its unique name."
            )
        if not gpu_of(body)[0]:
            raise ConfigurationError(f"{where} has no gpu.id; every candidate is one GPU type.")
        ports = body.get("ports")
        if not isinstance(ports, list) or f"{request.health.port}/http" not in ports:
            raise ConfigurationError(
                f"{where}.ports does not expose {request.health.port}/http, so"
                f" {request.health.path} could never answer; add it."
            )
        env = dict(body.get("env") or {})
        for var in request.hfTokenEnv:
            if hf_token:
                env[var] = hf_token
            else:
                env.pop(var, None)
        if env or "env" in body:
            body["env"] = env
        bodies.append(body)
    return bodies


def _pod_result(
    session: Session, request: PodRequest, pod: Pod, index: int, attempts: tuple[Attempt, ...]
) -> dict[str, Any]:
    return {
        "podId": pod.id,
        "name": pod.name,
        "gpuId": pod.gpu.id if pod.gpu else None,
        "gpuCount": pod.gpu.count if pod.gpu else None,
        "candidateIndex": index,
        "candidatesTried": [
            {"gpuId": a.gpu_id, "count": a.count, "outcome": a.outcome} for a in attempts
        ],
        "dataCenterId": pod.data_center_id,
        "costPerHour": pod.cost,
        "image": pod.image,
        "url": session.prov.proxy.url(pod.id, request.health.port),
        "status": pod.status,
        "volumeId": pod.volume_id,
        "meta": request.meta,
    }


def _serve(
    session: Session, request: PodRequest, pod_id: str, index: int, attempts: tuple[Attempt, ...]
) -> dict[str, Any]:
    health = Health(port=request.health.port, path=request.health.path)
    pod = session.prov.bring_up(
        pod_id, health=health, ollama_tag=request.ollamaPull, timeouts=session.timeouts(request)
    )
    return _pod_result(session, request, pod, index, attempts)


def pod_create(session: Session, request: PodRequest) -> dict[str, Any]:
    bodies = prepare_candidates(request, session.settings.hf_token)
    placement = session.prov.place(request.name, bodies)
    return _serve(session, request, placement.pod.id, placement.candidate_index, placement.attempts)


def _chosen_candidate(
    bodies: list[dict[str, Any]], pod: Pod, previous: PreviousPod, log: Callable[[str], None]
) -> int:
    """The candidate describing the running pod: same GPU type and count."""
    running = (pod.gpu.id, pod.gpu.count) if pod.gpu else ("", 0)
    for index, body in enumerate(bodies):
        if gpu_of(body) == running:
            return index
    fallback = previous.candidateIndex if previous.candidateIndex is not None else 0
    fallback = min(max(fallback, 0), len(bodies) - 1)
    log(
        f"warning: pod {pod.id} runs {running[1]}x {running[0]}, which no candidate names any"
        f" more (a GPU change should have replaced it); applying candidate {fallback}'s settings"
    )
    return fallback


IN_PLACE_FIELDS = ("image", "args", "env", "ports", "disk")


def pod_update(
    session: Session, request: PodRequest, previous: PreviousPod | None
) -> dict[str, Any]:
    if previous is None:
        session.log("no previous pod recorded; creating one")
        return pod_create(session, request)
    prov = session.prov
    try:
        current = prov.api.get_pod(previous.podId)
    except NotFoundError:
        session.log(f"pod {previous.podId} no longer exists; creating a new one")
        return pod_create(session, request)
    if current.status not in LIVE:
        session.log(f"pod {current.id} is {current.status}; replacing it with a new one")
        prov.terminate(current.id)
        return pod_create(session, request)
    bodies = prepare_candidates(request, session.settings.hf_token)
    index = _chosen_candidate(bodies, current, previous, session.log)
    patch = {
        key: bodies[index][key]
        for key in IN_PLACE_FIELDS
        if key in bodies[index] and bodies[index][key] != getattr(current, key)
    }
    if patch:
        session.log(f"pod {current.id}: updating {', '.join(sorted(patch))} in place")
        prov.api.update_pod(current.id, patch)
    else:
        session.log(f"pod {current.id}: nothing to change in place; checking it still serves")
    tried = tuple(
        Attempt(str(a.get("gpuId", "")), int(a.get("count", 0)), str(a.get("outcome", "")))
        for a in previous.candidatesTried
    ) or (Attempt(*gpu_of(bodies[index]), "created"),)
    return _serve(session, request, current.id, index, tried)


def pod_delete(session: Session, previous: PreviousPod | None) -> dict[str, Any]:
    if previous is None:
        session.log("no pod recorded; nothing to delete")
    elif session.prov.terminate(previous.podId):
        session.log(f"pod {previous.podId} terminated")
    else:
        session.log(f"pod {previous.podId} was already gone")
    return {}


def _volume_result(volume: NetworkVolume) -> dict[str, Any]:
    return {
        "volumeId": volume.id,
        "name": volume.name,
        "size": volume.size,
        "dataCenter": volume.data_center,
    }


def volume_create(session: Session, request: VolumeRequest) -> dict[str, Any]:
    volume, outcome = session.prov.create_volume(request.name, request.size, request.dataCenter)
    session.log(f"volume {volume.id} {outcome} in {volume.data_center} ({volume.size} GB)")
    return _volume_result(volume)


def volume_update(
    session: Session, request: VolumeRequest, previous: PreviousVolume | None
) -> dict[str, Any]:
    if previous is None:
        return volume_create(session, request)
    prov = session.prov
    try:
        volume = prov.api.get_volume(previous.volumeId)
    except NotFoundError:
        session.log(f"volume {previous.volumeId} no longer exists; creating a new one")
        return volume_create(session, request)
    if volume.data_center != request.dataCenter:
        raise ConfigurationError(
            f"Volume {volume.id} lives in {volume.data_center} but the request asks for"
            f" {request.dataCenter}. A volume cannot move: changing the data centre must replace"
            " it (the program's triggers), and its weights are downloaded again."
        )
    if volume.name != request.name:
        volume = prov.api.update_volume(volume.id, {"name": request.name})
    return _volume_result(prov.grow_volume(volume, request.size))


def volume_grow(session: Session, request: GrowRequest) -> dict[str, Any]:
    volume = session.prov.api.get_volume(request.volumeId)
    return _volume_result(session.prov.grow_volume(volume, request.size))


def volume_delete(session: Session, previous: PreviousVolume | None) -> dict[str, Any]:
    if previous is None:
        session.log("no volume recorded; nothing to delete")
    elif session.prov.delete_volume(previous.volumeId):
        session.log(f"volume {previous.volumeId} deleted")
    else:
        session.log(f"volume {previous.volumeId} was already gone")
    return {}


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
        session = Session(Settings.from_env(env), err, transport, redact)
        result = run(Resource(args.resource), Action(args.action), session, stdin or sys.stdin, env)
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
        err.write(redact(trace))
    err.write(redact("error: " + " ".join(message.split())) + "\n")
    err.flush()
    return 1


if __name__ == "__main__":
    sys.exit(main())
