"""Rehearse a deployment with no RunPod account: `pulumi up` a stack against the local emulator."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from frutebox_infra.catalog.files import load_registry
from frutebox_infra.commands.toolchain import hermetic_env
from frutebox_infra.emulator.server import RunningEmulator, realistic_for, start
from frutebox_infra.plumbing.paths import REPO_ROOT
from frutebox_infra.runpod.command_io import scaled_waits
from frutebox_infra.stack.endpoints import API_KEY_ENV, API_URL_ENV, PROXY_TEMPLATE_ENV
from frutebox_infra.stack.serving_key import OUTPUT_NAME

REHEARSAL_KEY = "rehearsal-key"
"""The emulator accepts any bearer token; this one is obviously not a real key."""
TIME_SCALE = 10.0
"""The realistic account, ten times faster: quotas, lags and loads as RunPod's, in minutes
rather than an hour. The deploy step's polling is sped up by the same factor."""


def rehearsal_env(emulator: RunningEmulator, backend: Path) -> dict[str, str]:
    """The environment of the rehearsal's pulumi: a throwaway backend, the emulator (loopback)
    as RunPod, and the deploy step's waits on the emulator's faster clock."""
    env = hermetic_env(backend_dir=backend)
    env.update(
        {
            API_URL_ENV: emulator.url,
            API_KEY_ENV: REHEARSAL_KEY,
            PROXY_TEMPLATE_ENV: emulator.app.proxy_url_template,
            **scaled_waits(TIME_SCALE),
            "FRUTEBOX_RUNNING_TIMEOUT_S": "60",
            "FRUTEBOX_HEALTH_TIMEOUT_S": "120",
        }
    )
    return env


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/dev rehearse", description=__doc__)
    parser.add_argument("--stack", default="dev")
    parser.add_argument("--keep", action="store_true", help="leave the pods up (no destroy)")
    args = parser.parse_args(argv)

    backend = REPO_ROOT / ".pulumi-state" / "rehearsal"
    # Every rehearsal starts from nothing: a fresh emulator account and a fresh backend.
    shutil.rmtree(backend, ignore_errors=True)
    emulator = start(realism=realistic_for(load_registry(), time_scale=TIME_SCALE))
    env = rehearsal_env(emulator, backend)

    def pulumi(*words: str) -> int:
        print(f"$ pulumi {' '.join(words)}", file=sys.stderr, flush=True)
        return subprocess.run(
            ["pulumi", *words, "--non-interactive"], cwd=REPO_ROOT, env=env
        ).returncode

    try:
        print(f"RunPod v2 emulator at {emulator.url} (loopback only)", file=sys.stderr)
        if pulumi("stack", "init", args.stack) != 0:
            return 1
        if pulumi("up", "--stack", args.stack, "--yes", "--skip-preview") != 0:
            return 1
        pulumi("stack", "output", "pods", "--stack", args.stack)
        account = emulator.app.state()
        pods = account.get("pods", [])
        live = [p for p in pods if p.get("status") != "TERMINATED" and not p["emulator"]["foreign"]]
        foreign = [p for p in pods if p["emulator"]["foreign"] and p["status"] == "RUNNING"]
        print(f"\nThe emulator now runs {len(live)} pod(s) of this stack:")
        for pod in live:
            gpu = pod.get("gpu") or {}
            print(f"  {pod['name']}: {gpu.get('count')}x {gpu.get('id')} {pod['status']}")
        print(f"(and {len(foreign)} of someone else's, some named like ours, left alone)")
        ours = [v for v in account.get("volumes", []) if not v["foreign"]]
        print(json.dumps({"volumes": ours}))
        print_reach(args.stack, env)
        if not args.keep:
            pulumi("destroy", "--stack", args.stack, "--yes", "--exclude-protected")
        return 0
    finally:
        emulator.stop()


def print_reach(stack: str, env: dict[str, str]) -> None:
    """Ask each model's URL (its health path) with the stack's serving key and without, as a
    client would; the key itself is read from the secret output and never printed."""
    from frutebox_infra.runpod.proxy import ProxyClient

    def output(*words: str) -> str:
        done = subprocess.run(["pulumi", "stack", "output", *words, "--stack", stack,
                               "--non-interactive"], cwd=REPO_ROOT, env=env,
                              capture_output=True, text=True, check=False)  # fmt: skip
        return done.stdout.strip() if done.returncode == 0 else ""

    key = output(OUTPUT_NAME, "--show-secrets")
    pods = json.loads(output("pods", "--json") or "{}")
    plan = json.loads(output("plan", "--json") or "{}")
    models = plan.get("models", [])
    health = {m["id"]: (m.get("launch") or {}).get("healthPath", "/") for m in models}
    print("\nWho can reach each model (its health path, with the stack's key and without):")
    proxy = ProxyClient(template=env[PROXY_TEMPLATE_ENV])
    try:
        for model_id, pod in pods.items():
            if plan.get("exposure") == "private":
                # No port published: nothing outside RunPod (this machine included) can ask it.
                print(f"  {model_id}: private, not asked: only the account's own pods reach"
                      f" {pod.get('url', '')}")  # fmt: skip
                continue
            url = str(pod.get("url", "")) + health.get(model_id, "/")
            keyed, bare = proxy.probe(url, serving_key=key), proxy.probe(url)
            print(f"  {model_id}: with the key {keyed}, without it {bare}")
    finally:
        proxy.close()


if __name__ == "__main__":
    sys.exit(main())
