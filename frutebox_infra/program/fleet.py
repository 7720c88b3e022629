"""The Pulumi shell: declares the weights volume, one pod per armed model (or shared pod) and,
before each pod, a seed per model that a CPU pod seeds, from a FleetPlan.

The only module that imports pulumi. Nothing here talks to RunPod: each resource is a
`pulumi_command.local.Command` whose create/update/delete run `python -m frutebox_infra.runpod`,
which only happens on `pulumi up`/`destroy`, never during preview.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi_command import local

from frutebox_infra.deploy.contract import VolumeRequest
from frutebox_infra.deploy.requests import (
    pod_name,
    pod_request,
    pod_request_needs_key,
    seed_fingerprint,
    seed_request,
    seeded_ids,
    sweep_request,
    volume_request,
)
from frutebox_infra.planner.plan import FleetPlan, ModelPlan
from frutebox_infra.report.plan_report import plan_data
from frutebox_infra.stack.endpoints import STACK_API_KEY, step_environment
from frutebox_infra.stack.serving_key import (
    MINT_COMMAND,
    OUTPUT_NAME,
    STACK_SERVING_KEY,
    STEP_SERVING_KEY_ENV,
    key_problem,
)
from frutebox_infra.stack.settings import PROJECT, STACK_KEYS, StackSettings
from frutebox_infra.views.plan import PlanView

RUNPOD_COMMAND = '"${FRUTEBOX_PYTHON:-python3}" -m frutebox_infra.runpod'
"""FRUTEBOX_PYTHON (set by tools/env.sh) names the interpreter that has this package; the
command text stays the same on every machine so it never shows up as a diff."""


@dataclass(frozen=True, kw_only=True)
class Credentials:
    """Secrets and endpoints for the deploy step; values may be secret Outputs."""

    runpod_api_key: pulumi.Input[str] | None = None
    """The stack's secret key; the step prefers an exported RUNPOD_API_KEY (endpoints.py)."""
    hf_token: pulumi.Input[str] | None = None
    runpod_api_url: str | None = None
    """The stack's `runpodApiUrl`; likewise second to an exported RUNPOD_API_URL."""
    serving_key: pulumi.Input[str] | None = None
    """The stack secret `servingKey`; None: the key minted on the first `up` (`mint_key`)."""

    def environment(self) -> dict[str, pulumi.Input[str]]:
        key = None if self.runpod_api_key is None else pulumi.Output.secret(self.runpod_api_key)
        env: dict[str, pulumi.Input[str]] = dict(step_environment(key, self.runpod_api_url))
        if self.hf_token is not None:
            env["FRUTEBOX_HF_TOKEN"] = pulumi.Output.secret(self.hf_token)
        return env


SDK_DEBUG_ENV = "FRUTEBOX_PULUMI_SDK_DEBUG"
"""Set (non-empty) to keep the Pulumi SDK's own debug lines, for `pulumi preview --debug`."""


def drop_sdk_debug_lines(env: Mapping[str, str]) -> bool:
    """Stop the Python SDK sending its registration debug lines; True where they are dropped.

    The SDK logs about five lines per resource it registers ("registering resource",
    "beginning rpc", "resource registration successful", ...), each a blocking RPC to the
    engine on the program's thread that the engine shows only under `--debug`. They are
    dropped where they are made, unless `FRUTEBOX_PULUMI_SDK_DEBUG` is set; the program's
    own lines are info, warnings and errors, sent as before (nothing of ours logs at debug).
    """
    if env.get(SDK_DEBUG_ENV):
        return False
    pulumi.log.debug = _dropped
    return True


def _dropped(msg: str, *args: Any, **kwargs: Any) -> None:
    """`pulumi.log.debug` while the SDK's debug lines are dropped."""


def _command(kind: str, action: str) -> str:
    return f"{RUNPOD_COMMAND} {kind} {action}"


def _deploy_step(name: str, kind: str, **inputs: Any) -> local.Command:
    """A resource whose create, update and delete are the deploy step's actions on `kind`,
    its progress logged on stderr."""
    return local.Command(
        name,
        create=_command(kind, "create"),
        update=_command(kind, "update"),
        delete=_command(kind, "delete"),
        logging=local.Logging.STDERR,
        **inputs,
    )


SECRET_OUTPUTS = ["stderr"]
"""Secrets by construction, not by a provider's choice (upstream's never makes an output
secret because an input is): stdout is the step's result JSON (ids, GPU, cost), which the
step writes through its redactor and the stack exports, so it stays readable; stderr is
its progress log, echoed from a RunPod that may repeat what it was sent, so it is stored
encrypted whatever it holds."""


def _options(**kwargs: Any) -> pulumi.ResourceOptions:
    """Every deploy-step command's options: SECRET_OUTPUTS marked secret."""
    return pulumi.ResourceOptions(additional_secret_outputs=SECRET_OUTPUTS, **kwargs)


def _result(stdout: pulumi.Output[str]) -> pulumi.Output[Any]:
    return stdout.apply(lambda text: json.loads(text) if text else {})


@dataclass(frozen=True, kw_only=True)
class WeightsVolumeArgs:
    """What the weights volume is declared from."""

    request: VolumeRequest
    credentials: Credentials


class WeightsVolume(pulumi.ComponentResource):
    """The stack's network volume. Protected: it never leaves with a config change.

    Two commands, so the volume id stays known while the size changes: one creates (and on
    an explicit destroy deletes) the volume and ignores later size changes; the other grows
    it to the plan's size. Pods depend on the id only, so arming a model never looks like a
    reason to replace every pod.
    """

    volume_id: pulumi.Output[str]
    owner: pulumi.Output[str]
    size_gb: pulumi.Output[int]

    def __init__(
        self, name: str, args: WeightsVolumeArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("frutebox:index:WeightsVolume", name, None, opts)
        request = args.request
        environment = args.credentials.environment()
        # `update` runs when only the environment changes (a rotated API key): it finds the
        # same volume from the previous output rather than creating a second one.
        volume = _deploy_step(
            f"{name}-volume",
            "volume",
            stdin=request.to_json(),
            environment=environment,
            # The tier is fixed at creation, like the data centre: a change is a new volume.
            triggers=[request.dataCenter, request.type],
            opts=_options(parent=self, protect=True, ignore_changes=["stdin"]),
        )
        recorded = _result(volume.stdout)
        self.volume_id = recorded.apply(lambda r: str(r.get("volumeId", "")))
        # The stack's ownership token, minted by the create and kept in this output (state).
        self.owner = recorded.apply(lambda r: str(r.get("owner") or ""))
        size = request.size
        grow = local.Command(
            f"{name}-size",
            create=_command("volume", "grow"),
            update=_command("volume", "grow"),
            stdin=self.volume_id.apply(
                lambda vid: json.dumps({"volumeId": vid, "size": size}, sort_keys=True)
            ),
            environment=environment,
            logging=local.Logging.STDERR,
            opts=_options(parent=self),
        )
        self.size_gb = _result(grow.stdout).apply(lambda r: int(r.get("size", size)))
        self.register_outputs({"volumeId": self.volume_id, "sizeGb": self.size_gb})


@dataclass(frozen=True, kw_only=True)
class ModelServerArgs:
    """What one pod's resources are declared from."""

    stack: str
    plan: ModelPlan
    settings: StackSettings
    volume_id: pulumi.Output[str]
    owner: pulumi.Output[str]
    volume_name: str
    credentials: Credentials
    members: tuple[ModelPlan, ...] = ()
    """The other models sharing this pod (co-location); `plan` is its anchor."""
    fleet: FleetPlan | None = None
    """The whole plan: which of the pod's models a CPU pod seeds first, and their jobs."""
    dormant: bool = False
    """Every model of the pod is outside its armed window: no pod, its seeds (and so the
    weights on the volume) kept as they are."""
    serving_key: pulumi.Input[str] | None = None
    """The stack's serving key (secret), for a pod whose gateway asks for it."""


class ModelServer(pulumi.ComponentResource):
    """One pod: an armed model's, or the anchor's shared with `members`. Created on the first
    placement RunPod has in stock; members coming and going update it in place.

    Each of its models that a CPU pod seeds has a seed resource (`<model>-seed`) the pod
    depends on, so the GPU pod is created only once its weights are on the volume, and a
    failed seed stops only what depends on it. A seed is replaced when its job changes
    (source, revision, destination); its delete moves nothing: the weights stay on the
    volume."""

    pod_id: pulumi.Output[str]
    gpu_id: pulumi.Output[str]
    gpu_count: pulumi.Output[int]
    usd_per_hour: pulumi.Output[float]
    url: pulumi.Output[str]

    def __init__(
        self, name: str, args: ModelServerArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("frutebox:index:ModelServer", name, None, opts)
        plan, settings, stack = args.plan, args.settings, args.stack
        seeded = seeded_ids(args.fleet) if args.fleet else frozenset()
        seeds = [
            self._seed(model_id, args)
            for model_id in (plan.model_id, *(m.model_id for m in args.members))
            if model_id in seeded
        ]
        if args.dormant:
            self.pod_id = pulumi.Output.from_input("")
            self.gpu_id = pulumi.Output.from_input("")
            self.gpu_count = pulumi.Output.from_input(0)
            self.usd_per_hour = pulumi.Output.from_input(0.0)
            self.url = pulumi.Output.from_input("")
            self.register_outputs({"podId": self.pod_id, "gpuId": self.gpu_id, "url": self.url})
            return
        environment = args.credentials.environment()
        if pod_request_needs_key(plan, args.members):
            assert args.serving_key is not None, "a gateway pod needs the stack's serving key"
            environment[STEP_SERVING_KEY_ENV] = pulumi.Output.secret(args.serving_key)
        stdin = pulumi.Output.all(args.volume_id, args.owner).apply(
            lambda ids: pod_request(
                plan,
                settings,
                stack=stack,
                volume_id=ids[0],
                owner=ids[1],
                members=args.members,
                seeded=seeded,
            ).to_json()
        )
        # What RunPod cannot change on a live pod is a replace: the placement the plan picks,
        # the data centre and the volume (by its stable name: its id is unknown in a preview
        # whenever the volume's command updates). Image, args, env and ports are PATCHed in
        # place, and a fallback list that changes around a running pod is the deploy step's
        # concern, not a reason to take the pod down.
        assert plan.placement is not None
        triggers: list[Any] = [
            settings.data_center,
            args.volume_name,
            f"{plan.placement.count}x {plan.placement.gpu.id}",
        ]
        command = _deploy_step(
            f"{name}-pod",
            "pod",
            stdin=stdin,
            environment=environment,
            triggers=triggers,
            opts=_options(parent=self, delete_before_replace=True, depends_on=seeds),
        )
        result = _result(command.stdout)
        self.pod_id = result.apply(lambda r: str(r.get("podId", "")))
        self.gpu_id = result.apply(lambda r: str(r.get("gpuId", "")))
        self.gpu_count = result.apply(lambda r: int(r.get("gpuCount") or 0))
        self.usd_per_hour = result.apply(lambda r: float(r.get("costPerHour") or 0.0))
        self.url = result.apply(lambda r: str(r.get("url", "")))
        self.register_outputs({"podId": self.pod_id, "gpuId": self.gpu_id, "url": self.url})

    def _seed(self, model_id: str, args: ModelServerArgs) -> local.Command:
        fleet = args.fleet
        assert fleet is not None
        stdin = pulumi.Output.all(args.volume_id, args.owner).apply(
            lambda ids: seed_request(fleet, model_id, volume_id=ids[0], owner=ids[1]).to_json()
        )
        settings = args.settings
        return _deploy_step(
            f"{model_id}-seed",
            "seed",
            stdin=stdin,
            environment=args.credentials.environment(),
            # A new volume (its data centre or tier) holds none of the weights: seed again.
            triggers=[
                seed_fingerprint(fleet, model_id),
                settings.data_center,
                settings.volume_type,
            ],
            opts=_options(parent=self),
        )


@dataclass(frozen=True, kw_only=True)
class Fleet:
    """The declared volume and pods, by their anchor model."""

    volume: WeightsVolume
    servers: Mapping[str, ModelServer]
    swept: pulumi.Output[str] | None = None
    """What the sweep at the end of an `up` said (`sweep_leftovers`); None in a preview."""


def mint_key() -> pulumi.Output[str]:
    """The stack's own serving key, minted once by the first `up` and kept in state as a
    secret: the command's output is never echoed (logging off) and stored encrypted. Nothing
    re-runs it: it has no update, so the key lasts until the stack secret replaces it."""
    minted = local.Command(
        "serving-key",
        create=MINT_COMMAND,
        logging=local.Logging.NONE,
        opts=pulumi.ResourceOptions(additional_secret_outputs=["stdout", "stderr"]),
    )
    return pulumi.Output.secret(minted.stdout.apply(lambda text: (text or "").strip()))


def serving_key(credentials: Credentials) -> pulumi.Output[str]:
    """The stack secret `servingKey` when set (a rotation is setting or changing it), else the
    minted key."""
    if credentials.serving_key is not None:
        return pulumi.Output.secret(credentials.serving_key)
    return mint_key()


def declare_fleet(plan: FleetPlan, credentials: Credentials) -> Fleet:
    """Declare every resource of a plan that has no problems, and export the outputs."""
    key = serving_key(credentials)
    request = volume_request(plan)
    volume = WeightsVolume("weights", WeightsVolumeArgs(request=request, credentials=credentials))
    servers: dict[str, ModelServer] = {}
    # One resource per pod, named after its anchor: with co-location off that is one per
    # model under the model's own name, as always.
    for pod in plan.pods:
        anchor, members = plan.members(pod)
        servers[anchor.model_id] = ModelServer(
            anchor.model_id,
            ModelServerArgs(
                stack=plan.stack,
                plan=anchor,
                settings=plan.settings,
                volume_id=volume.volume_id,
                owner=volume.owner,
                volume_name=request.name,
                credentials=credentials,
                members=members,
                fleet=plan,
                dormant=plan.pod_dormant(pod),
                serving_key=key,
            ),
            opts=pulumi.ResourceOptions(depends_on=[volume]),
        )
    pulumi.export("plan", plan_data(PlanView(plan=plan)))
    # The ownership token is exported so `frutebox status` can prove which pods are ours.
    pulumi.export(
        "volume", {"id": volume.volume_id, "sizeGb": volume.size_gb, "owner": volume.owner}
    )
    pulumi.export("pods", {m.model_id: _model_pod(plan, m, servers) for m in plan.models})
    # Beside each model's URL: `pulumi stack output --show-secrets` gives a client both.
    pulumi.export(OUTPUT_NAME, key)
    swept = sweep_leftovers(plan, volume, servers, credentials)
    return Fleet(volume=volume, servers=servers, swept=swept)


def sweep_leftovers(
    plan: FleetPlan,
    volume: WeightsVolume,
    servers: Mapping[str, ModelServer],
    credentials: Credentials,
) -> pulumi.Output[str] | None:
    """On `up`, never in a preview, once the volume and every pod are in place: the deploy
    step's `stack sweep` removes the pods and volumes the stack's token proves ours and this
    state does not record, so what an earlier run could not see (an ambiguous create's result
    listed late) stops billing with the next `up`, whether the stack changed or not.

    Run through the Command provider's `local.run` function, not as a resource: a resource
    runs only when its inputs change. Its log is shown on the stack; a failure fails the `up`.
    Returns what it said (the SDK awaits it before the program ends); None in a preview.
    """
    if pulumi.runtime.is_dry_run():
        return None
    environment = credentials.environment()
    recorded = pulumi.Output.all(
        volume.volume_id, volume.owner, *(s.pod_id for s in servers.values())
    )

    def sweep(ids: list[Any]) -> Awaitable[str]:
        return _sweep(plan, [str(i or "") for i in ids], environment)

    return recorded.apply(sweep)


async def _sweep(plan: FleetPlan, ids: list[str], environment: Mapping[str, Any]) -> str:
    """What the sweep said, after showing it; nothing when the state holds no token."""
    volume_id, owner, *pod_ids = ids
    if not volume_id or not owner:
        return ""  # a state without the token proves nothing ours
    request = sweep_request(plan, volume_id=volume_id, owner=owner, pod_ids=pod_ids)
    args = {"command": _command("stack", "sweep"), "stdin": request.to_json(),
            "environment": dict(environment)}  # fmt: skip
    try:
        result = await pulumi.runtime.invoke_async("command:local:run", args)
    except Exception as exc:  # the step's own paragraph says what may bill, and what to do
        raise pulumi.RunError(f"sweeping this stack's untracked pods and volumes: {exc}") from None
    said = str((result or {}).get("stderr") or "").strip()
    if said:
        pulumi.log.info(said)
    return said


def _model_pod(plan: FleetPlan, model: ModelPlan, servers: Mapping[str, ModelServer]) -> Any:
    """A model's output: the pod serving it, and its share of that pod's billed $/h (the share
    the plan gives it), so outputs stay per model when models share a pod."""
    pod = plan.pod_of(model.model_id)
    assert pod is not None
    server = servers[pod.anchor]
    share = model.usd_per_hour_best / pod.usd_per_hour_best if pod.usd_per_hour_best else 1.0
    window = plan.window_of(model.model_id)
    armed = (
        {
            "armed": not plan.pod_dormant(pod),
            "armedWindow": window.window,
            "armedUntil": window.until.isoformat() if window.until else None,
        }
        if window is not None
        else {}
    )
    return armed | {
        "name": pod_name(plan.stack, pod.anchor),
        "sharedWith": [m for m in pod.model_ids if m != model.model_id],
        "podId": server.pod_id,
        "gpuId": server.gpu_id,
        "gpuCount": server.gpu_count,
        "usdPerHour": server.usd_per_hour.apply(lambda usd: round(usd * share, 2)),
        "url": server.url,
    }


def read_config() -> dict[str, str]:
    """This project's stack keys and RunPod key as the engine passed them: text per key, JSON
    for structures; a key left unset is absent."""
    config = pulumi.Config(PROJECT)
    found = {name: config.get(name) for name in (*STACK_KEYS, STACK_API_KEY)}
    return {name: text for name, text in found.items() if text is not None}


def credentials_from_config(settings: StackSettings, env: Mapping[str, str]) -> Credentials:
    """The stack's secrets and URL for the deploy step, which resolves them against its own
    environment with the one precedence of `endpoints.py`. The HF token: secret config first,
    else the environment's."""
    config = pulumi.Config(PROJECT)
    given_key = config.get(STACK_SERVING_KEY)
    if given_key is not None and (bad := key_problem(given_key)):
        raise pulumi.RunError(f"Pulumi.{pulumi.get_stack()}.yaml: {bad}.")
    hf_token = config.get_secret("hfToken")
    if hf_token is None and env.get("HF_TOKEN"):
        hf_token = pulumi.Output.secret(env["HF_TOKEN"])
    return Credentials(
        runpod_api_key=config.get_secret(STACK_API_KEY),
        hf_token=hf_token,
        runpod_api_url=settings.runpod_api_url or None,
        serving_key=None if given_key is None else pulumi.Output.secret(given_key),
    )
