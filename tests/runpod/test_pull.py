"""Ollama pulls through the RunPod proxy: streamed NDJSON, read until success or an error."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from frutebox_infra.runpod import errors
from frutebox_infra.runpod.lifecycle import Provisioner
from tests.runpod.command import HEALTH, PULL_URL, TIMEOUTS
from tests.runpod.conftest import Clock, FakeApi, ndjson, ok


def test_pull_streams_and_reads_lines_until_success(
    provisioner: Provisioner, fake: FakeApi, logs: list[str]
) -> None:
    total = 4_000_000_000
    progress = [
        {"status": "pulling abc", "digest": "sha256:abc", "total": total, "completed": n}
        for n in range(0, total, total // 50)
    ]
    fake.on(
        "POST", PULL_URL, ndjson({"status": "pulling manifest"}, *progress, {"status": "success"})
    )
    provisioner.pull("pod1", HEALTH, "qwen3:8b", TIMEOUTS)
    assert json.loads(fake.requests[0].read()) == {"model": "qwen3:8b", "stream": True}
    said = [line for line in logs if "pulling abc" in line]
    assert said == ["pod pod1: pulling qwen3:8b: pulling abc 0% of 4.0 GB"]  # sparse


def test_a_pull_is_bounded_by_its_overall_timeout(
    provisioner: Provisioner, fake: FakeApi, clock: Clock
) -> None:
    sent: list[int] = []

    def slow_progress() -> Iterator[bytes]:
        for n in range(100):
            sent.append(n)
            clock.now += 1  # each line takes a second; TIMEOUTS.pull_s is 5
            yield json.dumps({"status": "pulling abc", "completed": n}).encode() + b"\n"
        yield b'{"status": "success"}\n'

    fake.on("POST", PULL_URL, lambda request: httpx.Response(200, content=slow_progress()))
    with pytest.raises(errors.PodFailedError) as caught:
        provisioner.pull("pod1", HEALTH, "qwen3:8b", TIMEOUTS)
    assert "after 5s" in str(caught.value) and "FRUTEBOX_PULL_TIMEOUT_S" in str(caught.value)
    assert len(sent) < 10


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        pytest.param(
            ok(500, {"error": "pull model manifest: file does not exist"}),
            "HTTP 500: pull model manifest",
            id="500",
        ),
        pytest.param(
            ndjson({"status": "pulling manifest"}, {"error": "file does not exist"}),
            "ollama: file does not exist",
            id="error-line",
        ),
        pytest.param(ndjson({"status": "pulling manifest"}), "ended without", id="no-success"),
        pytest.param(httpx.Response(200, text="not json"), "not a JSON object", id="not-json"),
        pytest.param(
            httpx.Response(524, text="error code: 524"), "HTTP 524: error code: 524", id="524"
        ),
    ],
)
def test_a_failed_pull_is_a_pod_failure(
    provisioner: Provisioner, fake: FakeApi, answer: httpx.Response, why: str
) -> None:
    fake.on("POST", PULL_URL, answer)
    with pytest.raises(errors.PodFailedError, match="could not pull qwen3:8b") as caught:
        provisioner.pull("pod1", HEALTH, "qwen3:8b", TIMEOUTS)
    assert why in str(caught.value)
