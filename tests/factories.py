"""Builders for small synthetic registries and stacks, and the real catalog loaded once.

Tests build just the GPUs and models a rule needs, so a change to the real catalog cannot make
a rule's test pass or fail by accident; tests about the real catalog use `real_registry()`.
Also the checkout's root, stack-file text, and the diff command the preview workflow runs.
"""

from __future__ import annotations

import ast
import shlex
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from frutebox_infra.catalog.engine_options import EngineOptions
from frutebox_infra.catalog.files import (
    RegistryFiles,
    load_registry,
    read_registry_files,
)
from frutebox_infra.catalog.schema import (
    Architecture,
    DataCenter,
    Gpu,
    Image,
    Model,
    Price,
    Registry,
    Runtime,
)
from frutebox_infra.catalog.speed_facts import GpuSpeed, SpeedFacts
from frutebox_infra.emulator.catalog import Catalog
from frutebox_infra.emulator.hub import Hub
from frutebox_infra.emulator.openapi import OpenApi
from frutebox_infra.plumbing.paths import REGISTRY_DIR, REPO_ROOT
from frutebox_infra.plumbing.validation import validate
from frutebox_infra.stack.settings import PROJECT, StackSettings
from frutebox_infra.stack.stack_file import parse_settings

if TYPE_CHECKING:
    from frutebox_infra.planner.plan import FleetPlan

ROOT = REPO_ROOT
PREVIEW_WORKFLOW = ROOT / ".github" / "workflows" / "preview.yml"
OPENAPI_CANDIDATES = (
    ROOT.parent / "shared" / "runpod" / "openapi-v2.json",
    ROOT / "frutebox_infra" / "emulator" / "openapi-v2.json",
)

GB = 10**9
GIB = 2**30
MIB = 2**20

SECRET_SIG = "4dabf18193072939515e22adb298388d"
SECRET_SIG_VALUE = "1b47061264138c4ac30d75fd1eb44270"
"""Pulumi's wire form of a secret: {SECRET_SIG: SECRET_SIG_VALUE, ...}."""


@cache
def real_registry() -> Registry:
    """The checked-in catalog, parsed once per test session."""
    return load_registry(REGISTRY_DIR)


@cache
def real_files() -> RegistryFiles:
    return read_registry_files(REGISTRY_DIR)


@cache
def emulator_parts() -> tuple[Catalog, Hub, OpenApi]:
    """What every emulator of a session reads and none changes, built once: the registry's
    catalog (frozen), its hub (each account works on a deep copy) and the API document's
    schemas, whose validators compile on first use."""
    return Catalog.from_registry(real_registry()), Hub.from_registry(real_registry()), OpenApi()


def files_with(**replacements: str) -> RegistryFiles:
    """The real registry texts with some files replaced, e.g. `files_with(models="models: []")`."""
    texts = dict(real_files().texts)
    for stem, text in replacements.items():
        texts[f"{stem}.yaml"] = text
    return RegistryFiles(texts=texts)


def real_gpu(name: str) -> Gpu:
    gpu = real_registry().gpu(name)
    assert gpu is not None, name
    return gpu


def gpu(
    gpu_id: str = "TEST GPU",
    *,
    vram_gb: int = 80,
    memory_mib: int | None = None,
    fp8: bool = True,
    secure: float | None = 1.0,
    community: float | None = None,
    max_count: int = 8,
) -> Gpu:
    """A GPU type; `memory_mib` defaults to exactly `vram_gb` GiB."""
    return Gpu(
        id=gpu_id,
        name=gpu_id,
        vram_gb=vram_gb,
        memory_mib=memory_mib if memory_mib is not None else vram_gb * 1024,
        fp8=fp8,
        max_count=max_count,
        price_usd_per_hour=Price(secure=secure, community=community, source="test"),
    )


def speedy_gpu(
    gpu_id: str,
    bandwidth_gb_s: float,
    *,
    usd: float,
    vram_gb: int = 80,
    link: str = "nvlink",
    tflops: float = 400,
    max_count: int = 8,
) -> Gpu:
    """A GPU type with datasheet speed figures, so the speed model can estimate on it."""
    speed = validate(GpuSpeed, {
            "memory_bandwidth_gb_s": bandwidth_gb_s,
            "bf16_dense_tflops": tflops,
            "fp8_dense_tflops": 2 * tflops,
            "interconnect": {"kind": link, "generation": 4, "gb_s_per_direction": 64},
            "datasheet": "test",
        })
    plain = gpu(gpu_id, vram_gb=vram_gb, secure=usd, max_count=max_count)
    return replace(plain, speed=speed)


def gqa(
    layers: int = 32,
    heads: int = 32,
    kv_heads: int = 8,
    head_dim: int = 128,
    *,
    moe: bool = False,
) -> Architecture:
    return Architecture(
        attention="gqa",
        layers=layers,
        attention_heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        moe=moe,
        source="test",
    )


def kimi_k2_mla(*, moe: bool = True) -> Architecture:
    """Kimi K2's multi-head latent attention: 61 layers of a 512 latent and a 64 RoPE head."""
    return Architecture(
        attention="mla",
        layers=61,
        attention_heads=64,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        moe=moe,
        source="Kimi-K2 config.json",
    )


def model(model_id: str = "test-model", **fields: Any) -> Model:
    """A catalog entry; only `id`, `name` and `capability` are filled in unless given."""
    data: dict[str, Any] = {"id": model_id, "name": model_id, "capability": "chat"}
    data.update(fields)
    return validate(Model, data)


def sglang_model(
    model_id: str = "test-sglang", *, vram_gb: float = 20.0, fmt: str = "bf16", **fields: Any
) -> Model:
    """A model only SGLang serves, with weights and context; architecture unknown by default."""
    data: dict[str, Any] = {
        "runtimes": ["sglang"],
        "source": {"hf_repo": f"org/{model_id}", "revision": "0" * 40},
        "weights": {"format": fmt, "disk_gb": vram_gb, "vram_gb": vram_gb},
        "context": 8192,
    }
    data.update(fields)
    return model(model_id, **data)


def vllm_model(model_id: str = "test-vllm", *, vram_gb: float = 10.0, **fields: Any) -> Model:
    """A model only vLLM serves, otherwise as `sglang_model` makes it."""
    return sglang_model(model_id, vram_gb=vram_gb, runtimes=["vllm"], **fields)


def ollama_model(
    model_id: str = "test-ollama",
    *,
    vram_gb: float = 2.0,
    disk_gb: float | None = None,
    **fields: Any,
) -> Model:
    data: dict[str, Any] = {
        "runtimes": ["ollama"],
        "source": {"ollama_tag": f"{model_id.replace('-', '')}:1b"},
        "weights": {"format": "gguf", "disk_gb": disk_gb or vram_gb, "vram_gb": vram_gb},
        "context": 4096,
    }
    data.update(fields)
    return model(model_id, **data)


def real_images() -> dict[Runtime, Image]:
    return dict(real_registry().images)


def registry(
    models: Iterable[Model] = (),
    gpus: Iterable[Gpu] | None = None,
    *,
    images: Mapping[Runtime, Image] | None = None,
    data_centers: Sequence[str] = ("EU-RO-1",),
    max_gpus_per_pod: int = 8,
    engine_options: Mapping[Runtime, EngineOptions] | None = None,
    speed: SpeedFacts | None = None,
) -> Registry:
    """A registry of exactly these models and GPUs, with the real (pinned) engine images; no
    engine facts (so no launch check) and no speed calibration (so no speed estimate) unless
    given, e.g. `real_registry().engine_options`, `real_registry().speed`."""
    return Registry(
        models=tuple(models),
        gpus=tuple(gpus) if gpus is not None else (gpu(),),
        images=dict(images) if images is not None else real_images(),
        data_centers=tuple(DataCenter(id=d, name=d) for d in data_centers),
        network_volume=real_registry().network_volume,
        max_gpus_per_pod=max_gpus_per_pod,
        engine_options=dict(engine_options or {}),
        speed=speed,
    )


def rules(fleet: FleetPlan) -> list[str]:
    """The rule of each of a plan's problems, in order."""
    return [p.rule for p in fleet.problems]


def settings(**config: Any) -> StackSettings:
    """Stack settings from camelCase config keys, with a data centre and a budget by default."""
    values: dict[str, Any] = {"dataCenter": "EU-RO-1", "budgetUsdPerHour": 1000}
    values.update(config)
    return parse_settings(values, where="stacks/Pulumi.test.yaml")


def stack_yaml(config: Mapping[str, Any]) -> str:
    """A stack file's text: `config` keys (camelCase) under the project's namespace, in order."""
    doc = {"config": {f"{PROJECT}:{k}": v for k, v in config.items()}}
    return yaml.safe_dump(doc, sort_keys=False)


def workflow_diff_command() -> str:
    """The `frutebox_infra diff` command of preview.yml's diff step, without its redirection."""
    doc = yaml.safe_load(PREVIEW_WORKFLOW.read_text())
    steps = doc["jobs"]["preview"]["steps"]
    script: str = next(s["run"] for s in steps if "frutebox_infra diff" in s.get("run", ""))
    line = next(x for x in script.splitlines() if "python -m frutebox_infra diff" in x)
    return line.split(" > ", 1)[0].strip()


def words(args: str) -> list[str]:
    """An args string split as a shell would split it."""
    return shlex.split(args)


def server_words(args: str) -> list[str]:
    """The words of the server a launch runs: a launch script's last `exec` line (a gateway
    first), else the args themselves."""
    split = words(args)
    if split[:2] == ["bash", "-c"] and len(split) == 3:
        execs = [ln[5:] for ln in split[2].splitlines() if ln.startswith("exec ")]
        if execs:
            return shlex.split(execs[-1])
    return split


def flag(args: str | list[str], name: str) -> str:
    """The value following `name` in an args string (exactly one occurrence)."""
    split = server_words(args) if isinstance(args, str) else args
    assert split.count(name) == 1, f"{name} occurs {split.count(name)} times in {split}"
    return split[split.index(name) + 1]


def openapi_path() -> Path:
    for path in OPENAPI_CANDIDATES:
        if path.is_file():
            return path
    raise FileNotFoundError(f"RunPod OpenAPI document not found in {OPENAPI_CANDIDATES}")


def imported_packages(modules: Sequence[str], packages: Sequence[str]) -> list[str]:
    """Which modules of `packages` importing `modules` pulls in, in a fresh interpreter."""
    code = (
        f"import sys, {', '.join(modules)};"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {tuple(packages)!r}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    found: list[str] = ast.literal_eval(done.stdout.strip())
    return found
