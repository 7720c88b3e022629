"""Recorded vs live vs planned: each drift kind, ownership, foreign pods and the heal command."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

import pytest

from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.views.drift import (
    DriftKind,
    LivePod,
    LiveVolume,
    Probe,
    Recorded,
    RecordedPod,
    StatusView,
    compute_status,
    heal_command,
    is_ours,
    other_volumes,
    pod_urn,
    with_health,
)
from tests.factories import real_registry, settings

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
VOLUME = "vol123"
STACK = "s"
TOKEN = "tok12345"
MARK = {"FRUTEBOX_OWNER": TOKEN}


@cache
def plan() -> FleetPlan:
    return plan_fleet(
        real_registry(),
        settings(models=["qwen3-8b", "llama-3.2-1b"], maxFallbackPremium=2),
        stack=STACK,
    )


def live_of(model_id: str, pod_id: str, **changes: Any) -> LivePod:
    """The pod the plan would create for `model_id`, running, with `changes` applied."""
    model = plan().model(model_id)
    assert model is not None and model.placement is not None
    p = model.placement
    pod = LivePod(
        id=pod_id,
        name=f"frutebox-{STACK}-{model_id}",
        status="RUNNING",
        image=p.pod.image,
        args=p.pod.args,
        env=dict(p.pod.env),
        gpu_id=p.gpu.id,
        gpu_count=p.count,
        usd_per_hour=p.usd_per_hour,
        data_center_id="EU-RO-1",
        volume_id=VOLUME,
        started_at=NOW - timedelta(hours=2),
    )
    return replace(pod, **changes)


def recorded(pod_ids: dict[str, str]) -> Recorded:
    pods = {mid: RecordedPod(mid, f"n-{pid}", pid, "g", 1, 0.1) for mid, pid in pod_ids.items()}
    return Recorded(pods=pods, volume_id=VOLUME, volume_size_gb=20, owner=TOKEN)


IN_SYNC = [live_of("qwen3-8b", "p1"), live_of("llama-3.2-1b", "p2")]
BOTH = {"qwen3-8b": "p1", "llama-3.2-1b": "p2"}


def status(pods: list[LivePod], rec: Recorded | None = None) -> StatusView:
    volumes = [LiveVolume(VOLUME, "frutebox-s-weights", 20, "EU-RO-1", "STANDARD")]
    return compute_status(
        plan(), rec or recorded(BOTH), pods, volumes, now=NOW, billed_usd={24: 1.5}
    )


def drift_of(view: StatusView) -> dict[str, DriftKind | None]:
    return {m.model_id: m.drift for m in view.models}


@pytest.mark.parametrize(
    ("pods", "expected", "detail"),
    [
        pytest.param(IN_SYNC, None, "", id="in-sync"),
        pytest.param(IN_SYNC[1:], DriftKind.MISSING, "gone from RunPod", id="terminated"),
        pytest.param(
            [live_of("qwen3-8b", "p1", status="TERMINATED"), IN_SYNC[1]],
            DriftKind.MISSING,
            "gone from RunPod",
            id="shown-terminated",
        ),
        pytest.param(
            [live_of("qwen3-8b", "p1", status="EXITED"), IN_SYNC[1]],
            DriftKind.STOPPED,
            "EXITED",
            id="stopped",
        ),
        pytest.param(
            [live_of("qwen3-8b", "p1", status="ERROR"), IN_SYNC[1]],
            DriftKind.STOPPED,
            "ERROR",
            id="crashed",
        ),
        pytest.param(
            [live_of("qwen3-8b", "p1", image="ollama/ollama:latest"), IN_SYNC[1]],
            DriftKind.CHANGED,
            "image",
            id="image-edited",
        ),
        pytest.param(
            [live_of("qwen3-8b", "p1", args="serve --verbose"), IN_SYNC[1]],
            DriftKind.CHANGED,
            "args",
            id="args-edited",
        ),
        pytest.param(
            [live_of("qwen3-8b", "p1", env={"OLLAMA_DEBUG": "1"}), IN_SYNC[1]],
            DriftKind.CHANGED,
            "env",
            id="env-edited",
        ),
        pytest.param(
            [live_of("qwen3-8b", "p1", gpu_id="NVIDIA H200", gpu_count=8), IN_SYNC[1]],
            DriftKind.CHANGED,
            "not a planned placement",
            id="gpu-edited",
        ),
        pytest.param(
            [live_of("qwen3-8b", "p1", data_center_id="US-TX-3"), IN_SYNC[1]],
            DriftKind.CHANGED,
            "data centre",
            id="moved",
        ),
    ],
)
def test_each_drift_kind_of_a_recorded_pod(
    pods: list[LivePod], expected: DriftKind | None, detail: str
) -> None:
    view = status(pods)
    qwen = next(m for m in view.models if m.model_id == "qwen3-8b")
    assert qwen.drift == expected
    assert detail in "; ".join(qwen.details)
    assert drift_of(view)["llama-3.2-1b"] is None
    assert view.drifted == (expected is not None)


def test_a_fallback_placement_and_ownership_env_are_not_drift() -> None:
    model = plan().model("qwen3-8b")
    assert model is not None and model.fallbacks
    fallback = model.fallbacks[0]
    pod = live_of(
        "qwen3-8b",
        "p1",
        gpu_id=fallback.gpu.id,
        gpu_count=fallback.count,
        args=fallback.pod.args,
        env={**fallback.pod.env, "FRUTEBOX_OWNER": "tok12345"},
    )
    assert drift_of(status([pod, IN_SYNC[1]]))["qwen3-8b"] is None


def test_secret_env_filled_at_deploy_is_not_drift() -> None:
    model = plan().model("qwen3-8b")
    assert model is not None and model.placement is not None
    secret = {k: "hf_x" for k in model.placement.pod.secret_env}
    pod = live_of("qwen3-8b", "p1", env={**model.placement.pod.env, **secret})
    assert drift_of(status([pod, IN_SYNC[1]]))["qwen3-8b"] is None


def test_untracked_and_foreign_pods() -> None:
    ours = live_of("qwen3-8b", "stray", env=MARK)  # token and volume: ours, but not recorded
    unmarked = live_of("qwen3-8b", "unmarked")  # our volume, no token: not provably ours
    other_stack = live_of("qwen3-8b", "other", env={"FRUTEBOX_OWNER": "their-tok"})
    elsewhere = live_of("qwen3-8b", "elsewhere", env=MARK, volume_id="theirs")
    stranger = live_of("qwen3-8b", "x", name="someone-else", volume_id=None)
    view = status([*IN_SYNC, ours, unmarked, other_stack, elsewhere, stranger])
    assert [p.id for p in view.untracked] == ["stray"]
    assert [p.id for p in view.foreign] == ["unmarked", "other", "elsewhere"]
    assert view.drifted
    assert view.heal == "frutebox status --stack s --terminate-untracked"


def test_a_foreign_pod_alone_is_not_drift() -> None:
    foreign = live_of("qwen3-8b", "foreign", volume_id="theirs")
    view = status([*IN_SYNC, foreign])
    assert not view.drifted and view.heal is None and [p.id for p in view.foreign] == ["foreign"]


def pod_with(env: dict[str, str] | None = None, volume_id: str | None = None) -> LivePod:
    return LivePod("a", "n", "RUNNING", env=env or {}, volume_id=volume_id)


@pytest.mark.parametrize(
    ("pod", "owner", "volume_id", "ours"),
    [
        pytest.param(pod_with(MARK, "v"), TOKEN, "v", True, id="token-and-volume"),
        pytest.param(pod_with(MARK, "w"), TOKEN, "v", False, id="token-other-volume"),
        pytest.param(pod_with({}, "v"), TOKEN, "v", False, id="volume-no-token"),
        pytest.param(pod_with({"FRUTEBOX_OWNER": "t2"}, "v"), TOKEN, "v", False, id="other-token"),
        pytest.param(pod_with({}, "v"), None, "v", True, id="no-token-recorded-volume-proves"),
        pytest.param(pod_with({}, "w"), None, "v", False, id="no-token-other-volume"),
        pytest.param(pod_with(MARK), TOKEN, None, True, id="token-only"),
        pytest.param(pod_with(MARK, "v"), None, None, False, id="nothing-known"),
    ],
)
def test_is_ours(pod: LivePod, owner: str | None, volume_id: str | None, ours: bool) -> None:
    assert is_ours(pod, owner, volume_id) is ours


def test_heal_replaces_every_drifted_pod_in_one_up() -> None:
    pods = [live_of("llama-3.2-1b", "p2", status="EXITED")]
    view = status(pods)
    assert drift_of(view) == {"qwen3-8b": DriftKind.MISSING, "llama-3.2-1b": DriftKind.STOPPED}
    assert heal_command(view) == (
        f"pulumi up --stack s --yes --replace '{pod_urn('s', 'qwen3-8b')}'"
        f" --replace '{pod_urn('s', 'llama-3.2-1b')}'"
    )
    assert pod_urn("s", "qwen3-8b") == (
        "urn:pulumi:s::frutebox-infra::frutebox:index:ModelServer$command:local:Command"
        "::qwen3-8b-pod"
    )


def test_never_deployed_and_disarmed_models() -> None:
    rec = recorded({"qwen3-8b": "p1", "old-model": "p9"})
    view = status([IN_SYNC[0], live_of("qwen3-8b", "p9", name="frutebox-s-old-model")], rec)
    kinds = drift_of(view)
    assert kinds == {
        "qwen3-8b": None,
        "llama-3.2-1b": DriftKind.MISSING,
        "old-model": DriftKind.CHANGED,
    }
    # Nothing recorded to replace: a plain `up` creates the missing pod and removes the old.
    assert view.heal == "pulumi up --stack s --yes"


def test_uptime_spend_and_volume() -> None:
    view = status(IN_SYNC)
    assert {m.uptime_s for m in view.models} == {7200.0}
    [spend] = view.spend
    assert spend.hours == 24 and spend.billed_usd == 1.5
    assert spend.planned_usd == pytest.approx(plan().usd_per_hour_best * 24)
    assert view.volume.live is not None and not view.volume.missing
    gone = compute_status(plan(), recorded(BOTH), IN_SYNC, [], now=NOW)
    assert gone.volume.missing and gone.drifted


FAILED = Probe(ok=False, probes=3, window_s=20.0, last=502, path="/api/version")
ANSWERED = Probe(ok=True, probes=2, window_s=20.0, last=200, path="/api/version")


@pytest.mark.parametrize(
    ("pods", "probe", "expected"),
    [
        pytest.param(IN_SYNC, ANSWERED, None, id="answered-within-the-window"),
        pytest.param(IN_SYNC, FAILED, DriftKind.UNHEALTHY, id="failed-the-whole-window"),
        pytest.param([live_of("qwen3-8b", "p1", image="x:1"), IN_SYNC[1]], FAILED,
                     DriftKind.CHANGED, id="another-drift-says-more"),
    ],
)  # fmt: skip
def test_a_running_pod_whose_health_fails_the_window_is_unhealthy(
    pods: list[LivePod], probe: Probe, expected: DriftKind | None
) -> None:
    view = with_health(status(pods), {"qwen3-8b": probe})
    [qwen] = [m for m in view.models if m.model_id == "qwen3-8b"]
    assert qwen.drift is expected and qwen.healthy is probe.ok
    assert view.drifted is (expected is not None)
    if expected is DriftKind.UNHEALTHY:
        assert qwen.details == (
            "pod p1 is RUNNING but /api/version failed all 3 probes over 20s (last: HTTP 502):"
            " it bills and serves nothing",
        )
        assert view.heal == f"pulumi up --stack s --yes --replace '{pod_urn(STACK, 'qwen3-8b')}'"
    # An unprobed model keeps what it had.
    [llama] = [m for m in view.models if m.model_id == "llama-3.2-1b"]
    assert llama.healthy is None and llama.drift is None


WEIGHTS = "frutebox-s-weights"


def volumes_status(*extra: LiveVolume, owner: str | None = TOKEN) -> StatusView:
    volumes = [LiveVolume(VOLUME, f"{WEIGHTS}-{TOKEN}", 20, "EU-RO-1", "STANDARD"), *extra]
    rec = replace(recorded(BOTH), owner=owner)
    return compute_status(plan(), rec, IN_SYNC, volumes, now=NOW)


def test_a_volume_named_with_our_token_that_the_state_does_not_record_is_untracked() -> None:
    duplicate = LiveVolume("vol999", f"{WEIGHTS}-{TOKEN}", 1001, "EU-RO-1", "STANDARD")
    view = volumes_status(duplicate)
    assert view.untracked_volumes == (duplicate,) and view.drifted
    assert view.untracked_volumes_usd_per_month == pytest.approx(1000 * 0.07 + 1 * 0.05)
    assert view.heal == "frutebox status --stack s --terminate-untracked"


@pytest.mark.parametrize(
    "volume",
    [
        pytest.param(LiveVolume("v1", WEIGHTS, 500, "EU-RO-1"), id="our-name-without-a-token"),
        pytest.param(LiveVolume("v2", f"{WEIGHTS}-0123456789abcdef", 500, "EU-RO-1"),
                     id="another-stacks-token"),
    ],
)
def test_a_volume_named_like_ours_without_our_token_is_foreign_and_no_drift(
    volume: LiveVolume,
) -> None:
    view = volumes_status(volume)
    assert view.foreign_volumes == (volume,) and view.untracked_volumes == ()
    assert not view.drifted


def test_without_a_recorded_token_no_volume_is_provably_ours() -> None:
    duplicate = LiveVolume("vol999", f"{WEIGHTS}-{TOKEN}", 100, "EU-RO-1")
    view = volumes_status(duplicate, owner=None)
    assert view.untracked_volumes == () and view.foreign_volumes == (duplicate,)


def test_other_volumes_leave_volumes_of_other_names_out() -> None:
    rec = recorded(BOTH)
    elsewhere = [LiveVolume("x", "frutebox-s-weightsfoo", 10, "EU-RO-1"),
                 LiveVolume("y", "frutebox-prod-weights", 10, "EU-RO-1")]  # fmt: skip
    assert other_volumes(STACK, rec, elsewhere) == ((), ())


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param(DriftKind.MISSING, id="missing"),
        pytest.param(DriftKind.STOPPED, id="stopped"),
        pytest.param(DriftKind.CHANGED, id="changed"),
        pytest.param(DriftKind.UNHEALTHY, id="unhealthy"),
    ],
)
def test_each_drift_of_a_recorded_planned_pod_heals_by_replacing_it(kind: DriftKind) -> None:
    view = status(IN_SYNC)
    first = replace(view.models[0], drift=kind)
    drifted = replace(view, models=(first, *view.models[1:]))
    assert heal_command(drifted) == f"pulumi up --stack s --yes --replace '{first.urn}'"
