"""RunPod REST v2: a typed client, the pod/volume lifecycles, and the command Pulumi runs."""

# ruff: noqa: E402 (the imports below come after the one statement that must precede them)
import sys

# httpx's package imports its command-line client, which needs click, pygments and rich. Where
# the first two are installed and rich is not (huggingface_hub brings click, pytest pygments),
# every deploy step imported both for an ImportError that httpx catches. Nothing of ours runs
# httpx's CLI, so its import is refused up front (httpx then binds its stand-in `main`).
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

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
from frutebox_infra.stack.endpoints import DEFAULT_API_URL, DEFAULT_PROXY_URL_TEMPLATE

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
