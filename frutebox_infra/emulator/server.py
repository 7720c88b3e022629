"""`frutebox emulator`: serve the emulated RunPod v2 API and pod proxy on a loopback address."""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import os
import signal
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from frutebox_infra.catalog.files import load_registry
from frutebox_infra.catalog.schema import Image, Registry, ToolImage
from frutebox_infra.deploy.requests import pod_name, seed_pod_name, volume_name
from frutebox_infra.emulator.catalog import Catalog, Stock, load_catalog, parse_stock
from frutebox_infra.emulator.clock import Clock, SystemClock
from frutebox_infra.emulator.handler import EmulatorHTTPServer
from frutebox_infra.emulator.hub import Hub
from frutebox_infra.emulator.keys import parse_key
from frutebox_infra.emulator.openapi import OpenApi
from frutebox_infra.emulator.realism import HIGH_PERFORMANCE, STANDARD, Kind, Realism
from frutebox_infra.emulator.routes import App
from frutebox_infra.emulator.snapshot import restore, snapshot
from frutebox_infra.emulator.state import Account
from frutebox_infra.emulator.storage import Storage
from frutebox_infra.plumbing.errors import ConfigError, UsageError
from frutebox_infra.plumbing.paths import REGISTRY_DIR

# Stacks whose names the realistic account already holds someone else's pods and volume under.
COLLIDING_STACKS = ("dev", "prod")
# Tiers per data centre (the first is the centre's default when a create names none): where
# RunPod offers high-performance storage it is the default, so an unnamed tier costs more.
HPS_CENTRES = ("EU-RO-1", "US-TX-3", "US-KS-2", "CA-MTL-1")


def realistic_for(registry: Registry, **overrides: Any) -> Realism:
    """The default account: RunPod's documented behaviour, with name collisions for the
    registry's models in the stacks everyone starts from, and only the registry's images (the
    engines' and the seeder's)."""
    tools: list[Image | ToolImage] = [*registry.images.values()]
    tools += [registry.seeder_image] if registry.seeder_image else []
    options: dict[str, Any] = {
        "foreign_pod_names": tuple(
            name(stack, m.id)
            for stack in COLLIDING_STACKS
            for m in registry.models
            for name in (pod_name, seed_pod_name)
        ),
        "foreign_volume_names": tuple(volume_name(stack) for stack in COLLIDING_STACKS),
        "known_images": frozenset(i.reference for i in tools),
        "entrypoints": {i.reference: i.entrypoint for i in tools},
        "dispatchers": {
            i.reference: i.dispatch for i in registry.images.values() if i.dispatch is not None
        },
        "engines": {
            image.reference: registry.engine_routes[runtime]
            for runtime, image in registry.images.items()
            if runtime in registry.engine_routes
        },
        "volume_types": {dc: (HIGH_PERFORMANCE, STANDARD) for dc in HPS_CENTRES},
    }
    options.update(overrides)
    return Realism.realistic(**options)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class StateFile:
    """The account as JSON on disk, rewritten atomically after every request."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(
        self,
        catalog: Catalog,
        stock: Stock | None,
        realism: Realism,
        clock: Clock,
        storage: Storage | None = None,
    ) -> Account | None:
        if not self.path.is_file():
            return None
        try:
            data = json.loads(self.path.read_text("utf-8"))
            return restore(catalog, data, stock, realism, clock, storage)
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(
                f"--state {self.path}: not an emulator state file ({exc!r});"
                " move it away to start fresh"
            ) from exc

    def save(self, account: Account) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(snapshot(account), handle)
        os.replace(tmp, self.path)


def url_of(server: EmulatorHTTPServer) -> str:
    host, port = server.server_address[:2]
    shown = f"[{host!s}]" if ":" in str(host) else str(host)
    return f"http://{shown}:{port}"


@dataclass
class RunningEmulator:
    """An emulator serving from a background thread (tests, scripts)."""

    server: EmulatorHTTPServer
    thread: threading.Thread

    @property
    def url(self) -> str:
        return url_of(self.server)

    @property
    def app(self) -> App:
        return self.server.app

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def build(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    stock: Stock | None = None,
    state_file: Path | None = None,
    proxy_base: str | None = None,
    catalog: Catalog | None = None,
    realism: Realism | None = None,
    clock: Clock | None = None,
    hub: Hub | None = None,
    openapi: OpenApi | None = None,
) -> EmulatorHTTPServer:
    """Bind the server (loopback only); nothing is served until serve_forever runs.

    `realism` defaults to the realistic account of the project's registry, `clock` to the
    system's (a test's manual clock moves every lag and window without a sleep), `hub` to the
    Hugging Face Hub and Ollama library holding every registry model's weights (the account
    works on a copy), `openapi` to the official document, its validators compiled on first
    use (a test session shares one).
    """
    if not is_loopback(host):
        raise UsageError(f"--host {host}: the emulator binds loopback addresses only")
    catalog = catalog or Catalog.builtin()
    realism = realism or realistic_for(load_registry())
    clock = clock or SystemClock()
    storage = Storage(hub or Hub.from_registry(load_registry()))
    store = StateFile(state_file) if state_file else None
    account = (store.load(catalog, stock, realism, clock, storage) if store else None) or Account(
        catalog, stock, realism, clock, storage
    )
    app = App(account, on_change=(lambda: store.save(account)) if store else None, openapi=openapi)
    server = EmulatorHTTPServer((host, port), app)
    app.proxy_base = (proxy_base or url_of(server)).rstrip("/")
    return server


def start(**options: Any) -> RunningEmulator:
    """`build` with the same options, then serve from a daemon thread."""
    server = build(**options)
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": 0.05},
        name="runpod-emulator",
        daemon=True,
    )
    thread.start()
    return RunningEmulator(server, thread)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="frutebox emulator",
        description="Emulate the RunPod REST v2 API (and each pod's proxied HTTP ports) on"
        " loopback. The first stdout line is the bound URL.",
    )
    parser.add_argument("--port", type=int, default=0, help="port to bind; 0 picks a free one")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind")
    parser.add_argument("--state", type=Path, help="keep the account in this JSON file")
    parser.add_argument(
        "--stock",
        action="append",
        default=[],
        metavar="GPU_ID=N[@DC]",
        help="free GPUs per type and data centre (default: plenty everywhere)",
    )
    parser.add_argument(
        "--proxy-base", help="base URL pods' ports are served under (default: this server)"
    )
    parser.add_argument(
        "--kind",
        choices=[k.value for k in Kind],
        default=Kind.REALISTIC.value,
        help="realistic (default): quotas, lagging lists, name collisions, CUDA floors, slow"
        " restarts and loads, as RunPod documents them; fast: instant and forgiving",
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="emulated seconds per real second (quota windows, delays and loads shrink)",
    )
    parser.add_argument(
        "--api-key",
        action="append",
        default=[],
        metavar="KEY[:SCOPE]",
        help="an API key the account accepts, with its scope: all (default), read-only (403 on"
        " writes) or revoked (401); once one is given, only these are accepted (default: any)",
    )
    parser.add_argument(
        "--cuda",
        action="append",
        default=[],
        metavar="GPU_ID=V1,V2",
        help="CUDA versions the hosts of a GPU type report (default 12.4-13.0)",
    )
    parser.add_argument(
        "--registry",
        default=str(REGISTRY_DIR),
        help="registry directory whose GPUs, prices and data centres the account sells",
    )
    return parser


def _realism(args: argparse.Namespace) -> Realism:
    if args.time_scale <= 0:
        raise UsageError("--time-scale must be above 0")
    cuda: dict[str, tuple[str, ...]] = {}
    for spec in args.cuda:
        gpu_id, sep, versions = spec.rpartition("=")
        if not sep or not gpu_id:
            raise UsageError(f"--cuda {spec!r}: expected GPU_ID=12.4,12.8")
        cuda[gpu_id] = tuple(v.strip() for v in versions.split(",") if v.strip())
    try:
        keys = dict(parse_key(spec) for spec in args.api_key)
    except ValueError as exc:
        raise UsageError(f"--api-key {exc}") from None
    access: dict[str, Any] = {"api_keys": keys, "any_key": not keys}
    if args.kind == Kind.FAST:
        return Realism(kind=Kind.FAST, quotas=(), time_scale=args.time_scale, **access)
    return realistic_for(
        load_registry(Path(args.registry)),
        time_scale=args.time_scale,
        cuda_versions=cuda,
        **access,
    )


def _stop_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        catalog = load_catalog(Path(args.registry))
        stock = parse_stock(args.stock, catalog) if args.stock else None
        realism = _realism(args)
        server = build(
            realism=realism,
            host=args.host,
            port=args.port,
            stock=stock,
            state_file=args.state,
            proxy_base=args.proxy_base,
            catalog=catalog,
            hub=Hub.from_registry(load_registry(Path(args.registry))),
        )
    except (ConfigError, OSError) as exc:
        print(f"frutebox emulator: {exc}", file=sys.stderr)
        return 2
    url = url_of(server)
    print(url, flush=True)
    key = "anything" if realism.any_key else "<an --api-key given>"
    print(
        f"export RUNPOD_API_URL={url} RUNPOD_API_KEY={key}"
        f" RUNPOD_PROXY_URL_TEMPLATE='{server.app.proxy_url_template}'",
        file=sys.stderr,
        flush=True,
    )
    with contextlib.suppress(ValueError):  # signal handlers only install on the main thread
        signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
