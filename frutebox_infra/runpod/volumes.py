"""The stack's network volume: named with the stack's token, grown but never shrunk, never moved.

`Volumes` holds the rules over the API client; `volume_create|update|grow|delete` are the
command's actions and the result each prints. Volumes take no idempotency key, so a create
answered ambiguously may have made a volume the listing shows late: the create looks for it
for the whole window (adopting.py), and a delete removes every volume named with the stack's
token, so none of ours is left.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import Any

from frutebox_infra.runpod.adopting import (
    AmbiguousCreates,
    Log,
    Sleep,
    create_adopting,
    ensure_gone,
)
from frutebox_infra.runpod.client import RunPodClient
from frutebox_infra.runpod.command_io import GrowRequest, PreviousVolume, Session, VolumeRequest
from frutebox_infra.runpod.errors import (
    ConfigurationError,
    MayStillBillError,
    NotFoundError,
    RunPodError,
)
from frutebox_infra.runpod.timeouts import Timeouts
from frutebox_infra.runpod.wire import NetworkVolume


def new_owner_token() -> str:
    """A stack's ownership token: random, minted once by the volume's create and kept in the
    stack's state (the volume command's result), so no other stack, checkout or backend can
    produce it. Not a secret: it only proves which pods and volume are ours."""
    return secrets.token_hex(8)


class Volumes:
    """Create (or adopt), grow and delete the stack's network volume."""

    def __init__(
        self,
        api: RunPodClient,
        *,
        log: Log,
        sleep: Sleep = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        duplicate_check_s: float = Timeouts.duplicate_check_s,
    ) -> None:
        self.api = api
        self._log = log
        self._sleep = sleep
        self._clock = clock
        self._duplicate_check_s = duplicate_check_s

    def named(self, name: str, data_center: str | None = None) -> list[NetworkVolume]:
        """Volumes named `name` (in `data_center`): with our token in the name, ours."""
        return [
            v
            for v in self.api.list_volumes()
            if v.name == name and (data_center is None or v.data_center == data_center)
        ]

    def create(
        self, base_name: str, size: int, data_center: str, tier: str, owner: str | None = None
    ) -> tuple[NetworkVolume, str, str]:
        """Create the stack's volume, named `base_name-<owner token>`: (volume, outcome, owner).

        RunPod names are not unique, so a volume is never adopted by a name anyone could
        have chosen; the token (minted here unless the stack already has one) makes ours.
        After an ambiguous answer, what it made is looked for for the whole window and
        deleted as soon as it lists (`AmbiguousCreates`): an extra volume bills for ever.
        """
        owner = owner or new_owner_token()
        name = f"{base_name}-{owner}"
        look = AmbiguousCreates(
            "volume",
            name,
            lambda: self.named(name, data_center),
            self.api.delete_volume,
            window_s=self._duplicate_check_s,
            log=self._log,
            sleep=self._sleep,
            clock=self._clock,
        )
        body = {"name": name, "size": size, "dataCenter": data_center, "type": tier}
        made = create_adopting(
            "volume",
            name,
            lambda: self.api.create_volume_once(body),
            look.find_new,
            retry=self.api.retry,
            sleep=self._sleep,
            log=self._log,
        )
        if look.ambiguous:
            look.keep(made.resource.id, adopted=made.outcome == "adopted")
            self._wait_out(look, made.resource)
        return made.resource, made.outcome, owner

    def _wait_out(self, look: AmbiguousCreates[NetworkVolume], kept: NetworkVolume) -> None:
        try:
            look.wait_out()
        except BaseException:
            # This run fails, so Pulumi will not record the volume: it must not bill either.
            try:
                self.api.delete_volume(kept.id)
            except RunPodError as exc:
                self._log(f"volume {kept.id}: deleting it after the failed look failed ({exc})")
            look.say_unseen()
            raise
        look.say_unseen()

    def grow(self, volume: NetworkVolume, size: int) -> NetworkVolume:
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

    def delete(self, volume_id: str, name: str | None = None) -> bool:
        """Delete the volume, then every other volume named `name` (ours by its token): no
        volume of ours is left. False when the recorded one was already gone."""
        try:
            self.api.delete_volume(volume_id)
            deleted = True
        except NotFoundError:
            ensure_gone("volume", volume_id, self.api.list_volumes)
            deleted = False
        if name:
            self._delete_others(volume_id, name)
        return deleted

    def _delete_others(self, volume_id: str, name: str) -> None:
        try:
            for extra in self.named(name):
                if extra.id == volume_id:
                    continue
                self._log(
                    f"volume {extra.id} is also named {name} (this stack's token) but the state"
                    " never recorded it: a duplicate of an ambiguous create; deleting it"
                )
                try:
                    self.api.delete_volume(extra.id)
                except NotFoundError:
                    continue
        except RunPodError as exc:
            raise MayStillBillError(
                f"Volume {volume_id} is deleted, but removing the other volumes named {name}"
                f" (this stack's token) failed ({exc}); delete them in the RunPod console.",
                kind="volume",
                name=name,
            ) from exc


def _volumes(session: Session) -> Volumes:
    return Volumes(
        session.api, log=session.log, duplicate_check_s=session.settings.duplicate_check_s
    )


def _volume_result(volume: NetworkVolume, owner: str | None) -> dict[str, Any]:
    return {
        "volumeId": volume.id,
        "name": volume.name,
        "size": volume.size,
        "dataCenter": volume.data_center,
        "type": volume.type,
        "owner": owner,
    }


def volume_create(
    session: Session, request: VolumeRequest, owner: str | None = None
) -> dict[str, Any]:
    volume, outcome, owner = _volumes(session).create(
        request.name, request.size, request.dataCenter, request.type, owner
    )
    session.log(
        f"volume {volume.id} ({volume.name}) {outcome} in {volume.data_center}"
        f" ({volume.size} GB, {volume.type or request.type})"
    )
    return _volume_result(volume, owner)


def volume_update(
    session: Session, request: VolumeRequest, previous: PreviousVolume | None
) -> dict[str, Any]:
    """Rename (a stack recorded without a token) and grow the recorded volume; it never moves."""
    if previous is None:
        return volume_create(session, request)
    api = session.api
    try:
        volume = api.get_volume(previous.volumeId)
    except NotFoundError:
        ensure_gone("volume", previous.volumeId, api.list_volumes)
        session.log(f"volume {previous.volumeId} no longer exists; creating a new one")
        return volume_create(session, request, previous.owner)
    if volume.data_center != request.dataCenter:
        raise ConfigurationError(
            f"Volume {volume.id} lives in {volume.data_center} but the request asks for"
            f" {request.dataCenter}. A volume cannot move: changing the data centre must replace"
            " it (the program's triggers), and its weights are downloaded again."
        )
    # A stack recorded before volumes carried a token gets one now; its name follows.
    owner = previous.owner or new_owner_token()
    name = f"{request.name}-{owner}"
    if volume.name != name:
        volume = api.update_volume(volume.id, {"name": name})
    return _volume_result(_volumes(session).grow(volume, request.size), owner)


def volume_grow(session: Session, request: GrowRequest) -> dict[str, Any]:
    volume = session.api.get_volume(request.volumeId)
    return _volume_result(_volumes(session).grow(volume, request.size), None)


def volume_delete(session: Session, previous: PreviousVolume | None) -> dict[str, Any]:
    volume_id = previous.volumeId if previous else None
    # Only a name that carries a token proves ours; results without one delete the id only.
    name = previous.name if previous and previous.owner and previous.name else None
    if name is not None and previous is not None and not name.endswith(f"-{previous.owner}"):
        name = None
    return session.delete_recorded(
        "volume", volume_id, lambda i: _volumes(session).delete(i, name), "deleted"
    )
