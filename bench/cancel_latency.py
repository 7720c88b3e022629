"""How fast a cancelled `pulumi up` stops, and what it leaves behind.

`pulumi up` of a one-model stack against the local emulator, whose pod never becomes healthy
(health timeout 600 s); once the deploy step probes health, SIGINT goes to the CLI only, as a
CI runner cancels it. The command provider then SIGKILLs the step's shell only (upstream's
way); the step notices, terminates its pod and exits. Printed per run: seconds from SIGINT
to the pod TERMINATED and to the CLI's exit, pods left live, processes left running.

Run: .venv/bin/python bench/cancel_latency.py [--quick]
  --quick: one run instead of three, for CI (exits non-zero if the run breaks).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import yaml
from support.common import Results, real_project, require_toolchain

from frutebox_infra.emulator.server import start

RUNS = 3
STACK = {"dataCenter": "EU-RO-1", "budgetUsdPerHour": 5, "maxFallbackPremium": 2}


def _state(url: str) -> dict[str, object]:
    response = httpx.get(f"{url}/_emulator/state", timeout=10)
    response.raise_for_status()
    result: dict[str, object] = response.json()
    return result


def _live(url: str) -> int:
    pods = _state(url)["pods"]
    assert isinstance(pods, list)
    # The realistic account holds other people's pods with colliding names: count only ours.
    return sum(1 for p in pods if p["status"] != "TERMINATED" and not p["emulator"]["foreign"])


def _probes(url: str) -> int:
    requests = _state(url)["requests"]
    assert isinstance(requests, list)
    return sum(1 for r in requests if r["op"] == "proxy")


def _survivors(marker: str) -> int:
    needle = f"FRUTEBOX_BENCH_RUN={marker}".encode()
    count = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if needle in (proc / "environ").read_bytes().split(b"\0"):
                count += "State:\tZ" not in (proc / "status").read_text()
        except OSError:
            continue
    return count


def one_run(tmp: Path) -> tuple[float, float, int, int]:
    project = real_project(tmp)
    emulator = start()
    try:
        never_healthy = [{"op": "pods.create", "action": "never-healthy"}]
        faults = httpx.post(f"{emulator.url}/_emulator/faults", json=never_healthy, timeout=10)
        faults.raise_for_status()
        config = {**STACK, "models": ["qwen3-8b"]}
        doc = {"config": {f"frutebox-infra:{k}": v for k, v in config.items()}}
        (project.root / "stacks" / "Pulumi.bench.yaml").write_text(yaml.safe_dump(doc))
        project.init("bench")
        marker = uuid.uuid4().hex
        env = {**project.env, "RUNPOD_API_URL": emulator.url, "RUNPOD_API_KEY": "rk-bench-000000",
               "RUNPOD_PROXY_URL_TEMPLATE": emulator.app.proxy_url_template,
               "FRUTEBOX_POLL_INTERVAL_S": "0.05", "FRUTEBOX_HEALTH_TIMEOUT_S": "600",
               "FRUTEBOX_BENCH_RUN": marker}  # fmt: skip
        up = subprocess.Popen(
            ["pulumi", "up", "--stack", "bench", "--yes", "--skip-preview", "--non-interactive"],
            cwd=project.root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        while _probes(emulator.url) == 0:
            time.sleep(0.05)
        up.send_signal(signal.SIGINT)
        sent = time.monotonic()
        terminated = None
        while up.poll() is None:
            if terminated is None and _live(emulator.url) == 0:
                terminated = time.monotonic() - sent
            time.sleep(0.05)
        exited = time.monotonic() - sent
        if terminated is None and _live(emulator.url) == 0:
            terminated = exited
        time.sleep(2)  # what is still running two seconds after the CLI exited
        return terminated or float("nan"), exited, _live(emulator.url), _survivors(marker)
    finally:
        emulator.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run: for CI")
    quick = parser.parse_args().quick
    runs = 1 if quick else RUNS
    require_toolchain()
    results = Results(__file__, quick=quick)
    results.heading(f"SIGINT to `pulumi up` while its pod waits for health ({runs} runs)")
    rows = []
    measured = []
    for i in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            result = one_run(Path(tmp))
        measured.append(result)
        terminated, exited, live, left = result
        rows.append([str(i + 1), f"{terminated:.1f}", f"{exited:.1f}", str(live), str(left)])
    results.table(
        ["run", "pod terminated (s)", "up exited (s)", "live pods", "processes left"], rows
    )
    terminated = statistics.median(r[0] for r in measured)
    exited = statistics.median(r[1] for r in measured)
    results.print(
        f"\nmedian: pod terminated {terminated:.1f} s, up exited {exited:.1f} s after SIGINT"
    )
    results.write()


if __name__ == "__main__":
    main()
