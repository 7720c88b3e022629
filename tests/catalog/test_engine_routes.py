"""Engine routes (registry/routes.yaml): read for the pinned images, one health route each,
every dangerous route named and refused, and a broken entry named with file, engine and fix."""

from __future__ import annotations

import pytest

from frutebox_infra.catalog.engine_routes import RouteUse
from frutebox_infra.catalog.files import RegistryFiles, parse_registry
from frutebox_infra.catalog.schema import Runtime
from frutebox_infra.plumbing.errors import ConfigError
from tests.factories import real_files, real_registry


def test_every_pinned_engine_has_routes_read_for_its_image() -> None:
    reg = real_registry()
    assert set(reg.engine_routes) == set(reg.images)
    for runtime, image in reg.images.items():
        routes = reg.engine_routes[runtime]
        assert routes.image == image.reference, f"routes.yaml {runtime} was read for {routes.image}"
        assert routes.source


def test_the_health_route_is_the_images_health_path_and_is_forwarded() -> None:
    reg = real_registry()
    for runtime, image in reg.images.items():
        routes = reg.engine_routes[runtime]
        health = [r.path for r in routes.routes if r.use is RouteUse.HEALTH]
        assert health == [image.health_path], runtime
        assert routes.forwards("GET", image.health_path)


@pytest.mark.parametrize(
    ("runtime", "method", "path"),
    [
        pytest.param(Runtime.OLLAMA, "POST", "/api/pull", id="ollama-pull"),
        pytest.param(Runtime.OLLAMA, "DELETE", "/api/delete", id="ollama-delete"),
        pytest.param(Runtime.OLLAMA, "POST", "/api/create", id="ollama-create"),
        pytest.param(Runtime.VLLM, "POST", "/invocations", id="vllm-invocations"),
        pytest.param(Runtime.VLLM, "POST", "/update_weights", id="vllm-update-weights"),
        pytest.param(Runtime.VLLM, "POST", "/pause", id="vllm-pause"),
        pytest.param(Runtime.SGLANG, "POST", "/flush_cache", id="sglang-flush"),
        pytest.param(Runtime.LLAMACPP, "POST", "/slots/0", id="llamacpp-slot-save"),
        pytest.param(Runtime.COMFYUI, "POST", "/customnode/install", id="comfyui-node-install"),
        pytest.param(Runtime.COMFYUI, "POST", "/free", id="comfyui-free"),
    ],
)
def test_the_routes_the_issue_names_are_listed_and_never_forwarded(
    runtime: Runtime, method: str, path: str
) -> None:
    routes = real_registry().engine_routes[runtime]
    route = routes.route(method, path)
    assert route is not None and route.use is RouteUse.REFUSED and route.why
    assert not routes.forwards(method, path)


@pytest.mark.parametrize("runtime", [Runtime.SGLANG, Runtime.VLLM, Runtime.LLAMACPP], ids=str)
def test_the_counters_are_forwarded_with_the_key_for_usage_to_read(runtime: Runtime) -> None:
    """They reveal the traffic, so the engines' own keys leaving them open is not enough: the
    gateway forwards them only with the stack's key, which `frutebox usage` holds."""
    routes = real_registry().engine_routes[runtime]
    route = routes.route("GET", "/metrics")
    assert route is not None and route.use is RouteUse.METRICS
    assert routes.forwards("GET", "/metrics")


def test_deny_by_default_a_path_nobody_listed_is_not_forwarded() -> None:
    for routes in real_registry().engine_routes.values():
        assert not routes.forwards("GET", "/no/such/route")
        assert not routes.forwards("DELETE", "/v1/chat/completions")


def test_a_wildcard_covers_what_is_below_the_prefix_never_the_prefix_itself() -> None:
    ollama = real_registry().engine_routes[Runtime.OLLAMA]
    assert ollama.forwards("GET", "/v1/models/qwen3:8b")
    assert ollama.forwards("GET", "/v1/models")  # listed on its own
    comfy = real_registry().engine_routes[Runtime.COMFYUI]
    assert comfy.forwards("GET", "/history/abc") and not comfy.forwards("GET", "/history/")


def with_routes(text: str) -> RegistryFiles:
    return RegistryFiles(texts={**real_files().texts, "routes.yaml": text})


@pytest.mark.parametrize(
    ("old", "new", "says"),
    [
        pytest.param("path: /api/pull,", "path: /api/*/pull,", "wildcard", id="wildcard-inside"),
        pytest.param(
            '{path: /api/pull, methods: [POST], use: refused, why: "downloads any model onto'
            " the pod's volume\"}",
            "{path: /api/pull, methods: [POST], use: refused}",
            "needs `why`",
            id="refused-without-why",
        ),
        pytest.param("use: health}", "use: healthy}", "use", id="unknown-use"),
    ],
)
def test_a_broken_routes_file_names_file_engine_and_fix(old: str, new: str, says: str) -> None:
    text = real_files().texts["routes.yaml"]
    assert old in text
    with pytest.raises(ConfigError) as err:
        parse_registry(with_routes(text.replace(old, new, 1)), cache=None)
    message = str(err.value)
    assert "routes.yaml" in message and "engine '" in message and says in message
    assert "Fix:" in message
