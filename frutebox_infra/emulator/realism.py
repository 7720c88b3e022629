"""How unkind the emulated account is: RunPod's documented behaviour, on a clock tests can speed up.

`Realism.realistic()` is the default: quotas per minute and per hour with RateLimit headers,
a listing that lags creates, names that collide with pods and volumes the account already
holds, per-GPU host CUDA versions, restarts that lag a PATCH, servers that load for a while
after RUNNING (as long as the plan's bring-up assumptions say, where the emulator knows what
the server reads: transfers.py), and containers that exit at start restarted again and again
(a launch its image cannot run; the `crash-loop` fault). `Realism.fast()` is the instant,
forgiving account unit tests use.

Every duration here is in emulated seconds; `time_scale` emulated seconds pass per real
second of the account's clock (clock.py), and every duration the API reports (Retry-After,
RateLimit `t`, `runtime.uptime`) is in real seconds, so a client with real-time deadlines
sees a consistent, faster world.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from frutebox_infra.catalog.engine_routes import EngineRoutes
from frutebox_infra.catalog.schema import Dispatch
from frutebox_infra.emulator.clock import Clock, SystemClock
from frutebox_infra.emulator.errors import CAPACITY_DETAIL, ApiProblem
from frutebox_infra.emulator.keys import Scope
from frutebox_infra.emulator.transfers import Transfers


class Kind(StrEnum):
    REALISTIC = "realistic"
    FAST = "fast"


# RunPod's documented per-user quotas (the OpenAPI RateLimit-Policy example; docs page
# "Rate limits": minute, hour and day windows, every request counts against each).
QUOTAS = (("minute", 60, 60.0), ("hour", 3000, 3600.0))
# CUDA versions RunPod hosts report (`cudaVersions` in /v2/catalog/gpus); a GPU type without
# an entry in `cuda_versions` gets these.
DEFAULT_HOST_CUDA = ("12.4", "12.6", "12.8", "13.0")
STANDARD, HIGH_PERFORMANCE = "STANDARD", "HIGH_PERFORMANCE"


def cuda_key(version: str) -> tuple[int, ...]:
    """`major.minor` compared numerically: 12.11 is above 12.2."""
    return tuple(int(part) for part in version.split("."))


@dataclass(frozen=True, kw_only=True)
class Realism:
    kind: Kind
    time_scale: float = 1.0
    quotas: tuple[tuple[str, int, float], ...] = QUOTAS
    listing_delay_s: float = 0.0
    restart_delay_s: float = 0.0
    load_base_s: float = 0.0
    load_s_per_gb: float = 0.0
    foreign_pod_names: tuple[str, ...] = ()
    foreign_volume_names: tuple[str, ...] = ()
    cuda_versions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    volume_types: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Tiers per data centre; the first is the centre's default. Unnamed centres: STANDARD."""
    known_images: frozenset[str] | None = None
    """Image references a registry holds; None accepts any (fast)."""
    entrypoints: Mapping[str, str] = field(default_factory=dict)
    """Image reference -> how `args` reaches its process (registry `entrypoint`): a launch
    the image cannot run crash-loops (launch.py)."""
    dispatchers: Mapping[str, Dispatch] = field(default_factory=dict)
    """Image reference -> its dispatching ENTRYPOINT (registry `dispatch`): a first word it
    does not know crash-loops (launch.py)."""
    engines: Mapping[str, EngineRoutes] = field(default_factory=dict)
    """Image reference -> the engine's routes and own auth (registry/routes.yaml): its server
    answers those routes only, guarded as the engine guards them (engines.py)."""
    api_keys: Mapping[str, Scope] = field(default_factory=dict)
    """The account's keys and their scopes (keys.py)."""
    any_key: bool = True
    """Accept a key not in `api_keys` with the scope All; False once keys are given."""
    require_gpu_count: bool = False
    crash_up_s: float = 0.05
    """How long a crash-looping container runs before it exits."""
    crash_gap_s: float = 0.05
    """How long RunPod leaves an exited container down before it starts it again."""
    transfers: Transfers = field(default_factory=Transfers)
    """Pod starts, downloads and volume reads of pods whose weights the emulator knows."""

    @classmethod
    def fast(cls) -> Realism:
        return cls(kind=Kind.FAST, quotas=())

    @classmethod
    def realistic(cls, **overrides: object) -> Realism:
        base: dict[str, object] = {
            "kind": Kind.REALISTIC,
            "listing_delay_s": 5.0,
            "restart_delay_s": 20.0,
            "load_base_s": 30.0,
            # ~0.5 GB/s onto the volume and into GPU memory
            "load_s_per_gb": 2.0,
            "require_gpu_count": True,
            # An engine that rejects its flags exits within seconds of starting (its imports,
            # then argparse); RunPod starts the container again a few seconds later.
            "crash_up_s": 6.0,
            "crash_gap_s": 4.0,
            "transfers": Transfers.realistic(),
        }
        base.update(overrides)
        return cls(**base)  # type: ignore[arg-type]

    @property
    def realistic_kind(self) -> bool:
        return self.kind is Kind.REALISTIC

    def real_s(self, emulated_s: float) -> float:
        """An emulated duration as the real seconds a client waits for it."""
        return emulated_s / self.time_scale

    def host_cuda(self, gpu_id: str) -> tuple[str, ...]:
        if not self.realistic_kind:
            return DEFAULT_HOST_CUDA
        return self.cuda_versions.get(gpu_id, DEFAULT_HOST_CUDA)

    def tiers(self, data_center: str) -> tuple[str, ...]:
        return self.volume_types.get(data_center, (STANDARD,))

    def pick_cuda(self, gpu_id: str, gpu: Mapping[str, object]) -> str:
        """The host CUDA version a pod lands on; no host meets the request: capacity 400."""
        hosts = sorted(self.host_cuda(gpu_id), key=cuda_key)
        allowed = gpu.get("allowedCudaVersions")
        if isinstance(allowed, list) and allowed:
            hosts = [v for v in hosts if v in allowed]
        floor = gpu.get("minCudaVersion")
        if isinstance(floor, str):
            hosts = [v for v in hosts if cuda_key(v) >= cuda_key(floor)]
        if not hosts:
            raise ApiProblem(400, CAPACITY_DETAIL)
        return hosts[-1]


def number(value: float) -> str:
    """Header numbers: whole seconds at real speed, fractions when the clock is scaled."""
    return str(int(value)) if float(value).is_integer() else f"{value:.3f}"


class RateLimiter:
    """Fixed windows per quota, as RunPod's headers describe them, each `time_scale` times
    shorter on `clock` than its emulated length."""

    def __init__(self, realism: Realism, clock: Clock | None = None) -> None:
        self.realism = realism
        self._now = (clock or SystemClock()).now
        self._windows: dict[str, tuple[float, int]] = {}

    def reset(self) -> None:
        self._windows = {}

    def _state(self, name: str, length_s: float) -> tuple[float, int]:
        now = self._now()
        start, used = self._windows.get(name, (now, 0))
        if now - start >= length_s:
            start, used = now, 0
        return start, used

    def admit(self) -> tuple[dict[str, str], ApiProblem | None]:
        """Count one request; the headers to send, and a 429 when a window is exhausted."""
        if not self.realism.quotas:
            return {}, None
        exceeded: tuple[str, float] | None = None
        states = []
        for name, quota, window_s in self.realism.quotas:
            length = self.realism.real_s(window_s)
            start, used = self._state(name, length)
            reset_in = max(0.0, start + length - self._now())
            if used >= quota and exceeded is None:
                exceeded = (name, reset_in)
            states.append((name, quota, length, start, used, reset_in))
        if exceeded is None:
            for name, _, _, start, used, _ in states:
                self._windows[name] = (start, used + 1)
        spent = 0 if exceeded else 1
        limit = ", ".join(
            f'"{name}";r={max(0, quota - used - spent)};t={number(round(reset, 3))}'
            for name, quota, _, _, used, reset in states
        )
        policy = ", ".join(
            f'"{name}";q={quota};w={number(round(length, 3))}' for name, quota, length, *_ in states
        )
        headers = {"RateLimit": limit, "RateLimit-Policy": policy}
        if exceeded is None:
            return headers, None
        name, reset_in = exceeded
        wait = max(round(reset_in, 3), 0.001)
        problem = ApiProblem(
            429,
            f"rate limit exceeded for the {name} window",
            headers={**headers, "Retry-After": number(wait)},
        )
        return headers, problem
