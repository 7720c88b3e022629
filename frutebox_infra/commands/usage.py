"""`frutebox usage`'s shell: RunPod's hourly billing, the engines' counters and the ledger of
earlier samples, handed to `views/usage.py`.

Where the counts come from: each pod's engine counters (`/metrics` of SGLang, vLLM and
llama.cpp, ComfyUI's `/history`) read through the RunPod proxy, never with the RunPod key,
with whatever headers `auth_headers` gives (the seam for the stack's serving key: an engine
behind a key answers its counters only to it). A read is a *sample*, appended to the stack's
ledger (`.frutebox/usage-<stack>.jsonl`, or `--ledger`), with the directory on the volume the
engine keeps its counters in when the pod's launch names one (SGLang and vLLM measured: their
`PROMETHEUS_MULTIPROC_DIR`; llama.cpp, ComfyUI and Ollama measured: the counts keeper's
`FRUTEBOX_COUNTS_DIR`, read on the keeper's `/metrics`): those carry on across restarts and
pods. Counters in an engine's
memory reset when its container starts, so the view sums each pod's increases between samples
and says how many restarts lost what was served since the sample before. `frutebox usage
--record` only samples: the `usage.yml` workflow runs it hourly. Reading is bounded (one pod
listing and one billing call on the API quota, each pod's counters on the proxy, 5 s each, in
parallel) and `status` never waits on it.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from frutebox_infra.commands.status import StatusError, live_pod, runpod_client
from frutebox_infra.deploy.contract import OWNER_ENV
from frutebox_infra.deploy.requests import gated_models
from frutebox_infra.planner.plan import FleetPlan
from frutebox_infra.plumbing.errors import UsageError
from frutebox_infra.plumbing.times import parse_time, time_or_none
from frutebox_infra.recipes.base import COUNTERS_ENV, VOLUME_PATH
from frutebox_infra.recipes.counts import COMFYUI_COUNTER, COUNTS_ENV, KEEPER_PATH, OLLAMA_COUNTERS
from frutebox_infra.stack.endpoints import Endpoint
from frutebox_infra.views.status_view import LivePod, Recorded
from frutebox_infra.views.usage import BilledHour, CounterSample, UsageView, compute_usage

if TYPE_CHECKING:
    from frutebox_infra.runpod.proxy import ProxyClient

AuthHeaders = Callable[[str], Mapping[str, str]]
"""Model id -> the headers its engine's counters are read with (none by default)."""

READ_TIMEOUT_S = 5.0
MAX_READING_PODS = 16
LEDGER_KEEP = timedelta(days=35)
"""Samples older than the longest `--since` (30 days) and a margin are dropped on write."""
COUNTERS = {
    "ollama": (KEEPER_PATH, OLLAMA_COUNTERS[0], OLLAMA_COUNTERS[1]),
    "sglang": ("/metrics", "sglang:generation_tokens_total", None),
    "vllm": ("/metrics", "vllm:generation_tokens_total", None),
    "llamacpp": (
        "/metrics",
        "llamacpp:tokens_predicted_total",
        "llamacpp:tokens_predicted_seconds_total",
    ),
}
"""Engine -> (path, output-token counter, decode-seconds counter or None); Ollama's are the
counts keeper's, which counts what its answers carry."""


def no_auth(model_id: str) -> Mapping[str, str]:
    return {}


def keyed_for_gateways(plan: FleetPlan, serving_key: str) -> AuthHeaders:
    """The stack's `serving_key` for a model whose pod runs the gateway (its counters are
    forwarded only with the key); none for an open pod, which must never be sent it."""
    gated = gated_models(plan)

    def headers(model_id: str) -> Mapping[str, str]:
        if serving_key and model_id in gated:
            return {"Authorization": f"Bearer {serving_key}"}
        return {}

    return headers


def ledger_path(stack: str, project_dir: Path) -> Path:
    return project_dir / ".frutebox" / f"usage-{stack}.jsonl"


@dataclass(frozen=True, kw_only=True)
class Target:
    """A pod of the stack to sample: its model, engine, port and the container's start."""

    pod_id: str
    model_id: str
    engine: str
    port: int
    started_at: str | None
    counter_dir: str | None = None
    """The directory on the volume the pod's engine keeps its counters in (None: memory)."""


KEPT_IN = {
    "sglang": COUNTERS_ENV,
    "vllm": COUNTERS_ENV,
    "llamacpp": COUNTS_ENV,
    "comfyui": COUNTS_ENV,
    "ollama": COUNTS_ENV,
}
"""Engine -> the pod variable naming the directory its counters are kept in outside the
engine's memory: prometheus_client's multiprocess directory (SGLang, vLLM), or the counts
keeper's (llama.cpp, ComfyUI, Ollama: recipes/counts.py)."""


def counter_dir(engine: str, env: Mapping[str, str]) -> str | None:
    """Where the live pod's counters are kept across restarts: the directory its environment
    names (`KEPT_IN`), when that lies on the volume (one in the container's own disk is gone
    with it)."""
    name = KEPT_IN.get(engine)
    path = env.get(name) if name else None
    if not path:
        return None
    return path if path.startswith(VOLUME_PATH.rstrip("/") + "/") else None


# ---- the ledger ------------------------------------------------------------------------------


def _sample_data(s: CounterSample) -> dict[str, Any]:
    return {
        "at": s.at.isoformat(),
        "podId": s.pod_id,
        "model": s.model_id,
        "startedAt": s.started_at,
        "outputTokens": s.output_tokens,
        "decodeSeconds": s.decode_seconds,
        "prompts": s.prompts,
        "uncounted": s.uncounted,
        "counterDir": s.counter_dir,
    }


def _number(row: Mapping[str, Any], key: str) -> float | None:
    value = row.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key} must be a number")
    return float(value)


def _text(row: Mapping[str, Any], key: str) -> str | None:
    value = row.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string")
    return value


def read_ledger(path: Path) -> list[CounterSample]:
    """Every sample in the ledger; a line that is not one is a clear error (file, line, fix)."""
    if not path.exists():
        return []
    samples = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            at = datetime.fromisoformat(str(row["at"]))
            samples.append(
                CounterSample(
                    at=at if at.tzinfo else at.replace(tzinfo=UTC),
                    pod_id=str(row["podId"]),
                    model_id=str(row["model"]),
                    started_at=row.get("startedAt"),
                    output_tokens=_number(row, "outputTokens"),
                    decode_seconds=_number(row, "decodeSeconds"),
                    prompts=_number(row, "prompts"),
                    uncounted=_number(row, "uncounted"),
                    counter_dir=_text(row, "counterDir"),
                )
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise UsageError(
                f"{path}:{number}: not a usage sample ({exc}). Fix: delete that line (the ledger"
                " is only ever appended to by `frutebox usage`)"
            ) from None
    return samples


def write_ledger(path: Path, samples: Sequence[CounterSample], now: datetime) -> None:
    """The ledger with `samples` added and those older than LEDGER_KEEP dropped."""
    kept = [s for s in [*read_ledger(path), *samples] if s.at >= now - LEDGER_KEEP]
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(_sample_data(s)) + "\n" for s in kept)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


# ---- reading counters ------------------------------------------------------------------------


def prometheus_value(text: str, name: str) -> float | None:
    """The sum of a metric's samples (over its labels) in Prometheus text, or None if absent."""
    total, found = 0.0, False
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        if head.split("{", 1)[0].strip() != name:
            continue
        with contextlib.suppress(ValueError):
            total += float(value)
            found = True
    return total if found else None


def targets(plan: FleetPlan, recorded: Recorded, live: Sequence[LivePod]) -> list[Target]:
    """The stack's recorded pods that are RUNNING and whose engine keeps counters; none on a
    private stack, whose pods publish no port to read them on."""
    if plan.private:
        return []
    by_id = {p.id: p for p in live}
    plans = {m.model_id: m for m in plan.models}
    found = []
    for model_id, pod in recorded.pods.items():
        model_plan = plans.get(model_id)
        live_pod_ = by_id.get(pod.pod_id)
        if model_plan is None or model_plan.placement is None or live_pod_ is None:
            continue
        if live_pod_.status != "RUNNING":
            continue
        engine = str(model_plan.placement.recipe.runtime)
        if engine not in COUNTERS and engine != "comfyui":
            continue
        kept_in = counter_dir(engine, live_pod_.env)
        if engine == "ollama" and kept_in is None:
            continue  # no counts keeper in front of it: nothing counts
        found.append(
            Target(
                pod_id=pod.pod_id,
                model_id=model_id,
                engine=engine,
                port=model_plan.placement.pod.port,
                started_at=live_pod_.started_at.isoformat() if live_pod_.started_at else None,
                counter_dir=kept_in,
            )
        )
    return found


def read_counters(
    proxy: ProxyClient, target: Target, at: datetime, auth_headers: AuthHeaders
) -> CounterSample | None:
    """One pod's counters now, or None when they could not be read."""
    headers = auth_headers(target.model_id)
    base = proxy.url(target.pod_id, target.port)
    read: dict[str, float | None] | None
    if target.engine == "comfyui":
        prompts = (_kept_prompts if target.counter_dir else _history_prompts)(proxy, base, headers)
        read = {"prompts": prompts} if prompts is not None else None
    else:
        read = _token_counters(proxy, base, headers, target.engine)
    if read is None:
        return None
    return CounterSample(
        at=at,
        pod_id=target.pod_id,
        model_id=target.model_id,
        started_at=target.started_at,
        counter_dir=target.counter_dir,
        **read,
    )


def _kept_prompts(proxy: ProxyClient, base: str, headers: Mapping[str, str]) -> float | None:
    """The counts keeper's count of ComfyUI prompts executed, every container start's summed."""
    answer = proxy.get_text(base + KEEPER_PATH, headers)
    if answer is None or answer[0] != 200:
        return None
    return prometheus_value(answer[1], COMFYUI_COUNTER)


def _history_prompts(proxy: ProxyClient, base: str, headers: Mapping[str, str]) -> float | None:
    """The prompts in ComfyUI's history, which lives in its memory."""
    answer = proxy.get_text(base + "/history", headers)
    if answer is None or answer[0] != 200:
        return None
    try:
        history = json.loads(answer[1])
    except ValueError:
        return None
    return float(len(history)) if isinstance(history, dict) else None


def _token_counters(
    proxy: ProxyClient, base: str, headers: Mapping[str, str], engine: str
) -> dict[str, float | None] | None:
    """An LLM engine's output tokens and, where it counts them, decode seconds."""
    path, tokens, seconds = COUNTERS[engine]
    answer = proxy.get_text(base + path, headers)
    if answer is None or answer[0] != 200:
        return None
    output = prometheus_value(answer[1], tokens)
    if output is None:
        return None
    decode = prometheus_value(answer[1], seconds) if seconds else None
    read: dict[str, float | None] = {"output_tokens": output, "decode_seconds": decode}
    if engine == "ollama":
        read["uncounted"] = prometheus_value(answer[1], OLLAMA_COUNTERS[2])
    return read


def sample(
    found: Sequence[Target], endpoint: Endpoint, at: datetime, auth_headers: AuthHeaders
) -> list[CounterSample]:
    """Every target's counters, read in parallel through the proxy."""
    from frutebox_infra.runpod.proxy import ProxyClient

    if not found:
        return []
    proxy = ProxyClient(template=endpoint.proxy_template, timeout_s=READ_TIMEOUT_S)
    try:
        with ThreadPoolExecutor(max_workers=min(MAX_READING_PODS, len(found))) as pool:
            read = pool.map(lambda t: read_counters(proxy, t, at, auth_headers), found)
            return [s for s in read if s is not None]
    finally:
        proxy.close()


# ---- the command -----------------------------------------------------------------------------


def owners_of(
    recorded: Recorded, ledger: Sequence[CounterSample], live: Sequence[LivePod]
) -> dict[str, str]:
    """Pod id -> model for every pod provably this stack's: the state's, the ledger's (pods
    since replaced or terminated), and live pods named like a recorded pod that carry the
    stack's ownership token."""
    owners = {s.pod_id: s.model_id for s in ledger}
    names = {p.name: p.model_id for p in recorded.pods.values() if p.name}
    for pod in live:
        model = names.get(pod.name)
        if model and recorded.owner and pod.env.get(OWNER_ENV) == recorded.owner:
            owners[pod.id] = model
    owners.update({p.pod_id: p.model_id for p in recorded.pods.values() if p.pod_id})
    return owners


def collect_usage(
    plan: FleetPlan,
    recorded: Recorded,
    endpoint: Endpoint,
    *,
    hours: int,
    ledger: Path,
    now: datetime,
    take_sample: bool = True,
    record_only: bool = False,
    auth_headers: AuthHeaders = no_auth,
) -> UsageView | int:
    """Sample the counters into the ledger, then (unless `record_only`: the count of samples
    taken) read billing and compute the view."""
    from frutebox_infra.runpod.errors import RunPodError

    try:
        with contextlib.closing(runpod_client(endpoint, command="frutebox usage")) as client:
            live = [live_pod(p) for p in client.list_pods()]
            taken = (
                sample(targets(plan, recorded, live), endpoint, now, auth_headers)
                if take_sample
                else []
            )
            if taken:
                write_ledger(ledger, taken, now)
            if record_only:
                return len(taken)
            records = client.pod_billing(bucket="hour", last=hours)
    except RunPodError as exc:
        raise StatusError(str(exc)) from exc
    billed = []
    for r in records:
        start = time_or_none(r.start_time)
        if start is not None:
            billed.append(BilledHour(pod_id=r.pod_id, start=start, usd=r.total_amount))
    samples = read_ledger(ledger)
    end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    return compute_usage(
        plan=plan,
        hours=hours,
        end=end,
        billed=billed,
        samples=samples,
        owners=owners_of(recorded, samples, live),
    )


def usage_now(text: str | None) -> datetime:
    """`--now` or FRUTEBOX_NOW (RFC 3339), else the system clock."""
    value = text or os.environ.get("FRUTEBOX_NOW")
    if not value:
        return datetime.now(UTC)
    try:
        return parse_time(value)
    except ValueError:
        raise UsageError(
            f"--now/FRUTEBOX_NOW {value!r} is not a time. Fix: an RFC 3339 time, e.g."
            " 2026-12-03T18:00:00Z"
        ) from None


# ---- the estimate learns ---------------------------------------------------------------------

MEASURED_HEADER = (
    "\n# The fleet's own decode measurements, written by `frutebox usage --learn` (newest"
    " last):\n# a plan of the same model, engine, GPU type and count decodes at this rate.\n"
    "measured:\n"
)


def learned_rows(view: UsageView, plan: FleetPlan, today: str) -> list[dict[str, Any]]:
    """A measured row per model whose engine reported its decode time, with provenance."""
    rows = []
    plans = {m.model_id: m for m in plan.models}
    for m in view.models:
        model_plan = plans.get(m.model_id)
        if m.decode_tok_s_measured is None or model_plan is None or not m.pod_ids:
            continue
        placement = model_plan.placement
        if placement is None:
            continue
        rows.append(
            {
                "model": m.model_id,
                "engine": str(placement.recipe.runtime),
                "gpu": placement.gpu.id,
                "gpu_count": placement.count,
                "decode_tok_s_per_stream": round(m.decode_tok_s_measured, 2),
                "pod": m.pod_ids[-1],
                "engine_version": placement.image.tag or "untagged",
                "date": today,
                "source": f"frutebox usage --learn: {m.output_tokens or 0:.0f} output tokens"
                f" counted over {view.hours} h (estimate {m.decode_tok_s_estimate or 0:.1f})",
            }
        )
    return rows


def write_learned(registry_dir: Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Append `rows` to speed.yaml's `measured:` list (JSON flow mappings are YAML), then read
    the registry back: a registry that no longer loads is restored and the error raised."""
    from frutebox_infra.catalog.files import load_registry

    path = registry_dir / "speed.yaml"
    before = path.read_text(encoding="utf-8")
    text = before if before.endswith("\n") else before + "\n"
    if not any(line.startswith("measured:") for line in text.splitlines()):
        text += MEASURED_HEADER
    text += "".join(f"  - {json.dumps(dict(row))}\n" for row in rows)
    path.write_text(text, encoding="utf-8")
    try:
        load_registry(registry_dir)
    except Exception:
        path.write_text(before, encoding="utf-8")
        raise
    return path
