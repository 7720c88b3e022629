"""The emulated RunPod account: pods, network volumes, stock and prices, under the API's rules."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping
from typing import Any

from frutebox_infra.emulator.admission import (
    admit_pod,
    check_data_centers,
    check_image,
    check_networking,
    take_gpus,
)
from frutebox_infra.emulator.billing import close_interval, open_interval
from frutebox_infra.emulator.catalog import Catalog, Stock, full_stock
from frutebox_infra.emulator.clock import Clock, SystemClock
from frutebox_infra.emulator.containers import log_progress, settle, step
from frutebox_infra.emulator.counters import counters_failure
from frutebox_infra.emulator.errors import ApiProblem
from frutebox_infra.emulator.gateway import hook_failure
from frutebox_infra.emulator.keys import Scope
from frutebox_infra.emulator.launch import CRASH_FAULT_LINE, launch_failure
from frutebox_infra.emulator.ports import serve_port
from frutebox_infra.emulator.realism import STANDARD, Realism
from frutebox_infra.emulator.records import (
    ACTIONS,
    HOLDS_GPUS,
    LIVE,
    RESTART_FIELDS,
    PodRecord,
    VolumeRecord,
    timestamp,
)
from frutebox_infra.emulator.storage import Storage

HAND_EDITABLE = frozenset({"image", "args", "env", "ports", "disk", "name"})
"""What a person can change on a pod in the console."""


class Account:
    """One emulated account. Not thread-safe by itself: the routes serialise calls.

    Every time it reads comes from `clock` (the system's unless a test brings its own).
    """

    def __init__(
        self,
        catalog: Catalog,
        stock: Stock | None = None,
        realism: Realism | None = None,
        clock: Clock | None = None,
        storage: Storage | None = None,
    ) -> None:
        self.catalog = catalog
        self.storage = storage or Storage()
        """The weights side: the emulated hub, and what pods find on and bring to volumes."""
        self.initial_catalog = catalog
        self.volume_types: dict[str, list[str]] = {}
        """Out-of-band overrides of the data centres' volume tiers."""
        self.realism = realism or Realism.fast()
        self.clock: Clock = clock or SystemClock()
        self.initial_stock: Stock = dict(stock if stock is not None else full_stock(catalog))
        self.stock: Stock = {}
        self.pods: dict[str, PodRecord] = {}
        self.volumes: dict[str, VolumeRecord] = {}
        self.requests: list[dict[str, Any]] = []
        self.keys: dict[str, Scope] = {}
        """The API keys and their scopes now (keys.py); the console can change them."""
        self.reset()

    def reset(self) -> None:
        self.keys = dict(self.realism.api_keys)
        self.stock = dict(self.initial_stock)
        self.catalog = self.initial_catalog
        self.volume_types = {}
        self.pods = {}
        self.volumes = {}
        self.requests = []
        self.storage.reset()
        self._seed_foreign()

    def _seed_foreign(self) -> None:
        """Someone else's pods and volumes under names we may use: RunPod names are not unique.

        They run another image in another data centre and mount nothing of ours; only the
        name collides.
        """
        dcs = list(self.catalog.data_centers)
        elsewhere = dcs[-1]
        now = self.clock.now()
        for index, name in enumerate(self.realism.foreign_pod_names):
            gpu = next(iter(self.catalog.gpus))
            pod = PodRecord(
                id=f"foreign{index:04d}",
                name=name,
                body={
                    "name": name,
                    "image": "someone/else:1",
                    "ports": ["8888/http"],
                    "gpu": {"id": gpu, "count": 1},
                    "env": {"JUPYTER_TOKEN": "theirs"},
                },
                status="RUNNING",
                data_center_id=elsewhere,
                cost_per_hour=0.5,
                created_at=timestamp(now),
                started_at=timestamp(now),
                started_wall=now - 86400,
                foreign=True,
            )
            self.pods[pod.id] = pod
        for index, name in enumerate(self.realism.foreign_volume_names):
            volume = VolumeRecord(f"forvol{index:04d}", name, 500, dcs[0], STANDARD, foreign=True)
            self.volumes[volume.id] = volume

    # Pods

    def _release(self, pod: PodRecord) -> None:
        if pod.status in HOLDS_GPUS:
            if pod.gpu:
                key = (pod.gpu[0], pod.data_center_id)
                self.stock[key] = self.stock.get(key, 0) + pod.gpu[1]
            close_interval(pod, self.clock.utc())
        self.storage.on_stop(pod, self._volume_of(pod), self.clock.now())

    def _volume_of(self, pod: PodRecord) -> VolumeRecord | None:
        return self.volumes.get(pod.volume_id) if pod.volume_id else None

    def create_pod(self, request: Mapping[str, Any]) -> PodRecord:
        """Admit the create (admission.py), then place the pod, PROVISIONING and billing."""
        admitted = admit_pod(
            request,
            catalog=self.catalog,
            stock=self.stock,
            volumes=self.volumes,
            realism=self.realism,
        )
        body, now = admitted.body, self.clock.now()
        pod = PodRecord(
            id=uuid.uuid4().hex[:14],
            name=body["name"],
            body=body,
            status="PROVISIONING",
            data_center_id=admitted.data_center,
            cost_per_hour=round(admitted.usd_per_hour, 4),
            created_at=timestamp(now),
            created_wall=now,
            cuda=admitted.cuda,
            load_s=admitted.load_s,
            logs=[["container", f"pulling image {body.get('image', '')}"]],
            crash=launch_failure(self.realism.entrypoints, body, self.realism.dispatchers),
        )
        others = list(self.pods.values())
        self.pods[pod.id] = pod
        self.storage.on_create(pod, self._volume_of(pod), self.realism, others, now)
        pod.crash = pod.crash or counters_failure(pod.body, self._volume_of(pod))
        open_interval(pod, self.clock.utc())
        return pod

    def mark(self, pod_id: str, fault: str) -> None:
        """Make a created (or just PATCHed) pod misbehave: pod-error, never-healthy,
        pull-fails, or crash-loop (its container exits at start, again and again)."""
        pod = self.pods[pod_id]
        if fault == "crash-loop":
            pod.crash = CRASH_FAULT_LINE
            return
        pod.fault = fault

    def _settle(self, pod: PodRecord) -> PodRecord:
        """The pod's container brought to now (a crash loop moves on between reads)."""
        r = self.realism
        settle(pod, self.clock.now(), up_s=r.real_s(r.crash_up_s), gap_s=r.real_s(r.crash_gap_s))
        return pod

    def pod(self, pod_id: str) -> PodRecord:
        """A pod the API still shows; terminated pods are gone from it."""
        pod = self.pods.get(pod_id)
        if pod is None or pod.status == "TERMINATED":
            raise ApiProblem(404, f"pod {pod_id} not found")
        return pod

    def read_pod(self, pod_id: str) -> PodRecord:
        """GET: each read moves a starting pod one step, so polling is really exercised."""
        pod = self.pod(pod_id)
        step(pod, self.clock.now())
        return self._settle(pod)

    def _listed(self, record: PodRecord | VolumeRecord) -> bool:
        """Eventually consistent, per object: shown once its own lag after its create passed
        (the account's, unless a fault stated another), whatever later creates show before."""
        if record.foreign:
            return True
        shown = record.listed_wall
        if shown is None:
            shown = record.created_wall + self.realism.real_s(self.realism.listing_delay_s)
        return shown <= self.clock.now()

    def list_late(self, op: str, object_id: str, emulated_s: float) -> None:
        """The object `op` (pods.create or volumes.create) just made lists only `emulated_s`
        after its create, instead of after the account's usual lag."""
        record: PodRecord | VolumeRecord = (
            self.pods[object_id] if op == "pods.create" else self.volumes[object_id]
        )
        record.listed_wall = record.created_wall + self.realism.real_s(emulated_s)

    def list_pods(self) -> list[PodRecord]:
        """Eventually consistent: a pod shows up only some time after its create."""
        return [
            self._settle(p)
            for p in self.pods.values()
            if p.status != "TERMINATED" and self._listed(p)
        ]

    def logs(
        self, pod_id: str, tail: int, source: str | None = "container"
    ) -> list[tuple[str, str]]:
        """The pod's (source, line) of `source` (both when None), as GET /v2/pods/{id}/logs
        streams them."""
        pod = self._settle(self.pod(pod_id))
        log_progress(pod, self.clock.now())
        entries = pod.entries(source)
        return entries[-tail:] if tail else []

    def update_pod(self, pod_id: str, patch: Mapping[str, Any]) -> PodRecord:
        pod = self.pod(pod_id)
        mounts = patch.get("mounts") or {}
        current = pod.body.get("mounts") or {}
        if "network" in mounts:
            if not mounts["network"]:
                raise ApiProblem(400, "clearing mounts is not supported")
            if "network" not in current:
                raise ApiProblem(400, "mount kind is fixed at create")
            if mounts["network"][0]["volumeId"] != current["network"][0]["volumeId"]:
                raise ApiProblem(400, "the volumeId of a network mount is immutable")
        if "persistent" in mounts and "persistent" not in current:
            raise ApiProblem(400, "mount kind is fixed at create")
        if "image" in patch:
            check_image(self.realism, patch["image"])
        if patch.get("globalNetworking"):
            check_networking(self.catalog, {**pod.body, **patch}, [pod.data_center_id])
        for key, value in patch.items():
            if key == "mounts" and not value:
                continue
            pod.body[key] = copy.deepcopy(value)
        pod.name = pod.body["name"]
        if RESTART_FIELDS.intersection(patch) and pod.status in LIVE:
            # The new container runs the new settings: whether it can start is decided anew
            # (a start hook's too, from what the volume holds now).
            volume = self._volume_of(pod)
            pod.hooked, hook_crash = hook_failure(pod.body, volume)
            pod.crash = (
                launch_failure(self.realism.entrypoints, pod.body, self.realism.dispatchers)
                or hook_crash
                or counters_failure(pod.body, volume)
            )
            self.storage.on_restart(pod, volume)
            pod.crash_epoch, pod.exits = None, 0
            delay = self.realism.real_s(self.realism.restart_delay_s)
            if delay > 0:
                # RunPod keeps showing the old container, RUNNING with its old startedAt, for
                # a while after the PATCH; the restart shows on a read after that.
                pod.restart_at_wall = self.clock.now() + delay
            else:
                pod.status, pod.started_at, pod.started_wall = "STARTING", None, None
        return pod

    def terminate_pod(self, pod_id: str) -> None:
        pod = self.pod(pod_id)
        self._release(pod)
        pod.status = "TERMINATED"

    def pod_action(self, pod_id: str, action: str) -> PodRecord | None:
        pod = self.pod(pod_id)
        if action not in ACTIONS[pod.status]:
            raise ApiProblem(409, f"action {action} is not valid for a pod in status {pod.status}")
        if action == "terminate":
            self.terminate_pod(pod_id)
            return None
        if action == "stop":
            self._release(pod)
            pod.status = "EXITED"
        elif action == "start":
            if pod.status == "EXITED":
                if pod.gpu:
                    gpu_id, count = pod.gpu
                    take_gpus(self.stock, self.catalog, gpu_id, count, [pod.data_center_id])
                open_interval(pod, self.clock.utc())
            pod.status = "PROVISIONING"
        else:
            pod.status = "STARTING"
        return pod

    # Network volumes

    def create_volume(self, body: Mapping[str, Any]) -> VolumeRecord:
        check_data_centers(self.catalog, [body["dataCenter"]])
        tiers = self.realism.tiers(body["dataCenter"])
        tier = body.get("type", tiers[0])
        if tier not in tiers:
            raise ApiProblem(
                400, f"{body['dataCenter']} offers network volume types {', '.join(tiers)} only"
            )
        volume = VolumeRecord(
            id=uuid.uuid4().hex[:10],
            name=body["name"],
            size=body["size"],
            data_center=body["dataCenter"],
            type=tier,
            created_wall=self.clock.now(),
        )
        self.volumes[volume.id] = volume
        return volume

    def volume(self, volume_id: str) -> VolumeRecord:
        volume = self.volumes.get(volume_id)
        if volume is None or volume.deleted:
            raise ApiProblem(404, f"network volume {volume_id} not found")
        return volume

    def list_volumes(self) -> list[VolumeRecord]:
        """Eventually consistent: a volume shows up only some time after its create."""
        return [v for v in self.volumes.values() if not v.deleted and self._listed(v)]

    def update_volume(self, volume_id: str, patch: Mapping[str, Any]) -> VolumeRecord:
        volume = self.volume(volume_id)
        if "size" in patch and patch["size"] < volume.size:
            raise ApiProblem(400, f"network volume size cannot be reduced (it is {volume.size} GB)")
        volume.size = patch.get("size", volume.size)
        volume.name = patch.get("name", volume.name)
        return volume

    def delete_volume(self, volume_id: str) -> None:
        volume = self.volume(volume_id)
        users = [
            p.id
            for p in self.pods.values()
            if p.status != "TERMINATED" and p.volume_id == volume_id
        ]
        if users:
            raise ApiProblem(
                400,
                f"network volume {volume_id} is mounted by pod(s)"
                f" {', '.join(users)}; terminate them first",
            )
        volume.deleted = True

    # A pod's HTTP ports, as the RunPod proxy serves them

    def proxy(
        self,
        pod_id: str,
        port: int,
        method: str,
        path: str,
        body: Any,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[int, Any]:
        """What the public proxy answers for `pod_id`'s `port`: anyone may call it, as anyone
        may call RunPod's; `headers` (lower-case names) reach the pod's server."""
        pod = self.pods.get(pod_id)
        if pod is None or pod.status == "TERMINATED":
            return 404, {"error": f"no pod {pod_id}"}
        now, volume = self.clock.now(), self._volume_of(pod)
        pod = self._settle(pod)
        answered = self.storage.answer(pod, volume, port, method, path, now)
        if answered is not None:
            return answered
        engine = self.realism.engines.get(str(pod.body.get("image")))
        status, payload = serve_port(
            pod, port, method, path, body, now=now, engine=engine, headers=headers, volume=volume
        )
        self.storage.after_proxy(pod, volume, method, path, body, status)
        return status, payload

    # Out-of-band changes, as a person in the RunPod console or RunPod itself makes them

    def known_gpu(self, gpu_id: str) -> str:
        if gpu_id not in self.catalog.gpus:
            raise ApiProblem(400, f"unknown GPU type {gpu_id!r}")
        return gpu_id

    def known_data_center(self, dc: object) -> str:
        if not isinstance(dc, str) or dc not in self.catalog.data_centers:
            raise ApiProblem(400, f"unknown data center {dc!r}")
        return dc

    def stop_by_hand(self, pod_id: str) -> PodRecord:
        """The console's Stop: the pod releases its GPUs and stops billing."""
        pod = self.pod(pod_id)
        self.pod_action(pod_id, "stop")
        return pod

    def write_text(self, volume_id: str, path: str, text: str | None) -> None:
        """A small file written on (or, `text` None, removed from) a volume by hand, below its
        mount: what a later pod's start finds there."""
        volume = self.volume(volume_id)
        if text is None:
            volume.refs.pop(path, None)
        else:
            volume.refs[path] = text

    def kill_host(self, pod_id: str) -> PodRecord:
        """The machine under the pod dies: RunPod still shows it RUNNING (and bills it), with
        no runtime, and its proxy answers 502; only a new pod elsewhere serves again."""
        pod = self.pod(pod_id)
        pod.host_dead = True
        return pod

    def set_key(self, key: object, scope: object) -> Scope:
        """The console creates a key, changes its permission, or disables it (`revoked`)."""
        if not isinstance(key, str) or not key.strip():
            raise ApiProblem(400, "key must be a non-empty string")
        try:
            chosen = Scope(str(scope))
        except ValueError:
            raise ApiProblem(400, f"scope must be one of {', '.join(Scope)}") from None
        self.keys[key.strip()] = chosen
        return chosen

    def edit_by_hand(self, pod_id: str, patch: Mapping[str, Any]) -> PodRecord:
        """The console's Edit Pod: only what the console offers, with a PATCH's restart."""
        unknown = sorted(set(patch) - HAND_EDITABLE)
        if unknown:
            raise ApiProblem(400, f"cannot edit {', '.join(unknown)} out of band")
        return self.update_pod(pod_id, patch)

    def reprice(self, gpu_id: str, secure: object) -> float:
        """RunPod changes a GPU's Secure Cloud price; pods created afterwards pay it."""
        known = self.known_gpu(gpu_id)
        if not isinstance(secure, int | float) or secure < 0:
            raise ApiProblem(400, "secure must be a price in USD per GPU per hour >= 0")
        self.catalog = self.catalog.with_price(known, float(secure))
        return float(secure)

    def set_stock(self, gpu_id: str, available: object, data_center: object = None) -> None:
        """Free GPUs of a type in one data centre (every one without `data_center`)."""
        known = self.known_gpu(gpu_id)
        if not isinstance(available, int) or available < 0:
            raise ApiProblem(400, "available must be a count of GPUs >= 0")
        centres = list(self.catalog.data_centers) if data_center is None else [data_center]
        for dc in centres:
            self.stock[(known, self.known_data_center(dc))] = available

    def set_volume_types(self, data_center: object, types: object) -> list[str]:
        """The network volume tiers a data centre offers from now on."""
        dc = self.known_data_center(data_center)
        if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
            raise ApiProblem(400, "types must be a list of volume types")
        self.volume_types[dc] = list(types)
        return list(types)

    def saved_changes(self) -> dict[str, Any]:
        """The out-of-band changes a state file keeps: repriced GPUs and volume tiers."""
        prices = {}
        for gpu_id in self.catalog.gpus:
            secure = self.catalog.usd_per_hour(gpu_id, "SECURE")
            if secure != self.initial_catalog.usd_per_hour(gpu_id, "SECURE"):
                prices[gpu_id] = secure
        return {"prices": prices, "volumeTypes": dict(self.volume_types)}

    def restore_changes(self, saved: object) -> None:
        """Apply `saved_changes()` of an earlier run; what no longer applies is dropped."""
        if not isinstance(saved, dict):
            return
        for gpu_id, secure in (saved.get("prices") or {}).items():
            if gpu_id in self.catalog.gpus:
                self.catalog = self.catalog.with_price(gpu_id, float(secure))
        self.volume_types = {k: list(v) for k, v in (saved.get("volumeTypes") or {}).items()}
