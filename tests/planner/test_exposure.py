"""Who can reach each model: every launch of every catalog model, on every placement and
fallback, co-located or not, seeded or not, starts the gateway in front of its engine on
loopback (from its launch script, or from the start hook the seeding pod puts on the volume,
and then an unseeded one refuses to plan, naming why); only a registry without a gateway
release plans a model open, with the reason, and the plan warns about it."""

from __future__ import annotations

import shlex

import pytest

from frutebox_infra.catalog.schema import Runtime
from frutebox_infra.planner.launches import pod_specs
from frutebox_infra.planner.plan import FleetPlan, plan_fleet
from frutebox_infra.recipes.gateway import (
    CONFIG_ENV,
    HOOK_ROOT,
    KEY_ENV,
    LOOPBACK,
    caddyfile,
    engine_port,
    starts_gateway,
)
from frutebox_infra.recipes.vllm import ENGINE_CONFIG
from frutebox_infra.stack.environment import Environment
from tests.factories import real_registry, server_words, settings, words

HOST_FLAG = {
    Runtime.SGLANG: "--host",
    Runtime.COMFYUI: "--listen",
    Runtime.VLLM: "--host",
    Runtime.LLAMACPP: "--host",
    Runtime.OLLAMA: "OLLAMA_HOST",  # Ollama's server binds where this variable says
}
"""The flag that binds each gateway engine's server (checked against its engine_options)."""


def catalog_plan(*, colocate: bool, seeding: bool) -> FleetPlan:
    """Every catalog model armed at once (problems such as the budget stop nothing here: each
    model's placements and launches are still planned)."""
    registry = real_registry()
    config = settings(models=[m.id for m in registry.models], budgetUsdPerHour=10_000,
                      colocate=colocate, seeding=seeding)  # fmt: skip
    return plan_fleet(registry, config, stack="every", environment=Environment(hf_token=True))


@pytest.mark.parametrize("seeding", [True, False], ids=["seeded", "unseeded"])
@pytest.mark.parametrize("colocate", [False, True], ids=["alone", "colocated"])
def test_every_launch_starts_the_gateway_with_its_engine_on_loopback(
    colocate: bool, seeding: bool
) -> None:
    plan = catalog_plan(colocate=colocate, seeding=seeding)
    registry = real_registry()
    checked = {True: 0, False: 0}
    hooked: set[str] = set()
    open_engines: set[Runtime] = set()
    for pod in plan.pods:
        anchor, members = plan.members(pod)
        exposure = anchor.resolution.exposure
        image = anchor.resolution.image
        assert exposure is not None and image is not None
        specs = pod_specs(anchor.candidates, [m.candidates for m in members])
        assert len(specs) == len(anchor.candidates) >= 1
        for spec in specs:
            launch = words(spec.args)
            checked[exposure.keyed] += 1
            assert spec.port == image.port  # the published port: the gateway's, or the engine's
            runtime = anchor.resolution.recipe.runtime if anchor.resolution.recipe else None
            if not exposure.keyed:
                assert not starts_gateway(launch) and not spec.serving_key_env
                assert spec.start_hook is None and "PYTHONPATH" not in spec.env
                assert exposure.reason
                assert runtime is not None
                open_engines.add(runtime)
                continue
            assert runtime in HOST_FLAG, runtime
            server = server_words(spec.args)
            if spec.start_hook is not None:
                # An ENTRYPOINT that runs the image's Python: it runs the hook the seeding pod
                # put on the volume, and then the engine reads the file only the hook writes
                # (vLLM), or the hook execs the server (llama.cpp's dispatcher).
                hook = spec.start_hook
                hooked.add(anchor.model_id)
                assert not starts_gateway(launch)
                assert hook.directory.startswith(HOOK_ROOT + "/")
                assert spec.env["PYTHONPATH"] == hook.directory
                assert " start --config " not in hook.text  # the words are a list there
                assert '"start", "--config", config, "--adapter", "caddyfile"' in hook.text
                if hook.execs is not None:
                    assert image.dispatch is not None and hook.execs == image.dispatch.server_path
                    assert launch[0] == image.dispatch.python_word and launch == server
                    assert hook.text.index("caddyfile") < hook.text.index("_os.execv(")
                else:
                    assert launch == server
                    assert server[server.index("--config") + 1] == ENGINE_CONFIG
                    assert hook.engine_config == ENGINE_CONFIG
                    assert hook.text.index("caddyfile") < hook.text.index('engine_config_text"])')
            else:
                assert starts_gateway(launch)
            host = HOST_FLAG[runtime]
            if host.startswith("--"):
                assert server[server.index(host) + 1] == LOOPBACK
                assert server[server.index("--port") + 1] == str(engine_port(image.port))
            else:
                assert spec.env[host] == f"{LOOPBACK}:{engine_port(image.port)}"
            assert spec.serving_key_env == (KEY_ENV,) and KEY_ENV not in spec.env
            routes = registry.engine_routes[runtime]
            assert spec.env[CONFIG_ENV] == caddyfile(
                routes, port=image.port, upstream_port=engine_port(image.port)
            )
            if spec.start_hook is not None:
                continue
            script = launch[2]
            # The gateway starts (or the script exits) before the engine's exec.
            assert script.index(" start --config ") < script.rindex("\nexec ")
            assert "|| exit 1" in script.split(" start --config ")[1].splitlines()[0]
    # Every engine of the catalog is behind the gateway: none is open.
    assert checked[True] and not checked[False], checked
    assert {Runtime.VLLM, Runtime.LLAMACPP} <= {
        m.resolution.recipe.runtime
        for m in plan.models
        if m.model_id in hooked and m.resolution.recipe
    }, hooked
    assert open_engines == set(), open_engines
    # A hooked model that is not seeded refuses to plan, naming why; a seeded one does not.
    refused = {p.message.split(":")[0] for p in plan.problems if p.rule == "gateway-needs-seeding"}
    assert refused == (set() if seeding else hooked), refused
    # Every open model is named in a warning with its reason; no keyed one is.
    for m in plan.models:
        exposure = m.resolution.exposure
        if m.placement is None or exposure is None:
            continue
        named = [w for w in plan.warnings if w.startswith(f"{m.model_id}: anyone")]
        assert bool(named) != exposure.keyed, (m.model_id, named)
        if named:
            assert exposure.reason in named[0]


def test_without_a_gateway_release_a_gateway_engine_is_planned_open_naming_the_fix() -> None:
    from dataclasses import replace

    registry = replace(real_registry(), gateway=None)
    plan = plan_fleet(registry, settings(models=["sdxl-1.0"]), stack="s")
    m = plan.model("sdxl-1.0")
    assert m is not None and m.placement is not None
    exposure = m.resolution.exposure
    assert exposure is not None and not exposure.keyed
    assert "registry/images.yaml `gateway`" in exposure.reason
    assert "--listen 0.0.0.0" in shlex.join(server_words(m.placement.pod.args))
    assert any(w.startswith("sdxl-1.0: anyone") for w in plan.warnings)
