"""RunPod REST v2: a typed client, the pod/volume lifecycles, and the command Pulumi runs."""

from frutebox_infra.runpod.client import (
    DEFAULT_API_URL,
    DEFAULT_PROXY_URL_TEMPLATE,
    NetworkVolume,
    Pod,
    ProxyClient,
    RetryPolicy,
    RunPodClient,
)
from frutebox_infra.runpod.errors import (
    ApiError,
    Cancelled,
    ConfigurationError,
    PlacementError,
    PodFailedError,
    RunPodError,
    TransportError,
)
from frutebox_infra.runpod.lifecycle import Health, Provisioner, Timeouts
from frutebox_infra.runpod.placement import Placement

__all__ = [
    "DEFAULT_API_URL",
    "DEFAULT_PROXY_URL_TEMPLATE",
    "ApiError",
    "Cancelled",
    "ConfigurationError",
    "Health",
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
