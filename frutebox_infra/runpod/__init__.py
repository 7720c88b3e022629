"""RunPod REST v2: a typed client, the pod/volume lifecycles, and the command Pulumi runs."""

from frutebox_infra.endpoints import DEFAULT_API_URL, DEFAULT_PROXY_URL_TEMPLATE
from frutebox_infra.runpod.client import RunPodClient
from frutebox_infra.runpod.errors import (
    ApiError,
    Cancelled,
    ConfigurationError,
    MayStillBillError,
    PlacementError,
    PodFailedError,
    RunPodError,
    TransportError,
)
from frutebox_infra.runpod.lifecycle import Health, Provisioner, Timeouts
from frutebox_infra.runpod.placement import Placement
from frutebox_infra.runpod.proxy import ProxyClient
from frutebox_infra.runpod.retrying import RetryPolicy
from frutebox_infra.runpod.wire import NetworkVolume, Pod

__all__ = [
    "DEFAULT_API_URL",
    "DEFAULT_PROXY_URL_TEMPLATE",
    "ApiError",
    "Cancelled",
    "ConfigurationError",
    "Health",
    "MayStillBillError",
    "NetworkVolume",
    "Placement",
    "PlacementError",
    "Pod",
    "PodFailedError",
    "Provisioner",
    "ProxyClient",
    "RetryPolicy",
    "RunPodClient",
    "RunPodError",
    "Timeouts",
    "TransportError",
]
