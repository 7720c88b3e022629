"""Engine recipes. What we can serve is exactly the set of recipes defined here."""

from __future__ import annotations

from collections.abc import Mapping

from frutebox_infra.catalog.schema import Runtime
from frutebox_infra.recipes.base import PodSpec, Recipe, ServeOptions, Serving
from frutebox_infra.recipes.comfyui import ComfyUI
from frutebox_infra.recipes.llamacpp import LlamaCpp
from frutebox_infra.recipes.ollama import Ollama
from frutebox_infra.recipes.sglang import SGLang
from frutebox_infra.recipes.vllm import VLLM

ENGINE_PREFERENCE: tuple[Recipe, ...] = (SGLang(), LlamaCpp(), Ollama(), ComfyUI(), VLLM())
"""Engines in order of preference: SGLang first, vLLM the fallback."""

RECIPES: Mapping[Runtime, Recipe] = {recipe.runtime: recipe for recipe in ENGINE_PREFERENCE}
SERVABLE_RUNTIMES: frozenset[Runtime] = frozenset(RECIPES)

__all__ = [
    "ENGINE_PREFERENCE",
    "RECIPES",
    "SERVABLE_RUNTIMES",
    "PodSpec",
    "Recipe",
    "ServeOptions",
    "Serving",
]
