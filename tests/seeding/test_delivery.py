"""The seeder reaches its pod as RunPod allows: source and plan in env, run by the args."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest

from frutebox_infra.plumbing.validation import validate, validate_json
from frutebox_infra.seeding.delivery import MAX_ENV_STRING_BYTES, pod_args, pod_env, program_text
from frutebox_infra.seeding.protocol import (
    PLAN_ENV,
    PROGRAM_ENV,
    HfSnapshotJob,
    SeedPlan,
    SeedState,
    SeedStatus,
)
from tests.seeding.fake_hub import Repo, running_hub


def plan_for(hub_url: str, root: Path, jobs: int = 1) -> SeedPlan:
    job = HfSnapshotJob(modelId="m", repo="org/m", revision="main", cacheDir="hub")
    return SeedPlan(
        volumePath=str(root),
        jobs=tuple(replace(job, modelId=f"m{i}") for i in range(jobs)),
        hubUrl=hub_url,
        port=0,
        bindAddress="127.0.0.1",
    )


def test_the_pods_command_runs_the_program_its_env_carries(tmp_path: Path) -> None:
    with running_hub() as hub:
        hub.add_repo("org/m", Repo(files={"config.json": b"{}"}))
        env = {"PATH": os.environ["PATH"], **pod_env(plan_for(hub.hub_url, tmp_path))}
        # The image's python3 is the interpreter of this test run here.
        words = shlex.split(pod_args())
        assert words[0] == "python3"
        process = subprocess.Popen(
            ["python3", *words[1:]], env=env, stdout=subprocess.PIPE, text=True
        )
        try:
            assert process.stdout is not None
            port = int(process.stdout.readline().rsplit(" ", 1)[1])
            for _ in range(200):
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=10) as r:
                    status = validate(SeedStatus, json.loads(r.read()))
                if status.state is not SeedState.RUNNING:
                    break
            assert status.state is SeedState.DONE
            assert (tmp_path / "hub" / "models--org--m" / "refs").exists() is False
            assert (tmp_path / "hub" / "models--org--m" / "snapshots").is_dir()
        finally:
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=10) == 0


def test_the_env_holds_the_program_verbatim_and_the_plan_as_json(tmp_path: Path) -> None:
    plan = plan_for("https://huggingface.co", tmp_path)

    env = pod_env(plan)

    assert env[PROGRAM_ENV] == program_text()
    assert validate_json(SeedPlan, env[PLAN_ENV]) == plan
    assert "HF_TOKEN" not in env  # the deploy step fills it at the last moment


def test_the_program_leaves_room_under_the_linux_limit() -> None:
    assert len(f"{PROGRAM_ENV}={program_text()}".encode()) < MAX_ENV_STRING_BYTES // 2


@pytest.mark.parametrize(("jobs", "ok"), [pytest.param(10, True, id="a-batch"),
                                          pytest.param(2000, False, id="too-big")])  # fmt: skip
def test_a_plan_too_large_for_one_env_string_is_refused(
    tmp_path: Path, jobs: int, ok: bool
) -> None:
    plan = plan_for("https://huggingface.co", tmp_path, jobs)
    if ok:
        assert len(pod_env(plan)[PLAN_ENV]) < MAX_ENV_STRING_BYTES
    else:
        with pytest.raises(ValueError, match=f"{PLAN_ENV} is .* bytes, over the"):
            pod_env(plan)
