"""The one planner -> deploy-step contract: written by the plan, read back by the command."""

from __future__ import annotations

import pytest

from frutebox_infra.deploy_contract import OWNER_ENV, PodRequest, VolumeRequest
from frutebox_infra.deploy_requests import pod_request, volume_request
from frutebox_infra.plan import plan_fleet
from frutebox_infra.runpod.command_io import read_request
from tests.factories import imported_packages, real_registry, settings

OWNER = "0123456789abcdef"


def test_what_the_plan_writes_the_command_reads_unchanged() -> None:
    import io

    plan = plan_fleet(real_registry(), settings(models=["qwen3-8b", "sdxl-1.0"]), stack="dev")
    for model in plan.models:
        written = pod_request(model, plan.settings, stack="dev", volume_id="v1", owner=OWNER)
        read = read_request(PodRequest, io.StringIO(written.to_json()))
        assert read == written
        assert all(c["env"][OWNER_ENV] == OWNER for c in read.candidates)
    volume = volume_request(plan)
    assert read_request(VolumeRequest, io.StringIO(volume.to_json())) == volume


@pytest.mark.parametrize("field", ["owner", "volumeId"])
def test_a_request_without_ownership_is_refused(field: str) -> None:
    plan = plan_fleet(real_registry(), settings(models=["qwen3-8b"]), stack="dev")
    data = pod_request(plan.models[0], plan.settings, stack="dev", volume_id="v1", owner=OWNER)
    broken = data.model_dump()
    del broken[field]
    with pytest.raises(ValueError, match=field):
        PodRequest.model_validate(broken)


def test_the_contract_imports_neither_pulumi_nor_httpx() -> None:
    assert imported_packages(["frutebox_infra.deploy_contract"], ["pulumi", "httpx"]) == []
