"""The one planner -> deploy-step contract: written by the plan, read back by the command."""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from typing import Any

import pytest

from frutebox_infra.deploy.contract import (
    OMIT_EMPTY,
    OWNER_ENV,
    HealthSpec,
    PodRequest,
    TimeoutSpec,
    VolumeRequest,
    wire_json,
)
from frutebox_infra.deploy.requests import pod_request, seed_request, seeded_ids, volume_request
from frutebox_infra.planner.plan import plan_fleet
from frutebox_infra.plumbing.validation import validate
from frutebox_infra.runpod.command_io import read_request
from frutebox_infra.stack.environment import Environment
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
    broken = asdict(data)
    del broken[field]
    with pytest.raises(ValueError, match=field):
        validate(PodRequest, broken)


def test_the_contract_imports_neither_pulumi_nor_httpx() -> None:
    assert imported_packages(["frutebox_infra.deploy.contract"], ["pulumi", "httpx"]) == []


def every_request() -> list[Any]:
    """Each request a plan of every catalog model (seeded, over a volume) renders."""
    reg = real_registry()
    plan = plan_fleet(
        reg,
        settings(models=[m.id for m in reg.models], seeding=True),
        stack="prod",
        environment=Environment(hf_token=True),
    )
    pods = [
        pod_request(m, plan.settings, stack="prod", volume_id="v1", owner=OWNER)
        for m in plan.models
        if m.placement is not None
    ]
    seeded = sorted(seeded_ids(plan))
    seeds = [seed_request(plan, i, volume_id="v1", owner=OWNER) for i in seeded]
    jobs = [d.job for d in (plan.seeding.models if plan.seeding else ()) if d.job]
    return [*pods, *seeds, volume_request(plan), *jobs]


def test_a_request_is_written_as_pydantic_writes_the_record_it_validates_to() -> None:
    """The text of a request is what Pulumi diffs: it must not change with how it is built
    (a whole-number float, a tuple for a list), and reads back to the same record."""
    from pydantic import TypeAdapter

    requests = every_request()
    assert {type(r).__name__ for r in requests} >= {"PodRequest", "SeedRequest", "HfSnapshotJob"}
    for request in requests:
        text = wire_json(request)
        kind = type(request)
        read = validate(kind, json.loads(text))
        # A field marked OMIT_EMPTY is left out while empty, so a request that does not use
        # it reads as before the field existed; otherwise the text is pydantic's, key by key.
        omitted = {f.name for f in fields(kind) if f.metadata.get(OMIT_EMPTY)}
        dumped = json.loads(TypeAdapter(kind).dump_json(read))
        kept = {k: v for k, v in dumped.items() if v or k not in omitted}
        assert json.dumps(kept, separators=(",", ":"), ensure_ascii=False) == text
        assert wire_json(read) == text


@pytest.mark.parametrize(
    ("record", "text"),
    [
        pytest.param(TimeoutSpec(runningSeconds=3), '{"runningSeconds":3.0,"healthySeconds":null}',
                     id="whole-number-float"),
        pytest.param(HealthSpec(port=1, path="/é", expectedFiles=["a\nb"]),
                     '{"port":1,"path":"/é","expectedFiles":["a\\nb"]}', id="utf8-and-escapes"),
    ],
)  # fmt: skip
def test_the_json_of_a_record_is_compact_and_typed(record: Any, text: str) -> None:
    assert wire_json(record) == text
