"""Network-volume rules: adopt before creating, grow but never shrink, 404 on delete is gone.

A mixin of `Provisioner`, so the command keeps one object per account; it only needs the
API client, a log and a sleep.
"""

from __future__ import annotations

from collections.abc import Callable

from frutebox_infra.runpod.client import NetworkVolume, RunPodClient
from frutebox_infra.runpod.errors import NotFoundError
from frutebox_infra.runpod.placement import create_adopting


class VolumeRules:
    """Create (or adopt), grow and delete the stack's network volume."""

    api: RunPodClient
    _log: Callable[[str], None]
    _sleep: Callable[[float], None]

    def create_volume(self, name: str, size: int, data_center: str) -> tuple[NetworkVolume, str]:
        """A volume named `name` in `data_center`: adopted when one exists, else created.

        We only create when the stack records no volume, so one with our name is left by an
        earlier run that failed before Pulumi recorded it; a second would bill twice.
        """

        def mine(volume: NetworkVolume) -> bool:
            return volume.name == name and volume.data_center == data_center

        existing = sorted((v for v in self.api.list_volumes() if mine(v)), key=lambda v: -v.size)
        if existing:
            volume = existing[0]
            self._log(
                f"volume {name}: {volume.id} ({volume.size} GB) already exists in {data_center}"
                " from an earlier run; adopted instead of creating a second billing volume"
            )
            for other in existing[1:]:
                self._log(
                    f"volume {name}: {other.id} ({other.size} GB) has the same name and is not"
                    " used; delete it in the RunPod console if it holds nothing you need"
                )
            return self.grow_volume(volume, size), "adopted"

        def find_new() -> NetworkVolume | None:
            return next((v for v in self.api.list_volumes() if mine(v)), None)

        body = {"name": name, "size": size, "dataCenter": data_center}
        return create_adopting(
            f"volume {name}",
            lambda: self.api.create_volume_once(body),
            find_new,
            retry=self.api.retry,
            sleep=self._sleep,
            log=self._log,
        )

    def grow_volume(self, volume: NetworkVolume, size: int) -> NetworkVolume:
        """Grow to `size` GB; a smaller size keeps the current one (volumes never shrink)."""
        if size > volume.size:
            self._log(f"volume {volume.id}: growing {volume.size} GB -> {size} GB")
            return self.api.update_volume(volume.id, {"size": size})
        if size < volume.size:
            self._log(
                f"volume {volume.id}: asked for {size} GB but it holds {volume.size} GB;"
                " network volumes never shrink, keeping the current size"
            )
        return volume

    def delete_volume(self, volume_id: str) -> bool:
        try:
            self.api.delete_volume(volume_id)
        except NotFoundError:
            return False
        return True
