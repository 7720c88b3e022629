"""The HTTP routes of each pinned engine, its own key, and which routes our clients use."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from typing import Annotated, Any, Literal

from frutebox_infra.plumbing.validation import Check

HttpMethod = Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]


class RouteUse(StrEnum):
    """Who calls a route: our gateway forwards CLIENT, HEALTH and METRICS (the counters
    `frutebox usage` reads: they reveal the traffic, so never without the key) with the key,
    never REFUSED."""

    CLIENT = "client"
    HEALTH = "health"
    METRICS = "metrics"
    REFUSED = "refused"


def _route_path(path: str, _fields: Mapping[str, Any]) -> str:
    if "*" in path.removesuffix("/*"):
        raise ValueError(f"path {path!r}: a wildcard may only end a path, as '/*'")
    return path


@dataclass(frozen=True, kw_only=True)
class Route:
    """One route of an engine: `path` exact, or ending in `/*` for every path below it."""

    path: Annotated[str, Check(pattern=r"^/[A-Za-z0-9_./*-]*$", after=_route_path)]
    methods: Annotated[tuple[HttpMethod, ...], Check(min_length=1)]
    use: RouteUse
    why: str | None = None
    """Why a refused route is refused (what it does in a stranger's hands)."""

    def matches(self, method: str, path: str) -> bool:
        """Does a request for `method` `path` (no query) hit this route?"""
        if method not in self.methods:
            return False
        if self.path.endswith("/*"):
            prefix = self.path[:-1]
            return path.startswith(prefix) and len(path) > len(prefix)
        return path == self.path


@dataclass(frozen=True, kw_only=True)
class EngineKey:
    """The engine's own authentication, as weak as the engine makes it.

    `guards`: `none` (no key at all), `prefixes` (only paths under `prefixes`), `all-but`
    (every path but `open`). `flags`/`env` are how a launch would set it; `headers` how a
    request carries it (`bearer`: `Authorization: Bearer KEY`; `x-api-key`)."""

    guards: Literal["none", "prefixes", "all-but"]
    flags: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    headers: tuple[Literal["bearer", "x-api-key"], ...] = ()
    prefixes: tuple[str, ...] = ()
    open: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.guards == "none" and (self.flags or self.env or self.headers):
            raise ValueError("guards: none takes no flags, env or headers")
        if self.guards != "none" and not self.headers:
            raise ValueError(f"guards: {self.guards} needs the headers the key comes in")
        if self.guards == "prefixes" and not self.prefixes:
            raise ValueError("guards: prefixes needs `prefixes`")

    def guards_path(self, path: str) -> bool:
        """Does the engine ask for its key (when one is set) on `path`?"""
        if self.guards == "none":
            return False
        if self.guards == "prefixes":
            return any(path == p or path.startswith(p + "/") for p in self.prefixes)
        return path not in self.open


@dataclass(frozen=True, kw_only=True)
class EngineRoutes:
    """Every route of one engine's pinned image that matters to who may reach it."""

    image: str
    """The image reference the routes were read for (a test holds it to images.yaml)."""
    source: str
    key: EngineKey
    routes: Annotated[tuple[Route, ...], Check(min_length=1)]

    def __post_init__(self) -> None:
        seen: set[tuple[str, str]] = set()
        for route in self.routes:
            for method in route.methods:
                if (method, route.path) in seen:
                    raise ValueError(f"route {method} {route.path} is listed twice")
                seen.add((method, route.path))
            if route.use is RouteUse.REFUSED and not route.why:
                raise ValueError(f"refused route {route.path} needs `why`")
        if not any(route.use is RouteUse.HEALTH for route in self.routes):
            raise ValueError("no route has use: health (what our probes call)")

    @cached_property
    def forwarded(self) -> tuple[Route, ...]:
        """The routes the gateway forwards to the engine (with the key), in file order."""
        return tuple(r for r in self.routes if r.use is not RouteUse.REFUSED)

    @property
    def metrics_path(self) -> str | None:
        """The route the engine's counters are read on, if it has one."""
        return next((r.path for r in self.routes if r.use is RouteUse.METRICS), None)

    @cached_property
    def refused(self) -> tuple[Route, ...]:
        return tuple(r for r in self.routes if r.use is RouteUse.REFUSED)

    def route(self, method: str, path: str) -> Route | None:
        """The route `method` `path` hits, or None: the engine does not serve it."""
        for route in self.routes:
            if route.matches(method, path):
                return route
        return None

    def forwards(self, method: str, path: str) -> bool:
        """Does the gateway forward `method` `path` (given the key)? Deny by default."""
        return any(route.matches(method, path) for route in self.forwarded)
