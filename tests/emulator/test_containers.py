"""A launch its image cannot run (args of an image without ENTRYPOINT must name a program), and a
crash-looping container over time: exits logged, start time and uptime reset, RUNNING still."""

from __future__ import annotations

import pytest

from frutebox_infra.emulator.containers import START_LINE, settle, start_loop
from frutebox_infra.emulator.launch import launch_failure
from frutebox_infra.emulator.records import PodRecord, timestamp

UP, GAP = 6.0, 4.0
T0 = 1_800_000_000.0
ENTRYPOINTS = {"lmsysorg/sglang:v0.5.21": "none", "ollama/ollama:0.35.1": "fixed-binary"}


@pytest.mark.parametrize(
    ("image", "args", "fails_with"),
    [
        pytest.param(
            "lmsysorg/sglang:v0.5.21", "python3 -m sglang.launch_server", None, id="a-program"
        ),
        pytest.param("lmsysorg/sglang:v0.5.21", "", "nothing to run", id="empty"),
        pytest.param("lmsysorg/sglang:v0.5.21", "   ", "nothing to run", id="blank"),
        pytest.param(
            "lmsysorg/sglang:v0.5.21",
            "--model-path Qwen/Qwen3",
            '"--model-path"',
            id="flags-without-a-program",
        ),
        pytest.param(
            "lmsysorg/sglang:v0.5.21", "bash -c 'unclosed", "syntax error", id="unbalanced-quotes"
        ),
        pytest.param("ollama/ollama:0.35.1", "", None, id="fixed-binary-has-its-cmd"),
        pytest.param("someone/else:1", "", None, id="an-image-of-no-known-kind"),
    ],
)
def test_a_launch_the_image_cannot_run_fails(image: str, args: str, fails_with: str | None) -> None:
    failure = launch_failure(ENTRYPOINTS, {"image": image, "args": args})
    if fails_with is None:
        assert failure is None
    else:
        assert failure is not None and fails_with in failure


def looping(crash: str | None = "error: unrecognized arguments: --bogus") -> PodRecord:
    pod = PodRecord(id="p", name="p", body={"gpu": {"id": "NVIDIA A40", "count": 1}},
                    status="RUNNING", data_center_id="EU-RO-1",
                    cost_per_hour=1.0, created_at=timestamp(T0), started_wall=T0,
                    started_at=timestamp(T0))  # fmt: skip
    start_loop(pod, crash, T0)
    return pod


@pytest.mark.parametrize(
    ("after_s", "exits", "up", "started"),
    [
        pytest.param(0.0, 0, True, T0, id="just-started"),
        pytest.param(UP - 0.01, 0, True, T0, id="just-before-the-first-exit"),
        pytest.param(UP, 1, False, T0, id="the-first-exit"),
        pytest.param(UP + GAP - 0.01, 1, False, T0, id="down-until-the-restart"),
        pytest.param(UP + GAP, 1, True, T0 + UP + GAP, id="restarted"),
        pytest.param(3 * (UP + GAP) + 1, 3, True, T0 + 3 * (UP + GAP), id="three-cycles"),
    ],
)
def test_the_loop_at_a_time(after_s: float, exits: int, up: bool, started: float) -> None:
    pod = looping()
    settle(pod, T0 + after_s, up_s=UP, gap_s=GAP)
    assert (pod.exits, pod.container_up, pod.started_wall) == (exits, up, started)
    assert pod.status == "RUNNING"
    assert pod.lines("container").count("error: unrecognized arguments: --bogus") == exits
    # RunPod's system log says each start; the first one is logged where the pod turns RUNNING.
    assert pod.lines("system").count(START_LINE) == (started - T0) // (UP + GAP)
    view = pod.view(T0 + after_s)
    assert (view["runtime"] is not None) is up
    if up:
        assert view["runtime"]["uptime"] == pytest.approx(T0 + after_s - started, abs=1)
        assert view["startedAt"] == timestamp(started)


def test_settling_twice_logs_each_exit_once() -> None:
    pod = looping()
    for step in range(1, 40):
        settle(pod, T0 + step, up_s=UP, gap_s=GAP)
    assert pod.exits == 4  # exits at 6, 16, 26 and 36 s
    assert pod.lines("container").count("error: unrecognized arguments: --bogus") == 4
    assert pod.lines("system") == [START_LINE] * 3  # restarts at 10, 20 and 30 s


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(looping(None), id="no-crash"),
        pytest.param(
            PodRecord(
                id="p",
                name="p",
                body={},
                status="EXITED",
                data_center_id="EU-RO-1",
                cost_per_hour=1.0,
                created_at="",
                crash="x",
                crash_epoch=T0,
            ),
            id="not-running",
        ),
    ],
)
def test_a_pod_that_does_not_crash_loop_is_left_alone(pod: PodRecord) -> None:
    before = (pod.exits, pod.container_up, pod.started_wall, list(pod.logs))
    settle(pod, T0 + 100, up_s=UP, gap_s=GAP)
    assert (pod.exits, pod.container_up, pod.started_wall, pod.logs) == before
