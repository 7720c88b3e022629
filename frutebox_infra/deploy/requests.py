"""A plan rendered as what the deploy step reads: RunPod pod bodies, pod, seed and volume
requests."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Collection, Sequence
from typing import Any

from frutebox_infra.deploy.contract import (
    OWNER_ENV,
    CpuSpec,
    HealthSpec,
    PodRequest,
    SeedRequest,
    SweepRequest,
    TimeoutSpec,
    VolumeRequest,
    wire_data,
    wire_json,
)
from frutebox_infra.planner.launches import pod_specs
from frutebox_infra.planner.plan import FleetPlan, ModelPlan
from frutebox_infra.planner.ranking import PlacementOption
from frutebox_infra.recipes.base import VOLUME_PATH, PodSpec
from frutebox_infra.seeding.bringup import download_seconds, read_seconds
from frutebox_infra.seeding.manifest import needs_token, seed_plan
from frutebox_infra.seeding.protocol import STATUS_PATH, TOKEN_ENV
from frutebox_infra.stack.settings import StackSettings

HEALTH_BASE_S = 900
"""Seconds a server needs besides moving its weights: image start, CUDA graphs, warm-up."""


def health_deadline_s(
    plan: ModelPlan,
    settings: StackSettings,
    members: Sequence[ModelPlan] = (),
    *,
    seeded: Collection[str] = (),
) -> int:
    """How long a new pod may take to answer health: HEALTH_BASE_S, plus reading every
    member's weights off the volume where its engine loads them at start, plus downloading
    those that no CPU pod seeded first (`seeded`), at the assumed `downloadMBps`; the stack's
    `healthTimeoutSeconds` overrides it."""
    if settings.health_timeout_seconds is not None:
        return settings.health_timeout_seconds
    seconds = 0.0
    for m in (plan, *members):
        serving, recipe = m.resolution.serving, m.resolution.recipe
        weights_gb = serving.weights_disk_gb if serving and serving.weights_disk_gb else 0.0
        if recipe is not None and recipe.loads_weights_at_start:
            seconds += read_seconds(weights_gb, settings.volume_type)
        if m.model_id not in seeded:
            seconds += download_seconds(weights_gb, settings.download_mb_per_s)
    return HEALTH_BASE_S + math.ceil(seconds)


def volume_name(stack: str) -> str:
    """The stack's weights volume; the deploy step appends the stack's ownership token."""
    return f"frutebox-{stack}-weights"


def pod_name(stack: str, model_id: str) -> str:
    """Per stack and pod; not unique on RunPod, so ownership is proven by the token. A shared
    pod is named after its anchor (largest member), so the name survives smaller members
    coming and going."""
    return f"frutebox-{stack}-{model_id}"


def seed_pod_name(stack: str, model_id: str) -> str:
    """The CPU pod that seeds `model_id`'s weights; like a pod's, not unique on RunPod."""
    return f"frutebox-{stack}-{model_id}-seed"


def seeded_ids(plan: FleetPlan) -> frozenset[str]:
    """The models a CPU pod seeds before their GPU pod starts."""
    return plan.seeding.seeded_ids if plan.seeding else frozenset()


def pod_name_of(plan: FleetPlan, model_id: str) -> str | None:
    """The RunPod name of the pod serving `model_id` (shared by a pod's members)."""
    pod = plan.pod_of(model_id)
    return pod_name(plan.stack, pod.anchor) if pod else None


def pod_body(
    plan: ModelPlan,
    placement: PlacementOption,
    settings: StackSettings,
    *,
    stack: str,
    volume_id: str,
    owner: str,
    spec: PodSpec | None = None,
) -> dict[str, Any]:
    """The exact RunPod v2 `POST /v2/pods` body for one placement; `spec` is the shared pod
    when `plan` anchors one (else the model's own pod)."""
    pod = spec or placement.pod
    private = settings.exposure == "private"
    body: dict[str, Any] = {
        "name": pod_name(stack, plan.model_id),
        "image": pod.image,
        "args": pod.args,
        "env": {**pod.env, OWNER_ENV: owner},
        # Private: nothing on RunPod's public proxy; the account's own pods reach the port at
        # <podId>.runpod.internal over global networking, which the pod is created with.
        "ports": [] if private else pod.ports,
        "disk": settings.container_disk_gb,
        # The image's CUDA floor: a host with an older driver is a capacity answer, so the
        # walk moves on instead of starting a pod that can never serve.
        "gpu": {
            "id": placement.gpu.id,
            "count": placement.count,
            "minCudaVersion": placement.image.min_cuda_version,
        },
        "cloud": str(settings.cloud),
        "dataCenterIds": [settings.data_center],
        "mounts": {"network": [{"volumeId": volume_id, "path": VOLUME_PATH}]},
    }
    if private:
        # Only when set: a public stack's bodies read as they did, so no pod sees a diff.
        body["globalNetworking"] = True
    return body


def shared_specs(plan: ModelPlan, members: Sequence[ModelPlan]) -> list[PodSpec]:
    """Per candidate placement, the pod that serves `plan` and the other `members` of its
    pod (they hold their views of the same placements, in the same order)."""
    return pod_specs(plan.candidates, [m.candidates for m in members])


def pod_request_needs_key(plan: ModelPlan, members: Sequence[ModelPlan] = ()) -> bool:
    """Whether the pod's gateway needs the stack's serving key (in any candidate)."""
    return any(spec.serving_key_env for spec in shared_specs(plan, members))


def gated_models(plan: FleetPlan) -> frozenset[str]:
    """The models whose pod runs the gateway, as the deploy step renders that pod: reached with
    the stack's serving key, and the only ones ever sent it."""
    gated: set[str] = set()
    for pod in plan.pods:
        anchor, members = plan.members(pod)
        if pod_request_needs_key(anchor, members):
            gated.update(pod.model_ids)
    return frozenset(gated)


def pod_request(
    plan: ModelPlan,
    settings: StackSettings,
    *,
    stack: str,
    volume_id: str,
    owner: str,
    members: Sequence[ModelPlan] = (),
    seeded: Collection[str] = (),
) -> PodRequest:
    """What the deploy step reads on stdin: candidates cheapest-first plus how to check health.

    `plan` is the pod's anchor; `members` the other models sharing its pod, if any; `seeded`
    the models whose weights a CPU pod put on the volume first.
    """
    assert plan.placement is not None
    specs = shared_specs(plan, members)
    pod = specs[0]
    return PodRequest(
        name=pod_name(stack, plan.model_id),
        owner=owner,
        volumeId=volume_id,
        candidates=[
            pod_body(plan, p, settings, stack=stack, volume_id=volume_id, owner=owner, spec=spec)
            for p, spec in zip(plan.candidates, specs, strict=True)
        ],
        health=HealthSpec(
            port=pod.port, path=pod.health_path, expectedFiles=list(pod.expected_files)
        ),
        ollamaPull=list(pod.ollama_pulls),
        hfTokenEnv=list(pod.secret_env),
        servingKeyEnv=list(pod.serving_key_env),
        private=settings.exposure == "private",
        timeouts=TimeoutSpec(
            healthySeconds=health_deadline_s(plan, settings, members, seeded=seeded)
        ),
        meta={"models": [plan.model_id, *(m.model_id for m in members)], "stack": stack}
        if members
        else {"model": plan.model_id, "stack": stack},
    )


def seed_fingerprint(plan: FleetPlan, model_id: str) -> str:
    """What replaces a model's seed resource: its job (source, revision, where it goes) as
    sent; anything else about the seed (flavor, deadline, key) moves no byte."""
    decision = plan.seeding.of(model_id) if plan.seeding else None
    assert decision is not None and decision.job is not None
    return hashlib.sha256(wire_json(decision.job).encode()).hexdigest()[:16]


def seed_request(plan: FleetPlan, model_id: str, *, volume_id: str, owner: str) -> SeedRequest:
    """What `seed create|update` reads: the model's job and the CPU flavors to walk."""
    seeding = plan.seeding
    decision = seeding.of(model_id) if seeding else None
    assert seeding is not None and decision is not None and decision.job is not None
    assert seeding.image is not None and seeding.cpu is not None
    settings, image = plan.settings, seeding.image
    name = seed_pod_name(plan.stack, model_id)
    return SeedRequest(
        name=name,
        owner=owner,
        volumeId=volume_id,
        dataCenter=settings.data_center,
        pod={
            "name": name,
            "image": image.reference,
            "ports": [f"{image.port}/http"],
            "disk": seeding.cpu.disk_gb,
            # CPU pods run on Secure cloud only, which is also the only one volumes mount on.
            "cloud": "SECURE",
            "dataCenterIds": [settings.data_center],
            "mounts": {"network": [{"volumeId": volume_id, "path": VOLUME_PATH}]},
        },
        cpus=[CpuSpec(id=c.flavor.id, vcpuCount=c.vcpus) for c in seeding.cpus],
        plan=wire_data(seed_plan([decision.job], port=image.port)),
        status=HealthSpec(port=image.port, path=STATUS_PATH),
        timeoutSeconds=decision.timeout_s,
        hfTokenEnv=[TOKEN_ENV] if needs_token(decision.job) else [],
        meta={"model": model_id, "stack": plan.stack},
    )


def volume_request(plan: FleetPlan) -> VolumeRequest:
    """What the volume's deploy step reads on stdin."""
    return VolumeRequest(
        name=volume_name(plan.stack),
        size=plan.volume.size_gb,
        dataCenter=plan.settings.data_center,
        type=plan.volume.tier,
    )


def sweep_request(
    plan: FleetPlan, *, volume_id: str, owner: str, pod_ids: Sequence[str]
) -> SweepRequest:
    """What the sweep at the end of an `up` reads: the state's volume and pods, and the names
    of every pod and seeding pod the plan declares."""
    names = [pod_name(plan.stack, pod.anchor) for pod in plan.pods]
    names += [seed_pod_name(plan.stack, model_id) for model_id in sorted(seeded_ids(plan))]
    return SweepRequest(
        volumeName=volume_name(plan.stack),
        owner=owner,
        volumeId=volume_id,
        podIds=sorted(p for p in pod_ids if p),
        names=names,
    )
