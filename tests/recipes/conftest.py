"""Fixtures for the engine recipes: the real catalog and a pod built for a chosen placement."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from frutebox_infra.catalog.schema import Model, Registry, Runtime
from frutebox_infra.recipes import RECIPES, PodSpec, ServeOptions
from tests.factories import real_registry

BuildPod = Callable[..., PodSpec]


@pytest.fixture
def catalog() -> Registry:
    return real_registry()


@pytest.fixture
def build_pod(catalog: Registry) -> BuildPod:
    """`build_pod(model, runtime, gpu_id, count, seeded=False, **options)`: the recipe's pod,
    no resolver; `seeded`: reading weights a CPU pod put on the volume."""

    def build(
        model: Model | str,
        runtime: Runtime,
        gpu_id: str = "NVIDIA H200",
        count: int = 1,
        seeded: bool = False,
        **options: object,
    ) -> PodSpec:
        m = catalog.model(model) if isinstance(model, str) else model
        assert m is not None, model
        gpu = catalog.gpu(gpu_id)
        assert gpu is not None, gpu_id
        recipe = RECIPES[runtime]
        assert recipe.missing(m) is None, recipe.missing(m)
        serving = recipe.serving(m, ServeOptions(**options))  # type: ignore[arg-type]
        return recipe.pod(m, catalog.images[runtime], gpu, count, serving, seeded)

    return build
