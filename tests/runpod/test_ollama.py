"""Ollama through the RunPod proxy: pulls streamed as NDJSON and read until success or an error,
its listing of what it serves, and removing what a shared pod no longer serves."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from frutebox_infra.runpod import errors, ollama
from frutebox_infra.runpod.lifecycle import Provisioner
from tests.runpod.command import HEALTH, PULL_URL, TAGS_URL, TIMEOUTS
from tests.runpod.conftest import Answer, Clock, FakeApi, ndjson, ok


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


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        pytest.param("qwen3", "qwen3:latest", id="bare"),
        pytest.param("qwen3:8b", "qwen3:8b", id="tagged"),
        pytest.param("hf.co/org/model", "hf.co/org/model:latest", id="path-bare"),
        pytest.param("localhost:5000/m", "localhost:5000/m:latest", id="registry-port-not-a-tag"),
        pytest.param("hf.co/org/model:Q4_K_M", "hf.co/org/model:Q4_K_M", id="path-tagged"),
    ],
)
def test_full_tag_spells_tags_as_ollama_lists_them(tag: str, expected: str) -> None:
    assert ollama.full_tag(tag) == expected


BASE = TAGS_URL.removesuffix("/api/tags")


@pytest.mark.parametrize(
    ("listing", "expected"),
    [
        pytest.param(
            ok(200, {"models": [{"name": "qwen3:8b"}, {"model": "gemma3:latest"}]}),
            [],
            id="all-listed",
        ),
        pytest.param(ok(200, {"models": [{"name": "qwen3:8b"}]}), ["gemma3"], id="one-missing"),
        pytest.param(ok(200, {"models": "nope"}), None, id="not-a-listing"),
        pytest.param(ok(502, {}), None, id="no-answer"),
    ],
)
def test_missing_names_the_tags_the_server_does_not_list(
    provisioner: Provisioner, fake: FakeApi, listing: Answer, expected: list[str] | None
) -> None:
    fake.on("GET", TAGS_URL, listing)
    assert ollama.missing(provisioner.proxy, BASE, ["qwen3:8b", "gemma3"]) == expected


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        pytest.param(ok(200, {}), None, id="deleted"),
        pytest.param(ok(404, {"error": "not found"}), None, id="already-gone"),
        pytest.param(ok(500, {}), "HTTP 500", id="refused"),
    ],
)
def test_delete_is_done_once_the_model_is_gone(
    provisioner: Provisioner, fake: FakeApi, answer: Answer, expected: str | None
) -> None:
    fake.on("DELETE", BASE + "/api/delete", answer)
    assert ollama.delete(provisioner.proxy, BASE, "qwen3:8b") == expected
    assert json.loads(fake.requests[0].content) == {"model": "qwen3:8b"}
