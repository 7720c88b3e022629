"""Would the pinned engine accept this launch? Every flag, value, variable and health path
checked against what its image's sources say it takes (registry/engine_options/), so a pod
that would exit at start and crash-loop while billing is a plan problem instead.

Pure: the launch (args, env, health path) and the engine's facts in, refusals out. Names are
matched exactly: argparse would also take an unambiguous prefix (`--tp` for `--tp-size`), but
the next release can add a flag that makes the prefix ambiguous, so a prefix is refused with
the full spelling as its fix.
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

from frutebox_infra.catalog.engine_options import (
    EngineFlag,
    EngineOptions,
    JsonField,
)
from frutebox_infra.catalog.schema import Dispatch

FACTS_FILE = "registry/engine_options/{engine}.json"


@dataclass(frozen=True, kw_only=True)
class Refusal:
    """One thing the engine would refuse: what, what it accepts instead, and the fix."""

    what: str
    accepts: str
    fix: str


@dataclass(frozen=True, kw_only=True)
class Launch:
    """A pod's launch as the planner emits it."""

    args: str
    env: Mapping[str, str]
    health_path: str
    secret_env: tuple[str, ...] = ()
    """Variables the deploy step fills in at create time (the Hugging Face token)."""
    words: tuple[str, ...] = ()
    """The words `args` joins, where known (empty: `args` is split into them)."""
    hook_source: str = ""
    """The start hook the image's Python runs at every start (recipes/gateway.py), or ""."""
    hook_execs: str | None = None
    """The server that start hook execs in the interpreter's place, if it does."""


HOOK_PATH_ENV = "PYTHONPATH"
"""Read by the image's Python interpreter itself (CPython's `site` then imports the start hook
from it): a variable of the image's, not the engine's, accepted where a hook is delivered."""


class LaunchFields(Protocol):
    """What the check reads of a launch: a `Launch`, or a pod spec, which carries the same."""

    @property
    def args(self) -> str: ...
    @property
    def env(self) -> Mapping[str, str]: ...
    @property
    def health_path(self) -> str: ...
    @property
    def secret_env(self) -> tuple[str, ...]: ...
    @property
    def words(self) -> tuple[str, ...]: ...
    @property
    def hook_source(self) -> str: ...
    @property
    def hook_execs(self) -> str | None: ...


def check_launch(
    launch: LaunchFields, facts: EngineOptions, *, entrypoint: str, dispatch: Dispatch | None = None
) -> tuple[Refusal, ...]:
    """Every refusal the engine behind `facts` would give this launch; empty when it takes it.

    `entrypoint` is the image's (registry/images.yaml): `none` means `args` is the whole
    command line, `fixed-binary` that it is the arguments of the image's program. The
    launch's `words`, where it has them, are what splitting its `args` would give (a recipe's
    args are its words joined by `shlex.join`), so they are read as they are. Where the
    ENTRYPOINT is a `dispatch`er, the first word must pick the server, or the image's Python
    when the pod's start hook execs the server from it.
    """
    if launch.words:
        words = list(launch.words)
    else:
        try:
            words = shlex.split(launch.args)
        except ValueError as exc:
            why = f"args cannot be split into words ({exc})"
            return (Refusal(what=why, accepts="shell words", fix="quote it"),)
    script = ""
    if entrypoint == "none":
        words, script, problem = _server_words(words, facts)
        if problem is not None:
            return (problem,)
    elif dispatch is not None:
        words, problem = _dispatched(words, dispatch, launch.hook_execs)
        if problem is not None:
            return (problem,)
    if facts.subcommands is not None:
        refusals = list(_subcommand(words, facts))
    else:
        refusals = list(_arguments(words, facts))
    env = _environment(launch, facts, script + launch.hook_source)
    if env:
        refusals += env
    if launch.health_path != facts.health_path:
        refusals.append(
            Refusal(
                what=f"health path {launch.health_path}",
                accepts=f"{facts.health_path} ({facts.health_source})",
                fix=f"set images.{facts.engine}.health_path to {facts.health_path} in"
                " registry/images.yaml",
            )
        )
    return tuple(refusals) if refusals else ()


def _server_words(words: list[str], facts: EngineOptions) -> tuple[list[str], str, Refusal | None]:
    """The words after the server's command, and the launch script ("" without one).

    A `bash -c SCRIPT` launch (ComfyUI's install-then-serve) is read at the line that execs the
    server; the variables it may set are those the script itself expands or reads.
    """
    script = ""
    if len(words) >= 3 and words[0] in ("bash", "sh") and words[1] == "-c":
        script = words[2]
        server = _last_exec(script)
        if server is None:
            return (
                [],
                script,
                Refusal(
                    what="a launch script that never execs the server",
                    accepts=f"a last line `exec {facts.command} ...`",
                    fix="end the recipe's script with an exec of the server",
                ),
            )
        words = shlex.split(server)
    program, path, rest = facts.server_command
    after = len(rest) + 1
    for i, word in enumerate(words):
        if (word == program or word.endswith(path)) and words[i + 1 : i + after] == rest:
            return words[i + after :], script, None
    return (
        [],
        script,
        Refusal(
            what=f"command `{shlex.join(words[:4])}`",
            accepts=f"`{facts.command}` followed by its flags",
            fix=f"start the server as `{facts.command} ...` in the recipe",
        ),
    )


def _dispatched(
    words: list[str], dispatch: Dispatch, hook_execs: str | None
) -> tuple[list[str], Refusal | None]:
    """The server's words after the dispatcher's first one, or why the dispatcher would not
    start the server: a word it does not know (it prints its usage and exits), or its Python
    word without a start hook that execs the server (the Python program would refuse them)."""
    first = words[0] if words else ""
    if first == dispatch.server_word:
        return words[1:], None
    if first == dispatch.python_word and hook_execs == dispatch.server_path:
        return words[1:], None
    return [], Refusal(
        what=f"args starting `{shlex.join(words[:2])}`",
        accepts=f"`{dispatch.server_word}` followed by the server's flags, or"
        f" `{dispatch.python_word}` with a start hook that execs {dispatch.server_path}"
        f" ({dispatch.source})",
        fix="start the launch with the dispatcher's server word in the recipe",
    )


def _last_exec(script: str) -> str | None:
    """What follows `exec` on the last line of `script` that starts with it (the server's
    command line), or None."""
    execs = [line.strip()[5:] for line in script.splitlines() if line.strip().startswith("exec ")]
    return execs[-1] if execs else None


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _script_reads(script: str, name: str) -> bool:
    """Whether `script` expands `name` (`$NAME`, `${NAME`) or reads it (`environ.get("NAME")`).
    Asked for the one name a launch sets that its engine does not read, rather than listing
    every name the script reads."""
    if name not in script or _NAME.fullmatch(name) is None:
        return False
    return (
        _expands(script, name)
        or re.search(rf"""environ\.get\(\s*["']{name}["']""", script) is not None
    )


_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def _expands(script: str, name: str) -> bool:
    """Whether `script` has `$NAME` or `${NAME` with no name character after it."""
    for lead in ("$" + name, "${" + name):
        at = script.find(lead)
        while at >= 0:
            end = at + len(lead)
            if end == len(script) or script[end] not in _NAME_CHARS:
                return True
            at = script.find(lead, end)
    return False


def _subcommand(words: list[str], facts: EngineOptions) -> Iterator[Refusal]:
    known = facts.subcommands or ()
    if len(words) != 1 or words[0] not in known:
        yield Refusal(
            what=f"args `{shlex.join(words)}`",
            accepts=f"one sub-command of {facts.command}: {', '.join(known)}",
            fix=f"pass exactly `{known[0]}`" if known else "pass no args",
        )


def _arguments(words: list[str], facts: EngineOptions) -> Iterator[Refusal]:
    positionals = 0
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not _is_option(word):
            positionals += 1
            if positionals > facts.positionals:
                yield Refusal(
                    what=f"argument `{word}`",
                    accepts=f"{facts.positionals} positional argument(s), then flags",
                    fix=f"remove `{word}`, or give it the flag it belongs to",
                )
            continue
        name, inline = word.split("=", 1) if word.startswith("--") and "=" in word else (word, None)
        name = _canonical(name, facts)
        flag = facts.flag_index.get(name)
        if flag is None and "." in name and facts.underscores_as_dashes:
            base = facts.flag_index.get(name.split(".", 1)[0])  # vLLM's --x-config.key value
            flag = base if base is not None and base.type == "json" else None
            if flag is not None:
                i += 0 if inline is not None else 1
                continue
        if flag is None:
            yield _unknown_flag(name, facts)
            i += 0 if inline is not None or i >= len(words) or _is_option(words[i]) else 1
            continue
        values, i = _take_values(flag, inline, words, i)
        yield from _check_values(name, flag, values, facts)


def _is_option(word: str) -> bool:
    # A negative number is a value; only a digit after the dash can start one.
    return (
        word.startswith("-")
        and len(word) > 1
        and not (word[1].isdigit() and _NUMBER.fullmatch(word))
    )


_NUMBER = re.compile(r"-\d+(\.\d+)?")
"""A negative number, which argparse takes as a value rather than an option."""


def _canonical(name: str, facts: EngineOptions) -> str:
    if facts.underscores_as_dashes and name.startswith("--"):
        head, dot, tail = name[2:].partition(".")
        return "--" + head.replace("_", "-") + dot + tail
    return name


def _take_values(
    flag: EngineFlag, inline: str | None, words: list[str], i: int
) -> tuple[list[str] | None, int]:
    """The values argparse would give the flag, and where parsing goes on; None: missing."""
    if flag.type == "flag":
        return ([inline] if inline is not None else []), i
    if inline is not None:
        return [inline], i
    nargs = flag.nargs
    if nargs is None or nargs.isdigit():
        count = int(nargs) if nargs else 1
        taken = words[i : i + count]
        if len(taken) < count:
            return None, i
        for word in taken:
            if _is_option(word):
                return None, i
        return taken, i + count
    taken = []
    while i < len(words) and not _is_option(words[i]):
        taken.append(words[i])
        i += 1
        if nargs == "?":
            break
    if nargs == "+" and not taken:
        return None, i
    return taken, i


def _check_values(
    name: str, flag: EngineFlag, values: list[str] | None, facts: EngineOptions
) -> Iterator[Refusal]:
    if values is None:
        yield Refusal(
            what=f"flag {name} without its value",
            accepts=f"{name} {_kind(flag)}",
            fix=f"give {name} a value, or drop it",
        )
        return
    if flag.type == "flag":
        if values:
            yield Refusal(
                what=f"{name}={values[0]}",
                accepts=f"{name} alone (a switch that takes no value)",
                fix=f"write {name} without a value",
            )
        return
    for value in values:
        problem = _value_problem(flag.type, flag.choices, flag.case_insensitive, value)
        if problem is not None:
            yield Refusal(
                what=f"{name} {value}",
                accepts=f"{name} {problem}",
                fix=_choice_fix(name, flag, value),
            )
        elif flag.json_fields is not None:
            yield from _json_fields(name, value, flag.json_fields)


def _value_problem(
    kind: str, choices: Iterable[str] | None, case_insensitive: bool, value: str
) -> str | None:
    """Why `value` is not one the flag takes (phrased as what it takes), or None."""
    if kind == "int" and not _INTEGER.fullmatch(value):
        return "takes a whole number"
    if kind == "float":
        try:
            float(value)
        except ValueError:
            return "takes a number"
    if kind == "json":
        try:
            json.loads(value)
        except ValueError:
            return "takes a JSON document"
    if choices is not None:
        options = tuple(choices)
        if case_insensitive:
            wanted = value.upper()
            taken = any(c.upper() == wanted for c in options)
        else:
            taken = value in options
        if not taken:
            return f"takes one of {', '.join(options)}"
    return None


_INTEGER = re.compile(r"[-+]?\d+")
"""An integer as Python's `int` and Go's strconv read one."""


def _json_fields(name: str, value: str, fields: Mapping[str, JsonField]) -> Iterator[Refusal]:
    document = json.loads(value)
    if not isinstance(document, dict):
        yield Refusal(
            what=f"{name} {value}", accepts=f"{name} takes a JSON object", fix="pass a JSON object"
        )
        return
    for key, item in document.items():
        field = fields.get(key)
        if field is None:
            yield Refusal(
                what=f"{name} key '{key}'",
                accepts=f"the keys {', '.join(sorted(fields))}",
                fix=f"remove '{key}' from {name}, or use the key it means",
            )
            continue
        text = _json_text(item, field.type)
        problem = _value_problem(field.type, field.choices, field.case_insensitive, text)
        if field.type == "flag" and not isinstance(item, bool):
            problem = "takes true or false"
        if problem is not None:
            yield Refusal(
                what=f"{name} {key}={json.dumps(item)}",
                accepts=f"{key} {problem}",
                fix=f"set {key} in {name} to a value it takes",
            )


def _json_text(item: object, kind: str) -> str:
    if kind == "json":
        return json.dumps(item)
    return str(item) if not isinstance(item, bool) else str(item).lower()


def _unknown_flag(name: str, facts: EngineOptions) -> Refusal:
    known = list(facts.flag_index)
    expands = [k for k in known if k.startswith(name) and k != name]
    if name.startswith("--") and len(expands) == 1:
        return Refusal(
            what=f"flag {name}",
            accepts=f"{expands[0]} (argparse takes {name} only as an abbreviation, which a"
            " flag added by a later release makes ambiguous)",
            fix=f"spell it {expands[0]}",
        )

    close = difflib.get_close_matches(name, known, n=3)
    return Refusal(
        what=f"flag {name}",
        accepts=f"its flags ({', '.join(close)} are the closest)" if close else "its flags",
        fix=f"remove {name} or use the flag {facts.engine} has for it (registry/engine_options/"
        f"{facts.engine}.json lists every one)",
    )


def _kind(flag: EngineFlag) -> str:
    if flag.choices is not None:
        return "{" + ",".join(flag.choices) + "}"
    return {"int": "N", "float": "X", "json": "JSON"}.get(flag.type, "VALUE")


def _choice_fix(name: str, flag: EngineFlag, value: str) -> str:
    if flag.choices:
        close = difflib.get_close_matches(value, list(flag.choices), n=1)
        if close:
            return f"use {name} {close[0]} if that is what is meant"
    return f"give {name} a value it takes"


def _environment(launch: LaunchFields, facts: EngineOptions, script: str) -> list[Refusal]:
    env = launch.env
    refusals: list[Refusal] = []
    # In the order the launch sets them: its env, then its secret variables. A variable the
    # engine does not read, its launch's script must; a value must be of the kind it reads.
    hooked = bool(launch.hook_source)
    for name in (*env, *launch.secret_env):
        if hooked and name == HOOK_PATH_ENV:
            continue
        if name not in facts.env and not _script_reads(script, name):
            close = difflib.get_close_matches(name, list(facts.env), n=3)
            refusals.append(
                Refusal(
                    what=f"environment variable {name}",
                    accepts="the variables its components read"
                    + (f" ({', '.join(close)} are the closest)" if close else ""),
                    fix=f"remove {name} from the pod's env (no process of {facts.image} reads it),"
                    " or name the variable the engine reads",
                )
            )
            continue
        value, kind = env.get(name), facts.env_types.get(name)
        if kind is not None and value is not None and not _env_value_ok(kind, value):
            refusals.append(
                Refusal(
                    what=f"{name}={value}",
                    accepts=f"{name} takes a {kind} value",
                    fix=f"set {name} to a {kind} value",
                )
            )
    return refusals


_GO_DURATION = re.compile(r"[-+]?(\d+(\.\d*)?(ns|us|µs|ms|s|m|h))+|[-+]?\d+")
_GO_BOOL = frozenset(
    {"1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False"}
)


def _env_value_ok(kind: str, value: str) -> bool:
    """Would the engine's parser take `value`? Go's strconv/time rules for Ollama's variables."""
    if kind == "uint":
        return value.isdigit()
    if kind == "int":
        return _INTEGER.fullmatch(value) is not None
    if kind == "float":
        return _value_problem("float", None, False, value) is None
    if kind == "bool":
        return value in _GO_BOOL or value.lower() in ("on", "off", "enabled", "disabled")
    if kind == "duration":
        return _GO_DURATION.fullmatch(value) is not None
    return True
