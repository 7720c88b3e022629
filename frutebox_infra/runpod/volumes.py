"""Network-volume rules: named with the stack's token, grow but never shrink, 404 checked on delete.

A mixin of `Provisioner`, so the command keeps one object per account; it only needs the
API client, a log and a sleep.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from typing import Any

from frutebox_infra.runpod.client import DEFAULT_API_URL, NetworkVolume, RunPodClient
from frutebox_infra.runpod.errors import ConfigurationError, NotFoundError
from frutebox_infra.runpod.placement import create_adopting


def new_owner_token() -> str:
    """A stack's ownership token: random, minted once by the volume's create and kept in the
    stack's state (the volume command's result), so no other stack, checkout or backend can
    produce it. Not a secret: it only proves which pods and volume are ours."""
    return secrets.token_hex(8)


class VolumeRules:
    """Create (or adopt), grow and delete the stack's network volume."""

    api: RunPodClient
    _log: Callable[[str], None]
    _sleep: Callable[[float], None]

    def create_volume(
        self, base_name: str, size: int, data_center: str, tier: str, owner: str | None = None
    ) -> tuple[NetworkVolume, str, str]:
        """Create the stack's volume, named `base_name-<owner token>`: (volume, outcome, owner).

        RunPod names are not unique, so a volume is never adopted by a name anyone could
        have chosen; the token (minted here unless the stack already has one) makes ours.
        """
        owner = owner or new_owner_token()
        name = f"{base_name}-{owner}"

        def find_new() -> NetworkVolume | None:
            return next(
                (
                    v
                    for v in self.api.list_volumes()
                    if v.name == name and v.data_center == data_center
                ),
                None,
            )

        body = {"name": name, "size": size, "dataCenter": data_center, "type": tier}
        made = create_adopting(
            f"volume {name}",
            lambda: self.api.create_volume_once(body),
            find_new,
            retry=self.api.retry,
            sleep=self._sleep,
            log=self._log,
        )
        return made.resource, made.outcome, owner

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
        """Delete the volume; False when it was already gone."""
        try:
            self.api.delete_volume(volume_id)
        except NotFoundError:
            ensure_gone("volume", volume_id, self.api.list_volumes)
            return False
        return True


def ensure_gone(kind: str, resource_id: str, listing: Callable[[], Sequence[Any]]) -> None:
    """After a 404 on a delete: is the resource really gone, or is the URL wrong?

    A 404 for a path the API does not have looks like one for a deleted resource; the listing
    tells them apart (it 404s as well when the base URL is wrong). Raises unless gone.
    """
    try:
        present = [r for r in listing() if getattr(r, "id", None) == resource_id]
    except NotFoundError as exc:
        raise ConfigurationError(
            f"RunPod answered 404 for {kind} {resource_id} and for its listing too: the API URL"
            " is wrong (RUNPOD_API_URL / frutebox-infra:runpodApiUrl; the base is"
            f" {DEFAULT_API_URL}, with or without /v2). Nothing was deleted; the {kind} may"
            " still bill."
        ) from exc
    if present and getattr(present[0], "status", "") != "TERMINATED":
        raise ConfigurationError(
            f"RunPod answered 404 deleting {kind} {resource_id} but still lists it; delete it"
            " in the RunPod console, then run the command again."
        )
