"""The seed plan and status are one written contract: what the planner builds, the pod reads,
and the deploy step parses back; bad values are refused on both sides of each bound."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from frutebox_infra.plumbing.validation import validate, validate_json
from frutebox_infra.seeding.protocol import (
    FileSpec,
    HfSnapshotJob,
    JobState,
    OllamaJob,
    SeedPlan,
    SeedState,
    SeedStatus,
)

SNAPSHOT = {"modelId": "m", "repo": "org/m", "revision": "main", "cacheDir": "huggingface/hub"}


def test_a_plan_survives_its_json() -> None:
    plan = SeedPlan(
        jobs=(
            HfSnapshotJob(**SNAPSHOT),
            OllamaJob(modelId="o", tag="qwen3:8b", store="ollama/models/o"),
        )
    )

    again = validate_json(SeedPlan, plan.to_json())

    assert again == plan
    assert [j["kind"] for j in json.loads(plan.to_json())["jobs"]] == ["hf-snapshot", "ollama"]


@pytest.mark.parametrize(
    ("path", "ok"),
    [
        pytest.param("huggingface/hub", True, id="below-the-mount"),
        pytest.param("a/..b/c", True, id="dots-in-a-name"),
        pytest.param("/workspace/huggingface", False, id="absolute"),
        pytest.param("huggingface/../../etc", False, id="climbs-out"),
        pytest.param("..", False, id="parent"),
        pytest.param("a\\b", False, id="backslash"),
        pytest.param("", False, id="empty"),
    ],
)
def test_every_path_stays_on_the_volume(path: str, ok: bool) -> None:
    def build() -> Any:
        spec = {"repo": "org/m", "revision": "main", "path": "x", "destination": path}
        return validate(FileSpec, spec)

    if ok:
        assert build().destination == path
    else:
        with pytest.raises(ValidationError):
            build()


@pytest.mark.parametrize(
    ("field", "value", "ok"),
    [
        pytest.param("stallSeconds", 3600, True, id="stall-at-most"),
        pytest.param("stallSeconds", 3601, False, id="stall-above"),
        pytest.param("stallSeconds", 0, False, id="stall-zero"),
        pytest.param("port", 65535, True, id="port-at-most"),
        pytest.param("port", 65536, False, id="port-above"),
        pytest.param("hubUrl", "ftp://hub", False, id="hub-not-http"),
        pytest.param("jobs", [], False, id="no-jobs"),
    ],
)
def test_plan_settings_have_bounds(field: str, value: Any, ok: bool) -> None:
    body = {"jobs": [SNAPSHOT | {"kind": "hf-snapshot"}], field: value}
    if ok:
        assert getattr(validate(SeedPlan, body), field) == value
    else:
        with pytest.raises(ValidationError):
            validate(SeedPlan, body)


@pytest.mark.parametrize(
    ("tag", "ok"),
    [
        pytest.param("qwen3:8b", True, id="library"),
        pytest.param("user/model:tag", True, id="namespace"),
        pytest.param("llama3.2", True, id="latest"),
        pytest.param("a:b:c", False, id="two-tags"),
        pytest.param("../x", False, id="path"),
    ],
)
def test_an_ollama_tag_is_a_name(tag: str, ok: bool) -> None:
    if ok:
        assert validate(OllamaJob, {"modelId": "o", "tag": tag, "store": "s"}).tag == tag
    else:
        with pytest.raises(ValidationError):
            validate(OllamaJob, {"modelId": "o", "tag": tag, "store": "s"})


def test_a_status_reads_each_job_by_model() -> None:
    status = validate(SeedStatus, {
            "version": 1,
            "state": "running",
            "startedAt": "2026-12-01T00:00:00Z",
            "updatedAt": "2026-12-01T00:01:00Z",
            "jobs": [
                {"modelId": "a", "state": "done", "bytesDone": 5, "bytesTotal": 5},
                {"modelId": "b", "state": "failed", "bytesDone": 0, "reason": "r", "fix": "f"},
            ],
        })

    assert status.state is SeedState.RUNNING
    assert status.job("b") is not None and status.job("b").state is JobState.FAILED  # type: ignore[union-attr]
    assert status.job("c") is None


def test_a_status_with_an_unknown_state_is_refused() -> None:
    with pytest.raises(ValidationError):
        validate(SeedStatus, {"version": 1, "state": "paused", "startedAt": "", "updatedAt": "",
                              "jobs": []})  # fmt: skip


@pytest.mark.parametrize(
    ("repo", "ok"),
    [
        pytest.param("Comfy-Org/Wan_2.2_ComfyUI_Repackaged", True, id="real"),
        pytest.param("../etc", False, id="climbs"),
        pytest.param("org/name/extra", False, id="three-parts"),
        pytest.param("name", False, id="no-org"),
    ],
)
def test_a_repo_is_org_and_name(repo: str, ok: bool) -> None:
    if ok:
        assert validate(HfSnapshotJob, {**SNAPSHOT, "repo": repo}).repo == repo
    else:
        with pytest.raises(ValidationError):
            validate(HfSnapshotJob, {**SNAPSHOT, "repo": repo})


@pytest.mark.parametrize(
    ("pins", "ok"),
    [
        pytest.param({"sha512": "a" * 128}, True, id="sha512"),
        pytest.param({"sha256": "b" * 64}, True, id="sha256"),
        pytest.param({}, False, id="no-pin"),
        pytest.param({"sha512": "a" * 128, "sha256": "b" * 64}, False, id="two-pins"),
        pytest.param({"sha512": "a" * 64}, False, id="sha512-too-short"),
        pytest.param({"sha256": "B" * 64}, False, id="upper-case"),
    ],
)
def test_a_placed_archive_is_pinned_by_exactly_one_checksum(pins: dict[str, str], ok: bool) -> None:
    archive = {"url": "https://example.invalid/caddy.tar.gz", "path": "frutebox/gateway/c.tgz"}
    job = {**SNAPSHOT, "kind": "hf-snapshot", "archives": [{**archive, **pins}]}
    if ok:
        read = validate(HfSnapshotJob, job)
        assert validate_json(HfSnapshotJob, json.dumps(job)) == read
        assert len(read.archives) == 1
    else:
        with pytest.raises(ValidationError):
            validate(HfSnapshotJob, job)
