"""A local RunPod REST v2 emulator built on the official OpenAPI document, for tests only."""

from frutebox_infra.emulator.server import RunningEmulator, build, main, start

__all__ = ["RunningEmulator", "build", "main", "start"]
