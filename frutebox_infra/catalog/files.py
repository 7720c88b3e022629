"""Reading and validating registry/*.yaml: the only I/O the registry needs, at the edge."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from frutebox_infra.catalog.schema import Registry
from frutebox_infra.plumbing.errors import ConfigError, shown
from frutebox_infra.plumbing.input_cache import CACHE_DIR, cache_key, load, store
from frutebox_infra.plumbing.paths import REGISTRY_DIR
from frutebox_infra.plumbing.validation import message as validation_message
from frutebox_infra.plumbing.validation import validate
from frutebox_infra.plumbing.yaml_text import decode_utf8, load_yaml

if TYPE_CHECKING:
    from pydantic import ValidationError


@dataclass(frozen=True, kw_only=True)
class RegistryFiles:
    """The YAML texts a registry is built from, keyed by file name (for I/O-free loading)."""

    texts: Mapping[str, str]


FILES = (
    "models.yaml",
    "gpus.yaml",
    "images.yaml",
    "datacenters.yaml",
    "speed.yaml",
    "routes.yaml",
)
OPTIONAL_FILES = frozenset({"speed.yaml", "routes.yaml"})
"""Files a registry read at an older git ref may lack; the work tree must have every file."""

ENGINE_OPTIONS_DIR = "engine_options"
"""Per engine, what its pinned image accepts (`<engine>.json`, written by tools/engine-options).
Optional: a registry from before the facts existed (an old git ref) plans without the check."""


def is_engine_options(name: str) -> bool:
    return name.startswith(f"{ENGINE_OPTIONS_DIR}/") and name.endswith(".json")


def read_registry_files(directory: Path = REGISTRY_DIR) -> RegistryFiles:
    """Read the registry's YAML files; the only I/O in this module."""
    texts: dict[str, str] = {}
    for name in FILES:
        path = directory / name
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ConfigError(
                f"{path}: cannot read registry file ({exc.strerror}). "
                "Fix: restore it from git (`git checkout -- registry/`)."
            ) from exc
        texts[name] = decode_utf8(data, str(path))
    for path in sorted((directory / ENGINE_OPTIONS_DIR).glob("*.json")):
        name = f"{ENGINE_OPTIONS_DIR}/{path.name}"
        try:
            texts[name] = decode_utf8(path.read_bytes(), str(path))
        except OSError as exc:
            raise ConfigError(
                f"{path}: cannot read engine facts ({exc.strerror}). Fix: restore it from git"
                " (`git checkout -- registry/`)."
            ) from exc
    return RegistryFiles(texts=texts)


def parse_registry(
    files: RegistryFiles, *, label: str = "registry", cache: Path | None = CACHE_DIR
) -> Registry:
    """Validate the YAML texts into a Registry; errors name the file, the entry and the field.

    A registry that validated before, from the same texts and the same code, is read back from
    `cache` (registry_cache.py) instead; None validates every time."""
    if cache is None:
        return validate_registry(files, label=label)
    key = cache_key(files.texts)
    registry = load(cache, key, Registry)
    if registry is None:
        registry = validate_registry(files, label=label)
        store(cache, key, registry)
    return registry


def validate_registry(files: RegistryFiles, *, label: str = "registry") -> Registry:
    """parse_registry without the cache: the YAML parsed and every schema run."""
    missing = [name for name in FILES if name not in files.texts and name not in OPTIONAL_FILES]
    if missing:
        raise ConfigError(
            f"{label}: {', '.join(missing)} missing; the stack cannot be planned without the"
            " whole registry. Fix: restore it from git (`git checkout -- registry/`)."
        )
    docs = {
        name: _parse_yaml(f"{label}/{name}", text)
        for name, text in files.texts.items()
        if not is_engine_options(name)
    }
    sections: dict[str, Any] = {
        key: _section(docs, file, key, label) for key, file in _SECTIONS.items() if key in _REQUIRED
    }
    sections["max_gpus_per_pod"] = docs["gpus.yaml"].get("max_gpus_per_pod", 8)
    if "speed.yaml" in docs:
        sections["speed"] = docs["speed.yaml"]
    if "routes.yaml" in docs:
        sections["engine_routes"] = docs["routes.yaml"].get("engines")
    # Optional sections: a registry from before they existed (an old git ref) still plans.
    for key in _OPTIONAL:
        value = docs[_SECTIONS[key]].get(_KEYS.get(key, key))
        if value is not None:
            sections[key] = value
    sections["engine_options"] = _engine_options(files, label)
    from pydantic import ValidationError  # the edge: only a cache miss validates

    try:
        return validate(Registry, sections)
    except ValidationError as exc:
        raise ConfigError(_explain(exc, sections, label)) from None


_SECTIONS = {
    "models": "models.yaml",
    "gpus": "gpus.yaml",
    "max_gpus_per_pod": "gpus.yaml",
    "images": "images.yaml",
    "data_centers": "datacenters.yaml",
    "network_volume": "datacenters.yaml",
    "global_network": "datacenters.yaml",
    "speed": "speed.yaml",
    "cpu_flavors": "gpus.yaml",
    "seeder_image": "images.yaml",
    "gateway": "images.yaml",
    "engine_options": ENGINE_OPTIONS_DIR,
    "engine_routes": "routes.yaml",
}
"""Each top-level Registry field and the file that holds it."""
_KEYS = {"seeder_image": "seeder"}
"""Registry fields spelt otherwise in their file (images.yaml's `seeder:`)."""
_OPTIONAL = ("cpu_flavors", "seeder_image", "gateway", "global_network")
_REQUIRED = frozenset(_SECTIONS) - {
    "max_gpus_per_pod",
    "speed",
    "engine_options",
    "engine_routes",
    *_OPTIONAL,
}
_LISTS = ("models", "gpus", "data_centers", "cpu_flavors")
"""Sections that are lists of entries with an `id`, named by it in errors."""


def load_registry(directory: Path = REGISTRY_DIR) -> Registry:
    return parse_registry(read_registry_files(directory), label=str(directory))


def _engine_options(files: RegistryFiles, label: str) -> dict[str, Any]:
    """Each `engine_options/<engine>.json` as data, keyed by the engine its name says."""
    out: dict[str, Any] = {}
    for name, text in files.texts.items():
        if not is_engine_options(name):
            continue
        where = f"{label}/{name}"
        try:
            doc = json.loads(text, object_pairs_hook=_unique_keys)
        except (json.JSONDecodeError, ValueError) as exc:
            raise ConfigError(
                f"{where}: not valid JSON ({exc}). Fix: it is generated, so regenerate it with"
                " tools/engine-options (see its --help), or restore it from git."
            ) from None
        engine = name.removeprefix(f"{ENGINE_OPTIONS_DIR}/").removesuffix(".json")
        if not isinstance(doc, dict) or doc.get("engine") != engine:
            raise ConfigError(
                f"{where}: key 'engine' must be '{engine}', the engine the file is named for."
                " Fix: regenerate it with `tools/engine-options {engine} ...`, or rename the file."
            )
        out[engine] = doc
    return out


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) < len(pairs):
        twice = next(k for k, n in Counter(k for k, _ in pairs).items() if n > 1)
        raise ValueError(f"key {twice!r} written twice")
    return out


def _parse_yaml(where: str, text: str) -> dict[str, Any]:
    doc = load_yaml(text, where)
    if not isinstance(doc, dict):
        raise ConfigError(
            f"{where}: expected a mapping at the top level. Fix: restore it from git"
            " (`git checkout -- registry/`) and edit the entries under it."
        )
    return doc


def _section(docs: Mapping[str, dict[str, Any]], file: str, key: str, label: str) -> Any:
    value = docs[file].get(key)
    if value is None:
        raise ConfigError(
            f"{label}/{file}: missing top-level key '{key}'. Fix: restore it from git"
            " (`git checkout -- registry/`)."
        )
    return value


def _explain(exc: ValidationError, sections: Mapping[str, Any], label: str) -> str:
    lines = []
    for err in exc.errors():
        loc = list(err["loc"])
        head = str(loc[0]) if loc else "models"
        file = _SECTIONS.get(head, "models.yaml")
        entry = ""
        if head in _LISTS and len(loc) > 1 and isinstance(loc[1], int):
            items = sections.get(head) or []
            item = items[loc[1]] if loc[1] < len(items) else {}
            ident = item.get("id", f"#{loc[1] + 1}") if isinstance(item, dict) else loc[1]
            entry = f" {head[:-1].replace('_', ' ')} '{ident}'"
            loc = loc[2:]
        elif head == "images" and len(loc) > 1:
            entry = f" image '{loc[1]}'"
            loc = loc[2:]
        elif head == "engine_routes" and len(loc) > 1:
            entry = f" engine '{loc[1]}'"
            loc = loc[2:]
        elif head == "engine_options" and len(loc) > 1:
            file = f"{ENGINE_OPTIONS_DIR}/{loc[1]}.json"
            loc = loc[2:]
        elif head in _LISTS or head == "images":
            loc = loc[1:]
        # Other sections (network_volume, max_gpus_per_pod) are named by their full path.
        if loc and loc[0] in _KEYS:
            loc = [_KEYS[str(loc[0])], *loc[1:]]
        names = [str(p) for p in loc if not isinstance(p, int)]
        field = ".".join(str(p) for p in loc) or head
        message = validation_message(err).removeprefix("Value error, ")
        unit = unit_of(names[-1] if names else head)
        if unit and message[-1:].isdigit():
            message += f" {unit}"
        if unit == "GB" and err["type"] == "less_than_equal":
            message += " (a figure in MiB? 16 GB of VRAM is 16384 MiB)"
        value = "" if err["type"] in ("missing", "value_error") else f" = {shown(err['input'])}"
        fix = (
            f"regenerate {label}/{file} with tools/engine-options (it is generated, never"
            " edited), or restore it with `git checkout -- registry/`"
            if file.startswith(ENGINE_OPTIONS_DIR)
            else f"correct it in {label}/{file} (each field's meaning and unit:"
            " frutebox_infra/catalog/schema.py), or restore the file with"
            " `git checkout -- registry/`"
        )
        lines.append(f"{label}/{file}:{entry} field '{field}'{value}: {message}. Fix: {fix}.")
    return "\n".join(lines)


_UNITS = (
    ("_gb_per_vcpu", "GB per vCPU"),
    ("usd_per_vcpu_hour", "USD per vCPU-hour"),
    ("vcpu_min", "vCPUs"),
    ("vcpu_max", "vCPUs"),
    ("_mib", "MiB"),
    ("_gb", "GB"),
    ("usd_per_gb_month", "USD per GB-month"),
    ("secure", "USD per GPU-hour"),
    ("community", "USD per GPU-hour"),
    ("context", "tokens"),
    ("_bytes_per_sequence", "bytes"),
    ("_gb_s", "GB/s"),
    ("gb_s_per_direction", "GB/s"),
    ("_tflops", "TFLOPS"),
    ("_us", "µs"),
    ("_billions", "billion parameters"),
    ("gpus", "GPUs"),
    ("max_count", "GPUs"),
    ("layers", "layers"),
)


def unit_of(field: str) -> str:
    """The unit a registry field is in, from its name (units are part of our field names)."""
    return next((unit for suffix, unit in _UNITS if field.endswith(suffix)), "")
