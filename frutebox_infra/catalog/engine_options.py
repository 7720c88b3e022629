"""What a pinned engine version accepts, as registry/engine_options/<engine>.json records it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Annotated, Literal

from frutebox_infra.plumbing.validation import Check

ValueKind = Literal["flag", "int", "float", "str", "json"]
"""What an engine flag takes: nothing (a switch), a number, any text, or a JSON document."""


@dataclass(frozen=True, kw_only=True)
class JsonField:
    """One key of a JSON-valued flag (vLLM's --speculative-config): its type and choices."""

    type: ValueKind
    choices: tuple[str, ...] | None = None
    case_insensitive: bool = False
    choices_from: str | None = None


@dataclass(frozen=True, kw_only=True)
class EngineFlag:
    """One option of an engine's server: every spelling, the value it takes, its choices."""

    names: Annotated[tuple[str, ...], Check(min_length=1)]
    type: ValueKind
    nargs: Annotated[str, Check(pattern=r"^(\?|\*|\+|\d+)$")] | None = None
    """argparse's nargs: `?` an optional value, `*`/`+` a list, N exactly N values."""
    choices: tuple[str, ...] | None = None
    case_insensitive: bool = False
    choices_from: str | None = None
    """Where the choices were read (or why they could not be: then any value is taken)."""
    json_fields: dict[str, JsonField] | None = None


EnvKind = Literal["uint", "int", "float", "bool", "duration", "str"]


@dataclass(frozen=True, kw_only=True)
class EngineOptions:
    """What one pinned engine version accepts, read from its sources by tools/engine-options;
    `image` is the exact reference it was read for, so a bumped tag is caught."""

    about: str
    engine: str
    """The engine's runtime name, the same as the file's (registry/engine_options/<engine>.json)."""
    image: str
    origin: str
    read_from: tuple[str, ...]
    read_with: str
    command: str
    health_path: Annotated[str, Check(pattern=r"^/")]
    health_source: str
    positionals: Annotated[int, Check(ge=0, le=4)] = 0
    subcommands: tuple[str, ...] | None = None
    """For a program whose args are sub-commands (Ollama): the ones it has."""
    underscores_as_dashes: bool = False
    """vLLM's parser rewrites `--max_model_len` to `--max-model-len` before parsing."""
    flags: tuple[EngineFlag, ...]
    env: dict[str, str]
    """Variable -> the component (file) that reads it."""
    env_types: dict[str, EnvKind] = field(default_factory=dict)

    @cached_property
    def flag_index(self) -> Mapping[str, EngineFlag]:
        return {name: flag for flag in self.flags for name in flag.names}

    @cached_property
    def server_command(self) -> tuple[str, str, list[str]]:
        """`command` as the launch check finds it in a command line: its program, that
        program's name as the end of a path (`/python3`), and the words after it."""
        program, *rest = self.command.split()
        return program, "/" + program, rest
