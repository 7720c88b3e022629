"""`pod create|update|delete`: what each action does to RunPod, and the result it prints.

Who may terminate what: a pod this run created is terminated when it fails (nothing may
bill for a failed `up`); a pod the stack already records is patched, and when its new
container does not serve it is patched back to what it served with (the result records that,
secrets left out), so the model keeps serving and the update fails. Only a pod that does not
serve with those settings either is terminated. A pod whose GPU no candidate names any more
cannot be patched into shape, so it is replaced.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from frutebox_infra.deploy.contract import OWNER_ENV
from frutebox_infra.runpod.adopting import ensure_gone
from frutebox_infra.runpod.command_io import PodRequest, PreviousPod, Session
from frutebox_infra.runpod.errors import Attempt, ConfigurationError, NotFoundError
from frutebox_infra.runpod.lifecycle import LIVE, NETWORKING, Health
from frutebox_infra.runpod.placement import Ownership, gpu_of
from frutebox_infra.runpod.wire import Pod
from frutebox_infra.stack.serving_key import POD_KEY_ENV, key_problem

# What a PATCH may change on a running pod; the GPU, data centre and volume need a new pod.
IN_PLACE_FIELDS = ("image", "args", "env", "ports", "disk")


def networked(body: Mapping[str, Any]) -> bool:
    """`globalNetworking` as a body asks for it. It is PATCHed in place too (it "takes effect
    on the next pod start/restart"): a stack switching between public and private changes it
    with the ports, whose change restarts the pod (alone, `Provisioner.patch` restarts it).
    Sent only when it differs, so a public pod's body, which leaves it out, reads as false."""
    return bool(body.get(NETWORKING, False))


@dataclass(frozen=True, kw_only=True)
class PodSecrets:
    """The values the step fills into a pod's env at the last moment, never in a request,
    a result or a log: the Hugging Face token and the stack's serving key."""

    hf_token: str = field(default="", repr=False)
    serving_key: str = field(default="", repr=False)

    @classmethod
    def of(cls, session: Session) -> PodSecrets:
        return cls(hf_token=session.settings.hf_token, serving_key=session.settings.serving_key)

    def value(self, name: str) -> str:
        """What fills the env variable `name`: the serving key for the gateway's, else the
        token."""
        return self.serving_key if name == POD_KEY_ENV else self.hf_token

    def fill(self, env: dict[str, Any], names: Sequence[str]) -> None:
        for name in names:
            if value := self.value(name):
                env[name] = value
            else:
                env.pop(name, None)


def _serving_key_checked(request: PodRequest, secrets: PodSecrets) -> None:
    """A pod whose gateway asks for the key is never started without a usable one: its
    gateway would refuse everything, and the pod must not serve open either."""
    if not request.servingKeyEnv:
        return
    if bad := key_problem(secrets.serving_key):
        raise ConfigurationError(f"{request.name} runs a gateway, but {bad}.")


def prepare_candidates(request: PodRequest, secrets: PodSecrets) -> list[dict[str, Any]]:
    """Candidate bodies as sent: our name on each, the HF token and the serving key filled in
    only here."""
    _serving_key_checked(request, secrets)
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
        if request.private:
            if ports != [] or body.get(NETWORKING) is not True:
                raise ConfigurationError(
                    f"{where} is for a private pod but publishes {ports!r} or lacks"
                    f" {NETWORKING}: true; the planner writes both, so this is a"
                    " frutebox-infra bug."
                )
        elif not isinstance(ports, list) or f"{request.health.port}/http" not in ports:
            raise ConfigurationError(
                f"{where}.ports does not expose {request.health.port}/http, so"
                f" {request.health.path} could never answer; add it."
            )
        env = dict(body.get("env") or {})
        if env.setdefault(OWNER_ENV, request.owner) != request.owner:
            raise ConfigurationError(
                f"{where}.env.{OWNER_ENV} differs from the request's owner token; the planner"
                " writes both from the stack's volume, so this is a frutebox-infra bug."
            )
        mounts = (body.get("mounts") or {}).get("network") or [{}]
        if mounts[0].get("volumeId") != request.volumeId:
            raise ConfigurationError(
                f"{where} does not mount the stack's volume {request.volumeId}; a pod is"
                " recognised as ours by that mount, so every candidate must carry it."
            )
        secrets.fill(env, [*request.hfTokenEnv, *request.servingKeyEnv])
        body["env"] = env
        bodies.append(body)
    return bodies


def _health(request: PodRequest) -> Health:
    return Health(
        port=request.health.port,
        path=request.health.path,
        expected_files=tuple(request.health.expectedFiles),
        pulls_on_pod=bool(request.ollamaPull and request.servingKeyEnv),
    )


def applied_of(body: Mapping[str, Any], secret_env: Sequence[str]) -> dict[str, Any]:
    """The in-place settings a candidate body sets, its secret env values left out (their
    names kept, so a rollback fills them again at the last moment)."""
    applied = {key: copy.deepcopy(body[key]) for key in IN_PLACE_FIELDS if key in body}
    env = applied.get("env")
    if isinstance(env, dict):
        applied["env"] = {k: v for k, v in env.items() if k not in secret_env}
    if networked(body):
        applied[NETWORKING] = True  # only when on: a public pod's record reads as before
    applied["secretEnv"] = list(secret_env)
    return applied


def rollback_patch(
    patch: Mapping[str, Any],
    previous: PreviousPod,
    current: Pod,
    secrets: PodSecrets,
) -> dict[str, Any] | None:
    """The PATCH that undoes `patch`: the settings the result recorded last time, else (a
    result from before results recorded them) the live pod's as read before the PATCH."""
    if previous.applied:
        source, names = previous.applied, list(previous.applied.get("secretEnv") or [])
    else:
        source, names = {k: getattr(current, k) for k in IN_PLACE_FIELDS}, []
        source[NETWORKING] = current.networked
    if NETWORKING in patch and NETWORKING not in source:
        source = {**source, NETWORKING: not patch[NETWORKING]}  # recorded before it was kept
    undo = {k: copy.deepcopy(source[k]) for k in patch if source.get(k) is not None}
    env = undo.get("env")
    if isinstance(env, dict) and names:
        # The key in force now, not the one rolled back from: the old one is not kept.
        secrets.fill(env, names)
    return undo or None


def _pod_result(
    session: Session,
    request: PodRequest,
    pod: Pod,
    index: int,
    attempts: Sequence[Attempt],
    body: Mapping[str, Any],
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
        # A private pod has no proxy URL: its address is for the account's own pods only.
        "url": f"http://{pod.id}.runpod.internal:{request.health.port}"
        if request.private
        else session.proxy.url(pod.id, request.health.port),
        "status": pod.status,
        "volumeId": pod.volume_id,
        "ollamaModels": list(request.ollamaPull),
        "applied": applied_of(body, [*request.hfTokenEnv, *request.servingKeyEnv]),
        "meta": request.meta,
    }


def pod_create(session: Session, request: PodRequest) -> dict[str, Any]:
    """Place on the first candidate that takes, then serve; a failure terminates the pod."""
    bodies = prepare_candidates(request, PodSecrets.of(session))
    session.keyed_for(request)
    timeouts = session.timeouts(request)
    owner = Ownership(request.owner, request.volumeId)
    placement = session.prov.place(request.name, bodies, owner, timeouts)
    sweep = placement.sweep
    try:
        pod = session.prov.bring_up(
            placement.pod.id,
            health=_health(request),
            ollama_tags=request.ollamaPull,
            timeouts=timeouts,
            sweep=sweep,
            private=request.private,
        )
    except BaseException:
        if sweep is not None:
            sweep.give_up()  # the failure is what this run reports
        raise
    if sweep is not None:
        sweep.finish()
    index = placement.candidate_index
    return _pod_result(session, request, pod, index, placement.attempts, bodies[index])


def matching_candidate(bodies: Sequence[dict[str, Any]], pod: Pod) -> int | None:
    """The first candidate with the running pod's GPU type and count; None when none has."""
    running = (pod.gpu.id, pod.gpu.count) if pod.gpu else ("", 0)
    return next((i for i, body in enumerate(bodies) if gpu_of(body) == running), None)


def pod_update(
    session: Session, request: PodRequest, previous: PreviousPod | None
) -> dict[str, Any]:
    """Patch the recorded pod in place; create anew only when there is no usable pod."""
    if previous is None:
        session.log("no previous pod recorded; creating one")
        return pod_create(session, request)
    prov = session.prov
    try:
        current = prov.api.get_pod(previous.podId)
    except NotFoundError:
        ensure_gone("pod", previous.podId, prov.api.list_pods)  # or the URL is wrong: loud
        session.log(f"pod {previous.podId} no longer exists; creating a new one")
        return pod_create(session, request)
    if current.status not in LIVE:
        session.log(f"pod {current.id} is {current.status}; replacing it with a new one")
        prov.terminate(current.id)
        return pod_create(session, request)
    bodies = prepare_candidates(request, PodSecrets.of(session))
    session.keyed_for(request)
    index = matching_candidate(bodies, current)
    if index is None:
        gpu = f"{current.gpu.count}x {current.gpu.id}" if current.gpu else "no GPU"
        session.log(
            f"pod {current.id} runs {gpu}, which no candidate names any more, and a GPU"
            " cannot change in place; terminating it and creating a new pod"
        )
        prov.terminate(current.id)
        return pod_create(session, request)
    body = bodies[index]
    patch = {
        key: body[key]
        for key in IN_PLACE_FIELDS
        if key in body and body[key] != getattr(current, key)
    }
    if networked(body) != current.networked:
        patch[NETWORKING] = networked(body)
    tried = tuple(
        Attempt(str(a.get("gpuId", "")), int(a.get("count", 0)), str(a.get("outcome", "")))
        for a in previous.candidatesTried
    ) or (Attempt(*gpu_of(body), "created"),)
    health, tags = _health(request), request.ollamaPull
    timeouts = session.timeouts(request)
    # Members disarmed from a shared pod: removed once the pod serves the ones that stay.
    gone = [t for t in previous.ollamaModels if t not in tags]
    if not patch:
        session.log(f"pod {current.id}: nothing to change in place; left as it is")
        if tags and not request.private:
            prov.refresh_pull(current, health=health, tags=tags, timeouts=timeouts)
        prov.forget(current, health=health, tags=gone)
        return _pod_result(session, request, current, index, tried, body)
    session.log(f"pod {current.id}: updating {', '.join(sorted(patch))} in place")
    # The starts the system log shows before the PATCH: the restarts after it count from here.
    logged = prov.logged_starts(current.id)
    patched_at = prov.clock()
    patched = prov.patch(current.id, patch)
    pod = prov.settle_update(
        current,
        patched,
        health=health,
        ollama_tags=tags,
        timeouts=timeouts,
        patched_at=patched_at,
        logged_before=logged,
        rollback=rollback_patch(patch, previous, current, PodSecrets.of(session)),
        rollback_tags=previous.ollamaModels,
        private=request.private,
    )
    prov.forget(pod, health=health, tags=gone)
    return _pod_result(session, request, pod, index, tried, body)


def pod_delete(session: Session, previous: PreviousPod | None) -> dict[str, Any]:
    pod_id = previous.podId if previous else None
    return session.delete_recorded("pod", pod_id, lambda i: session.prov.terminate(i), "terminated")
