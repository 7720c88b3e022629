"""Reading and validating registry/*.yaml: the only I/O the registry needs, at the edge."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from frutebox_infra.errors import ConfigError
from frutebox_infra.paths import REGISTRY_DIR
from frutebox_infra.registry import Registry


@dataclass(frozen=True)
class RegistryFiles:
    """The YAML texts a registry is built from, keyed by file name (for I/O-free loading)."""

    texts: Mapping[str, str]


FILES = ("models.yaml", "gpus.yaml", "images.yaml", "datacenters.yaml")


def read_registry_files(directory: Path = REGISTRY_DIR) -> RegistryFiles:
    """Read the registry's YAML files; the only I/O in this module."""
    texts: dict[str, str] = {}
    for name in FILES:
        path = directory / name
        try:
            texts[name] = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"{path}: cannot read registry file ({exc.strerror}). "
                "Fix: restore it from git (`git checkout -- registry/`)."
            ) from exc
    return RegistryFiles(texts)


def parse_registry(files: RegistryFiles, *, label: str = "registry") -> Registry:
    """Validate the YAML texts into a Registry; errors name the file, the entry and the field."""
    missing = [name for name in FILES if name not in files.texts]
    if missing:
        raise ConfigError(
            f"{label}: {', '.join(missing)} missing; the stack cannot be planned without the"
            " whole registry"
        )
    docs = {name: _parse_yaml(f"{label}/{name}", text) for name, text in files.texts.items()}
    sections: dict[str, Any] = {
        key: _section(docs, file, key, label) for key, file in _SECTIONS.items() if key in _REQUIRED
    }
    sections["max_gpus_per_pod"] = docs["gpus.yaml"].get("max_gpus_per_pod", 8)
    try:
        return Registry.model_validate(sections)
    except ValidationError as exc:
        raise ConfigError(_explain(exc, sections, label)) from None


_SECTIONS = {
    "models": "models.yaml",
    "gpus": "gpus.yaml",
    "max_gpus_per_pod": "gpus.yaml",
    "images": "images.yaml",
    "data_centers": "datacenters.yaml",
    "network_volume": "datacenters.yaml",
}
"""Each top-level Registry field and the file that holds it."""
_REQUIRED = frozenset(_SECTIONS) - {"max_gpus_per_pod"}
_LISTS = ("models", "gpus", "data_centers")
"""Sections that are lists of entries with an `id`, named by it in errors."""


def load_registry(directory: Path = REGISTRY_DIR) -> Registry:
    return parse_registry(read_registry_files(directory), label=str(directory))


_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML was built with it: the same documents, ~10x faster."""


def _parse_yaml(where: str, text: str) -> dict[str, Any]:
    try:
        doc = yaml.load(text, Loader=_SAFE_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{where}:{at} is not valid YAML ({exc}). Fix the syntax.") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{where}: expected a mapping at the top level.")
    return doc


def _section(docs: Mapping[str, dict[str, Any]], file: str, key: str, label: str) -> Any:
    value = docs[file].get(key)
    if value is None:
        raise ConfigError(f"{label}/{file}: missing top-level key '{key}'.")
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
        elif head not in (*_LISTS, "images"):
            loc = loc[:1]  # a top-level key such as max_gpus_per_pod names itself
        else:
            loc = loc[1:]
        field = ".".join(str(p) for p in loc) or head
        lines.append(f"{label}/{file}:{entry} field '{field}': {err['msg']}")
    return "invalid registry:\n  " + "\n  ".join(lines)
