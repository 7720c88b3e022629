"""`stack sweep`: at the end of every `up`, remove what the stack's token proves ours and the
stack's state does not record.

Why a step of its own: what an ambiguous create made may list only after the step that made
it stopped looking (AmbiguousCreates' window), and a run cancelled mid-create may leave a pod
of ours behind. Each bills until someone removes it; `frutebox status` names it `untracked`,
and this makes the next `pulumi up` remove it too, whether or not the stack changed. The proof
is the one `frutebox status` applies (deploy/contract.py: `owns_pod`, `volume_owned`): our
token and our volume, never a name alone.
"""

from __future__ import annotations

import contextlib
from typing import Any

from frutebox_infra.deploy.contract import SweepRequest, owns_pod, volume_owned
from frutebox_infra.runpod.command_io import Session
from frutebox_infra.runpod.errors import Cancelled, MayStillBillError, NotFoundError, RunPodError
from frutebox_infra.runpod.wire import NetworkVolume, Pod


def leftover_pods(pods: list[Pod], request: SweepRequest) -> list[Pod]:
    """Live pods of ours (the token and our volume) the state does not record, among those
    named for this `up`'s pods and seeding pods."""
    names, recorded = set(request.names), set(request.podIds)
    return [
        p
        for p in pods
        if p.id not in recorded
        and p.status != "TERMINATED"
        and p.name in names
        and owns_pod(p.env, p.volume_id, owner=request.owner, volume_id=request.volumeId)
    ]


def leftover_volumes(volumes: list[NetworkVolume], request: SweepRequest) -> list[NetworkVolume]:
    """Volumes named with the stack's token other than the one the state records."""
    return [
        v
        for v in volumes
        if v.id != request.volumeId
        and volume_owned(v.name, base=request.volumeName, owner=request.owner)
    ]


def stack_sweep(session: Session, request: SweepRequest) -> dict[str, Any]:
    """Terminate the leftover pods, then delete the leftover volumes (a volume a pod still
    mounts cannot go); what could not be looked for or removed fails the step, naming it."""
    api, prov = session.api, session.prov
    pods: list[str] = []
    volumes: list[str] = []
    kind, at = "pod", ""
    try:
        for pod in leftover_pods(api.list_pods(), request):
            at = pod.id
            session.log(
                f"pod {pod.id} ({pod.name}, {pod.status}) carries this stack's token and mounts"
                " its volume, but the state does not record it (untracked): terminating it so"
                " that it does not bill"
            )
            prov.terminate(pod.id)
            pods.append(pod.id)
        kind, at = "volume", ""
        for volume in leftover_volumes(api.list_volumes(), request):
            at = volume.id
            session.log(
                f"volume {volume.id} ({volume.name}, {volume.size} GB) is named with this"
                " stack's token, but the state does not record it (untracked): deleting it so"
                " that it does not bill"
            )
            with contextlib.suppress(NotFoundError):
                api.delete_volume(volume.id)
            volumes.append(volume.id)
    except Cancelled:
        raise
    except RunPodError as exc:
        what = f"removing {kind} {at}" if at else f"looking for {kind}s of this stack"
        raise MayStillBillError(
            f"Every resource of this `up` is in place, but {what} that its state does not"
            f" record failed ({exc}). It may bill: run `frutebox status --stack <stack>"
            " --terminate-untracked`, or `pulumi up` again.",
            kind=kind,
            name=request.volumeName if kind == "volume" else None,
            ids=(at,) if at else (),
        ) from exc
    if not pods and not volumes:
        session.log("no pod or volume of this stack is left that its state does not record")
    return {"terminatedPods": pods, "deletedVolumes": volumes}
