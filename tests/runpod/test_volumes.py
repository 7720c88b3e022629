"""The stack's volume: named with its token, adopted only when provably ours, grown but never
shrunk or moved, and believed gone on a 404 only when the listing agrees."""

from __future__ import annotations

import json

import httpx
import pytest

from frutebox_infra.emulator.server import RunningEmulator
from frutebox_infra.runpod import errors
from frutebox_infra.runpod.volumes import Volumes, new_owner_token
from frutebox_infra.runpod.wire import NetworkVolume
from tests.emulator_client import requests, state
from tests.runpod.command import env_for, pod_request, run, volume
from tests.runpod.conftest import Clock, FakeApi, ok, problem

VOL = {"id": "v1", "name": "w", "size": 100, "dataCenter": "EU-RO-1", "type": "STANDARD"}


def test_a_volume_grows_when_asked_bigger(volumes: Volumes, fake: FakeApi, logs: list[str]) -> None:
    fake.on("PATCH", "/v2/network-volumes/v1", ok(200, {**VOL, "size": 150}))
    grown = volumes.grow(NetworkVolume.model_validate(VOL), 150)
    assert grown.size == 150
    assert fake.bodies("PATCH", "/v2/network-volumes/v1") == [{"size": 150}]


def test_a_volume_never_shrinks_and_says_so(
    volumes: Volumes, fake: FakeApi, logs: list[str]
) -> None:
    kept = volumes.grow(NetworkVolume.model_validate(VOL), 40)
    assert kept.size == 100
    assert not fake.requests
    assert any("never shrink" in line for line in logs)


OWNED = {**VOL, "name": "w-tok12345"}


def test_volume_create_adopts_after_a_5xx(volumes: Volumes, fake: FakeApi) -> None:
    fake.on(
        "GET",
        "/v2/network-volumes",
        ok(200, {"networkVolumes": [{**VOL, "id": "theirs"}, {**OWNED, "size": 50}]}),
    )
    fake.on("POST", "/v2/network-volumes", problem(503, "down"))
    volume, outcome, owner = volumes.create("w", 50, "EU-RO-1", "STANDARD", "tok12345")
    assert (volume.id, outcome, owner) == ("v1", "adopted", "tok12345")
    assert len(fake.calls("POST")) == 1


def test_volume_create_names_the_volume_with_a_fresh_token_and_the_tier(
    volumes: Volumes, fake: FakeApi
) -> None:
    fake.on("GET", "/v2/network-volumes", ok(200, {"networkVolumes": [VOL]}))
    fake.on("POST", "/v2/network-volumes", lambda r: ok(201, {**VOL, "id": "v9",
            **{k: v for k, v in json.loads(r.content).items() if k == "name"}}))  # fmt: skip
    volume, outcome, owner = volumes.create("w", 100, "EU-RO-1", "STANDARD")
    assert (volume.id, outcome) == ("v9", "created")  # "w" itself is never adopted
    [body] = fake.bodies("POST", "/v2/network-volumes")
    assert body == {"name": f"w-{owner}", "size": 100, "dataCenter": "EU-RO-1",
                    "type": "STANDARD"}  # fmt: skip
    assert len(owner) == 16


def test_a_created_volume_whose_answer_is_unreadable_is_adopted(
    volumes: Volumes, fake: FakeApi
) -> None:
    fake.on(
        "GET",
        "/v2/network-volumes",
        ok(200, {"networkVolumes": [OWNED]}),
    )
    fake.on("POST", "/v2/network-volumes", httpx.Response(201, text="<html>hiccup</html>"))
    volume, outcome, _ = volumes.create("w", 100, "EU-RO-1", "STANDARD", "tok12345")
    assert (volume.id, outcome) == ("v1", "adopted")
    assert len(fake.calls("POST")) == 1


def test_volume_delete_treats_404_as_gone(volumes: Volumes, fake: FakeApi) -> None:
    fake.on("DELETE", "/v2/network-volumes/v1", problem(404, "not found"))
    fake.on("GET", "/v2/network-volumes", ok(200, {"networkVolumes": []}))
    assert volumes.delete("v1") is False


def test_a_volume_asked_for_its_own_size_is_left_alone(volumes: Volumes, fake: FakeApi) -> None:
    assert volumes.grow(NetworkVolume.model_validate(VOL), 100).size == 100
    assert not fake.requests


def test_volume_delete_says_whether_it_deleted(volumes: Volumes, fake: FakeApi) -> None:
    fake.on("DELETE", "/v2/network-volumes/v1", ok(204))
    assert volumes.delete("v1") is True


def test_a_volume_create_whose_listing_fails_too_may_still_bill(
    volumes: Volumes, fake: FakeApi
) -> None:
    fake.on("POST", "/v2/network-volumes", problem(503, "down"))
    fake.on("GET", "/v2/network-volumes", problem(401, "key revoked"))
    with pytest.raises(errors.MayStillBillError, match="One may exist and bill") as caught:
        volumes.create("w", 100, "EU-RO-1", "STANDARD", "tok12345")
    assert (caught.value.kind, caught.value.name, caught.value.ids) == ("volume", "w-tok12345", ())
    assert "volume w-tok12345" in str(caught.value) and "RunPod console" in str(caught.value)
    assert len(fake.calls("POST")) == 1  # never retried blind


@pytest.mark.parametrize(
    ("listing", "expected"),
    [
        pytest.param(problem(404, "no such path"), "API URL is wrong", id="wrong-url"),
        pytest.param(ok(200, {"networkVolumes": [VOL]}), "still lists it", id="still-listed"),
    ],
)
def test_a_404_on_delete_that_the_listing_contradicts_may_still_bill(
    volumes: Volumes, fake: FakeApi, listing: httpx.Response, expected: str
) -> None:
    fake.on("DELETE", "/v2/network-volumes/v1", problem(404, "not found"))
    fake.on("GET", "/v2/network-volumes", listing)
    with pytest.raises(errors.MayStillBillError, match=expected) as caught:
        volumes.delete("v1")
    assert (caught.value.kind, caught.value.ids) == ("volume", ("v1",))


def test_a_volume_the_listing_shows_late_after_a_5xx_is_deleted_and_one_is_kept(
    volumes: Volumes, fake: FakeApi, clock: Clock, logs: list[str]
) -> None:
    # The 503'd create made v1, which the listing shows only later: the look right after it
    # sees nothing, so the retry makes v2; the sweep deletes v1 once it is listed.
    first, second = {**OWNED, "id": "v1"}, {**OWNED, "id": "v2"}
    listings = [[], [], [first], [first, second]]
    fake.on("GET", "/v2/network-volumes", *(ok(200, {"networkVolumes": [VOL, *vs]})
                                            for vs in listings))  # fmt: skip
    fake.on("POST", "/v2/network-volumes", problem(503, "down"), ok(201, second))
    fake.on("DELETE", "/v2/network-volumes/v1", ok(204))
    volume, outcome, _ = volumes.create("w", 100, "EU-RO-1", "STANDARD", "tok12345")
    assert (volume.id, outcome) == ("v2", "created")
    assert [r.url.path for r in fake.calls("DELETE")] == ["/v2/network-volumes/v1"]
    assert clock.now < 10  # deleted within seconds, not a month of storage later
    assert any("duplicate of v2" in line for line in logs)


def test_a_failed_sweep_deletes_the_volume_it_kept_and_may_still_bill(
    volumes: Volumes, fake: FakeApi
) -> None:
    fake.on("GET", "/v2/network-volumes", ok(200, {"networkVolumes": []}),
            problem(401, "invalid API key"))  # fmt: skip
    fake.on("POST", "/v2/network-volumes", problem(503, "down"), ok(201, OWNED))
    fake.on("DELETE", "/v2/network-volumes/v1", ok(204))
    with pytest.raises(errors.MayStillBillError, match="checking for a duplicate"):
        volumes.create("w", 100, "EU-RO-1", "STANDARD", "tok12345")
    assert [r.url.path for r in fake.calls("DELETE")] == ["/v2/network-volumes/v1"]


def test_a_delete_leaves_no_volume_named_with_our_token(volumes: Volumes, fake: FakeApi) -> None:
    extra, theirs = {**OWNED, "id": "v7"}, {**VOL, "id": "foreign"}
    fake.on("DELETE", "/v2/network-volumes/v1", ok(204))
    fake.on("DELETE", "/v2/network-volumes/v7", ok(204))
    fake.on("GET", "/v2/network-volumes", ok(200, {"networkVolumes": [extra, theirs]}))
    assert volumes.delete("v1", "w-tok12345") is True
    deleted = [r.url.path for r in fake.calls("DELETE")]
    assert deleted == ["/v2/network-volumes/v1", "/v2/network-volumes/v7"]  # never "foreign"


def test_owner_tokens_are_fresh_each_time() -> None:
    tokens = {new_owner_token() for _ in range(50)}
    assert len(tokens) == 50 and all(len(t) == 16 and int(t, 16) >= 0 for t in tokens)


# The command's actions, in-process against the emulator.

REQUEST = {"name": "frutebox-dev-weights", "size": 100, "dataCenter": "EU-RO-1"}


def test_volume_create_update_and_delete(emulator: RunningEmulator) -> None:
    env = env_for(emulator)
    request = REQUEST
    created = run("volume create", request, env=env).result
    assert set(created) == {"volumeId", "name", "size", "dataCenter", "type", "owner"}
    # Named with the stack's token: a volume anyone else named frutebox-dev-weights is not ours.
    assert created["name"] == f"frutebox-dev-weights-{created['owner']}"
    assert len(created["owner"]) == 16 and created["type"] == "STANDARD"
    grown = run("volume update", {**request, "size": 150}, env=env, previous=created)
    assert grown.result["size"] == 150
    shrunk = run("volume update", {**request, "size": 60}, env=env, previous=grown.result)
    assert shrunk.code == 0 and shrunk.result["size"] == 150
    assert "never shrink" in shrunk.err
    patches = [r["body"] for r in requests(emulator, "volumes.update")]
    assert patches == [{"size": 150}]
    moved = run("volume update", {**request, "dataCenter": "EU-SE-1"}, env=env, previous=created)
    assert moved.code == 1 and "cannot move" in moved.err
    assert run("volume delete", env=env, previous=created).code == 0
    assert run("volume delete", env=env, previous=created).code == 0


def test_destroying_the_volume_leaves_no_volume_of_ours(emulator: RunningEmulator) -> None:
    env = env_for(emulator)
    created = run("volume create", REQUEST, env=env).result
    account = emulator.app.account
    # A duplicate a retried create left, named with our token; and someone else's volume.
    late = account.create_volume({"name": created["name"], "size": 100, "dataCenter": "EU-RO-1"})
    theirs = account.create_volume({"name": REQUEST["name"], "size": 100, "dataCenter": "EU-RO-1"})
    done = run("volume delete", env=env, previous=created)
    assert done.code == 0, done.err
    left = {v["id"] for v in state(emulator)["volumes"] if not v["deleted"]}
    assert created["volumeId"] not in left and late.id not in left and theirs.id in left
    assert "never recorded it" in done.err


def test_a_volume_in_use_is_not_deleted(emulator: RunningEmulator) -> None:
    env = env_for(emulator)
    vid = volume(emulator)
    assert run("pod create", pod_request(vid), env=env).code == 0
    done = run("volume delete", env=env, previous={"volumeId": vid})
    assert done.code == 1 and "mounted by pod" in done.err


def test_a_volume_that_only_shares_our_name_is_never_adopted(emulator: RunningEmulator) -> None:
    theirs = emulator.app.account.create_volume({**REQUEST, "size": 50}).id
    done = run("volume create", REQUEST, env=env_for(emulator))
    assert done.code == 0, done.err
    assert done.result["volumeId"] != theirs
    assert done.result["name"] == f"frutebox-dev-weights-{done.result['owner']}"
    assert len(requests(emulator, "volumes.create")) == 1


def test_volume_grow_grows_the_recorded_volume_only_upwards(emulator: RunningEmulator) -> None:
    env = env_for(emulator)
    vid = volume(emulator)  # 50 GB
    grown = run("volume grow", {"volumeId": vid, "size": 80}, env=env)
    assert grown.code == 0, grown.err
    assert (grown.result["volumeId"], grown.result["size"], grown.result["owner"]) == (
        vid,
        80,
        None,
    )
    kept = run("volume grow", {"volumeId": vid, "size": 20}, env=env)
    assert kept.result["size"] == 80 and "never shrink" in kept.err


def test_a_volume_recorded_without_a_token_is_renamed_with_a_new_one(
    emulator: RunningEmulator,
) -> None:
    vid = volume(emulator)
    done = run("volume update", REQUEST, env=env_for(emulator), previous={"volumeId": vid})
    assert done.code == 0, done.err
    owner = done.result["owner"]
    assert len(owner) == 16 and done.result["name"] == f"frutebox-dev-weights-{owner}"
    patches = [r["body"] for r in requests(emulator, "volumes.update")]
    assert patches == [{"name": f"frutebox-dev-weights-{owner}"}, {"size": 100}]


def test_a_recorded_volume_that_is_gone_is_created_again_with_the_stacks_token(
    emulator: RunningEmulator,
) -> None:
    env = env_for(emulator)
    created = run("volume create", REQUEST, env=env).result
    assert run("volume delete", env=env, previous=created).code == 0
    done = run("volume update", REQUEST, env=env, previous=created)
    assert done.code == 0, done.err
    assert (
        done.result["owner"] == created["owner"] and done.result["volumeId"] != created["volumeId"]
    )
    assert "no longer exists" in done.err
    live = [v["id"] for v in state(emulator)["volumes"] if not v["deleted"]]
    assert live == [done.result["volumeId"]]


def test_deleting_a_volume_never_recorded_needs_no_key(emulator: RunningEmulator) -> None:
    done = run("volume delete", env=env_for(emulator, RUNPOD_API_KEY=""))
    assert (done.code, done.out.strip()) == (0, "{}") and "nothing to delete" in done.err
