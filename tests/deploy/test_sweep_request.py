"""What the sweep at the end of an `up` is told, and the one proof of what is the stack's."""

from __future__ import annotations

import json

import pytest

from frutebox_infra.deploy.contract import SweepRequest, owns_pod, volume_owned
from frutebox_infra.deploy.requests import pod_name, seed_pod_name, sweep_request, volume_name
from frutebox_infra.planner.plan import plan_fleet
from frutebox_infra.plumbing.validation import validate
from tests.factories import real_registry, settings

OWNER = "0123456789abcdef"


def test_the_sweep_is_told_the_state_and_every_name_the_up_declares() -> None:
    config = {"models": ["qwen3-8b", "llama-3.2-1b", "sdxl-1.0"], "colocate": True}
    plan = plan_fleet(real_registry(), settings(**config), stack="dev")
    request = sweep_request(plan, volume_id="vol-1", owner=OWNER, pod_ids=["p2", "", "p1"])
    assert request.volumeName == volume_name("dev") and request.owner == OWNER
    assert request.volumeId == "vol-1"
    assert request.podIds == ["p1", "p2"]  # a pod not created yet records no id
    pods = [pod_name("dev", p.anchor) for p in plan.pods]
    seeds = [seed_pod_name("dev", m) for m in sorted(plan.seeding.seeded_ids)]
    assert len(pods) < 3 and seeds  # co-located: fewer pods than models; seeding on
    assert request.names == pods + seeds
    # What the step reads back is what was written.
    assert validate(SweepRequest, json.loads(request.to_json())) == request


@pytest.mark.parametrize(
    ("env", "mounted", "owner", "volume_id", "ours"),
    [
        pytest.param({"FRUTEBOX_OWNER": OWNER}, "v", OWNER, "v", True, id="token-and-volume"),
        pytest.param({"FRUTEBOX_OWNER": OWNER}, "w", OWNER, "v", False, id="another-volume"),
        pytest.param({}, "v", OWNER, "v", False, id="no-token"),
        pytest.param({"FRUTEBOX_OWNER": "x"}, "v", None, "v", True, id="no-token-recorded"),
        pytest.param({}, "v", None, None, False, id="nothing-known-proves-nothing"),
    ],
)
def test_a_pod_is_ours_by_token_and_volume_only(
    env: dict[str, str], mounted: str, owner: str | None, volume_id: str | None, ours: bool
) -> None:
    assert owns_pod(env, mounted, owner=owner, volume_id=volume_id) is ours


@pytest.mark.parametrize(
    ("name", "owner", "owned"),
    [
        pytest.param(f"b-{OWNER}", OWNER, True, id="our-token"),
        pytest.param("b", OWNER, False, id="the-bare-name"),
        pytest.param("b-feedfacefeedface", OWNER, False, id="another-token"),
        pytest.param(f"b-{OWNER}", None, False, id="no-token-recorded"),
        pytest.param("bb", OWNER, None, id="another-name"),
    ],
)
def test_a_volume_is_ours_by_the_token_in_its_name(
    name: str, owner: str | None, owned: bool | None
) -> None:
    assert volume_owned(name, base="b", owner=owner) is owned
