"""The read-only RunPod look preview takes when a key is available; bounded, never fatal.

Four GETs (the GPU catalog with pod availability, the data centres, pods and volumes), all
read-only, in a daemon thread the program waits on for at most `BOUND_S`. The HTTP client is
imported only here and only when a key exists, so a keyless preview never pays for it.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from frutebox_infra.catalog.schema import Registry
from frutebox_infra.planner.plan import FleetPlan
from frutebox_infra.stack.endpoints import Endpoint
from frutebox_infra.views.live_warnings import LiveCatalog, LiveGpu, live_warnings, registry_line

BOUND_S = 4.0
"""The most a preview waits for RunPod, all calls included."""


LIVE_LOOK = "preview's live look"


def fetch_catalog(endpoint: Endpoint, timeout_s: float, command: str = LIVE_LOOK) -> LiveCatalog:
    """The catalog, data centres, pods and volumes; a refused key names its source and that
    `command` needs read access."""
    from frutebox_infra.commands.status import live_pod, live_volume
    from frutebox_infra.runpod.access import KeyUse, Need
    from frutebox_infra.runpod.client import RunPodClient
    from frutebox_infra.runpod.retrying import RetryPolicy

    # One attempt each: a preview never waits out retries.
    client = RunPodClient(
        api_key=endpoint.api_key or "",
        base_url=endpoint.api_url,
        timeout_s=timeout_s,
        connect_timeout_s=timeout_s,
        retry=RetryPolicy(max_attempts=1),
        key_use=KeyUse(endpoint.key_source, command, Need.READ),
    )
    try:
        gpus = {
            g.id: LiveGpu(
                id=g.id,
                secure_usd_per_hour=g.price.secure,
                stock={d.id: d.availability for d in g.data_centers},
            )
            for g in client.gpu_catalog()
        }
        centres = client.data_centers()
        volume_types = {d.id: tuple(d.network_volume_types) for d in centres}
        global_network = {d.id: d.global_network for d in centres if d.global_network is not None}
        pods = tuple(live_pod(p) for p in client.list_pods())
        volumes = tuple(live_volume(v) for v in client.list_volumes())
    finally:
        client.close()
    return LiveCatalog(gpus=gpus, volume_types=volume_types, pods=pods, volumes=volumes,
                       global_network=global_network)  # fmt: skip


def live_lines(
    plan: FleetPlan,
    registry: Registry,
    *,
    endpoint: Endpoint,
    bound_s: float = BOUND_S,
) -> tuple[str, list[str]]:
    """(the one dated `live:` line, the warnings); never raises, never waits past `bound_s`."""
    if not endpoint.has_key:
        return registry_line(registry, "no RunPod key, nothing live was read"), []
    result: dict[str, LiveCatalog | BaseException] = {}

    def work() -> None:
        try:
            # Each call may take the whole bound: the join below is what bounds the preview.
            result["catalog"] = fetch_catalog(endpoint, bound_s)
        except Exception as exc:  # any failure only means "no live figures"
            result["error"] = exc

    thread = threading.Thread(target=work, name="runpod-live", daemon=True)
    thread.start()
    thread.join(bound_s)
    catalog = result.get("catalog")
    if not isinstance(catalog, LiveCatalog):
        error = result.get("error")
        if error is None or _timed_out(error):
            # The bound ran out, or a read's own timeout (the same bound) fired first.
            reason = f"RunPod did not answer within {bound_s:.0f} s"
        elif (status := getattr(error, "status", None)) in (401, 403):
            reason = (
                f"RunPod refused the key from {endpoint.key_source} ({status}); {LIVE_LOOK}"
                " needs read access (a Read Only key is enough)"
            )
        else:
            reason = f"RunPod could not be read ({type(error).__name__})"
        return registry_line(registry, reason), []
    warnings = live_warnings(plan, catalog)
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"live: RunPod catalog read {when}: {len(warnings)} warning(s)", warnings


def _timed_out(error: object) -> bool:
    """True for a transport failure that is an HTTP timeout: RunPod did not answer in time."""
    from frutebox_infra.runpod.errors import TransportError  # the client raised it: loaded

    return isinstance(error, TransportError) and error.timed_out
