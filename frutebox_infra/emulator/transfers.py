"""How fast the emulated pods start, download and read weights, in emulated seconds and MB/s.

The realistic speeds are the plan's own bring-up assumptions (seeding/bringup.py), so what
the emulator bills a first deploy and what the plan says it costs come from one statement.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from frutebox_infra.seeding.bringup import (
    CPU_POD_START_S,
    DOWNLOAD_MB_PER_S,
    GPU_POD_START_S,
    VOLUME_READ_MB_PER_S,
)


@dataclass(frozen=True, kw_only=True)
class Transfers:
    """Pod starts and transfer speeds; a speed of None is instant (the fast account)."""

    download_mb_per_s: float | None = None
    """From Hugging Face or Ollama's registry onto a volume, per pod."""
    read_mb_per_s: Mapping[str, float] = field(default_factory=dict)
    """Off a volume into an engine, per volume tier; a tier without an entry: instant."""
    gpu_start_s: float = 0.0
    """From RUNNING to the engine's first read: image pull and start."""
    cpu_start_s: float = 0.0
    """From RUNNING to the seeder serving its status."""

    @classmethod
    def realistic(cls, **overrides: Any) -> Transfers:
        base = cls(
            download_mb_per_s=DOWNLOAD_MB_PER_S,
            read_mb_per_s=dict(VOLUME_READ_MB_PER_S),
            gpu_start_s=GPU_POD_START_S,
            cpu_start_s=CPU_POD_START_S,
        )
        return replace(base, **overrides)

    def download_s(self, size_bytes: int) -> float:
        return 0.0 if not self.download_mb_per_s else size_bytes / (self.download_mb_per_s * 1e6)

    def read_s(self, size_bytes: int, tier: str) -> float:
        speed = self.read_mb_per_s.get(tier)
        return 0.0 if not speed else size_bytes / (speed * 1e6)
