"""A stack file read the way Pulumi reads it, for `plan`, `diff` and the Pulumi program alike.

Pulumi namespaces a key without a prefix as the project's (`models` is
`frutebox-infra:models`, and so is `frutebox-infra:config:models`), applies the defaults and
types of Pulumi.yaml's `config:` schema (a string key takes any scalar as text; an integer key
a whole number or its digits as text; a boolean key only true/false or "true"/"false"), and
keeps `secure:` values encrypted. We apply the same rules, and refuse what Pulumi would read
but no user means (a budget of `true`, an encrypted budget we cannot read without the
passphrase, a token in plain text). The program reads the stack file through this module too,
so `frutebox plan`, `frutebox diff` and `pulumi preview` cannot disagree about it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from frutebox_infra.plumbing.errors import ConfigError, UsageError, printable, shown
from frutebox_infra.plumbing.input_cache import SETTINGS_CACHE_DIR, cache_key, load, store
from frutebox_infra.plumbing.paths import STACKS_DIR
from frutebox_infra.plumbing.validation import message as validation_message
from frutebox_infra.plumbing.validation import validate
from frutebox_infra.plumbing.yaml_text import MAX_INT_DIGITS, decode_utf8, load_yaml
from frutebox_infra.stack.settings import (
    OVERRIDE_FIXES,
    OVERRIDE_UNITS,
    PROJECT,
    SECRET_KEYS,
    STACK_KEYS,
    StackKey,
    StackSettings,
)

if TYPE_CHECKING:
    from pydantic import ValidationError

_TOP_LEVEL = ("config", "secretsprovider", "encryptedkey", "encryptionsalt")
"""What a stack file may hold besides config: the secrets provider Pulumi writes there."""
_PULUMI_INT = re.compile(rf"[-+]?[0-9]{{1,{MAX_INT_DIGITS}}}")
"""Digits Go's strconv.Atoi takes, which is what Pulumi checks an integer key's text with."""
_DECIMAL = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]{1,3})?")


def stack_file_name(stack: str) -> str:
    """Pulumi's own naming, inside the project's stackConfigDir."""
    return f"Pulumi.{stack}.yaml"


def stack_file(stack: str, directory: Path = STACKS_DIR) -> Path:
    return directory / stack_file_name(stack)


def read_stack_config(path: Path) -> dict[str, Any]:
    """The project's keys from a stack file, prefix stripped; secure values kept opaque."""
    return stack_config_from_text(_read_text(path), where=str(path))


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(
            f"{path}: cannot read the stack file ({exc.strerror}). Fix: create it, or pick a"
            f" stack that exists ({', '.join(sorted(_stacks(path.parent))) or 'none found'})."
        ) from None
    return decode_utf8(data, str(path))


def stack_config_from_text(text: str, *, where: str) -> dict[str, Any]:
    """The `frutebox-infra:` keys of a stack file's text, namespaced as Pulumi does."""
    doc = load_yaml(text, where)
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ConfigError(
            f"{where}: expected a mapping with a `config:` key, found {_kind(doc)}. Fix: start"
            f" the file with `config:` and put `{PROJECT}:<key>: <value>` lines under it."
        )
    for key, value in doc.items():
        if key == "environment":
            raise ConfigError(
                f"{where}: key 'environment': Pulumi ESC environments are not read by"
                " `frutebox plan` or `frutebox diff`, so they could not show what preview"
                " deploys. Fix: write the values under `config:` instead."
            )
        if key not in _TOP_LEVEL:
            raise ConfigError(
                f"{where}: unknown top-level key '{key}'. Fix: move it under `config:` (as"
                f" `{PROJECT}:{key}`), or remove it; a stack file holds"
                f" {', '.join(_TOP_LEVEL)}."
            )
        if key != "config" and not isinstance(value, str):
            raise ConfigError(
                f"{where}: key '{key}' must be text written by Pulumi. Fix: restore it with"
                " `git checkout` or re-create the stack's secrets provider."
            )
    config = doc.get("config")
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise ConfigError(
            f"{where}: key 'config' must be a mapping of '{PROJECT}:<key>' to values, found"
            f" {_kind(config)}. Fix: write one `{PROJECT}:<key>: <value>` line per key under it."
        )
    out: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for raw, value in config.items():
        namespace, name = _parse_key(raw, where)
        if namespace != PROJECT:
            continue  # another package's config (a provider's, `pulumi:tags`): not ours
        if name in out:
            raise ConfigError(
                f"{where}: key '{PROJECT}:{name}' is set twice (as '{spelled[name]}' and"
                f" '{raw}'), and Pulumi would take either. Fix: keep one of them."
            )
        out[name], spelled[name] = value, raw
    return out


def _parse_key(raw: str, where: str) -> tuple[str, str]:
    """Pulumi's config key forms: `name` (the project's), `ns:name`, `ns:config:name`."""
    parts = raw.split(":")
    if len(parts) == 1:
        namespace, name = PROJECT, raw
    elif len(parts) == 2:
        namespace, name = parts
    elif len(parts) == 3 and parts[1] == "config":
        namespace, name = parts[0], parts[2]
    else:
        namespace = name = ""
    if not namespace or not name:
        raise ConfigError(
            f"{where}: config key '{raw}' is not a Pulumi config key. Fix: write it as"
            f" '{PROJECT}:<key>', e.g. '{PROJECT}:models'."
        )
    return namespace, name


def load_settings(path: Path, *, cache: Path | None = SETTINGS_CACHE_DIR) -> StackSettings:
    """The stack file's settings. Settings that validated before, from the same text and the
    same code, are read back from `cache` (registry_cache.py), with neither YAML nor
    pydantic; None validates every time."""
    text = _read_text(path)
    where = str(path)
    return _cached(
        {"stack file": text},
        lambda: parse_settings(stack_config_from_text(text, where=where), where=where),
        cache,
    )


def _cached(
    texts: Mapping[str, str], validated: Callable[[], StackSettings], cache: Path | None
) -> StackSettings:
    if cache is None:
        return validated()
    key = cache_key(texts)
    settings = load(cache, key, StackSettings)
    if settings is None:
        settings = validated()
        store(cache, key, settings)
    return settings


def parse_settings(config: Mapping[str, Any], *, where: str) -> StackSettings:
    """Validate a stack's `frutebox-infra:`-stripped config; errors name file, key and fix."""
    errors: list[str] = []
    values: dict[str, Any] = {}
    hf_token = False
    for name, value in config.items():
        label = f"{where}: key '{PROJECT}:{name}'"
        if name in SECRET_KEYS:
            if _secure(value):
                hf_token = hf_token or name == "hfToken"
            else:
                errors.append(
                    f"{label} is a secret stored in plain text, where anyone who reads the"
                    f" repository sees it. Fix: remove the line and run `pulumi config set"
                    f" --secret {PROJECT}:{name} <value>`."
                )
            continue
        key = STACK_KEYS.get(name)
        if key is None:
            known = ", ".join([*STACK_KEYS, *SECRET_KEYS])
            errors.append(f"{label} is not a setting of this project. Fix: remove it, or use"
                          f" one of: {known}.")  # fmt: skip
        elif _secure(value):
            errors.append(
                f"{label} is encrypted, but it is no secret, and `frutebox plan` and `diff`"
                f" read the stack without its passphrase. Fix: `pulumi config set"
                f" {PROJECT}:{name} <value>` (without --secret)."
            )
        elif value is None:
            errors.append(f"{label} has no value. Fix: {key.fix}, or remove the line.")
        else:
            try:
                values[name] = _coerce(key, value)
            except ValueError as exc:
                errors.append(f"{label} = {shown(value)}: {exc}. Fix: {key.fix}.")
    for key in STACK_KEYS.values():
        if key.required and key.name not in config:
            errors.append(
                f"{where}: key '{PROJECT}:{key.name}' is missing, and Pulumi requires it"
                f" ({key.description}). Fix: add `{PROJECT}:{key.name}: ...`, {key.fix}."
            )
    if not errors:
        values["hfTokenConfigured"] = hf_token
        from pydantic import ValidationError  # the edge: only a stack not seen before

        try:
            return validate(StackSettings, values)
        except ValidationError as exc:
            errors.extend(_explain(exc, where))
    raise ConfigError("\n".join(errors))


def _coerce(key: StackKey, value: Any) -> Any:
    """The value Pulumi's typed config allows for `key`, as the model's type; else why not."""
    kind = key.pulumi_type
    if kind == "array":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError("must be a list of text (Pulumi type array<string>)")
        return tuple(value)
    if kind == "object":
        if not isinstance(value, dict):
            raise ValueError("must be a mapping (Pulumi type object)")
        return value
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        if value in ("true", "false"):
            return value == "true"
        raise ValueError("must be true or false (Pulumi type boolean)")
    decimal = key.decimal
    if isinstance(value, bool | list | dict):
        wanted = "a whole number" if kind == "integer" else "a number" if decimal else "text"
        raise ValueError(f"must be {wanted}, not {_kind(value)}")
    if kind == "integer":
        if isinstance(value, int):
            return value
        if isinstance(value, str) and _PULUMI_INT.fullmatch(value):
            return int(value)
        raise ValueError("must be a whole number, without a decimal point (Pulumi type integer)")
    if decimal:
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, str) and _DECIMAL.fullmatch(value):
            return float(value)
        raise ValueError("must be a decimal number")
    if not isinstance(value, str):
        raise ValueError("must be text; quote it")
    return value


def _explain(exc: ValidationError, where: str) -> list[str]:
    lines = []
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        key = _key_at(loc[0]) if loc else None
        if key is not None:
            loc[0] = key.name  # a default checked against another key is located by field
        path = ".".join(printable(p) for p in loc)
        if key is not None and key.name == "overrides" and len(loc) >= 2:
            if len(loc) == 2:
                fix = "give the model a mapping such as {context: 16384}"
            elif err["type"] == "unexpected_keyword_argument":
                fix = f"use only {', '.join(OVERRIDE_FIXES)}"
            else:
                fix = OVERRIDE_FIXES.get(loc[2], key.fix)
        else:
            fix = key.fix if key else "see Pulumi.yaml"
        unit = key.unit if key and len(loc) == 1 else _override_unit(loc)
        message = validation_message(err)
        if unit and re.search(r"\d$", message):
            message += f" {unit}"
        value = f" = {shown(err['input'])}" if err["type"] != "missing" else ""
        lines.append(f"{where}: key '{PROJECT}:{path}'{value}: {message}. Fix: {fix}.")
    return lines


def _key_at(name: str) -> StackKey | None:
    return STACK_KEYS.get(name) or next((k for k in STACK_KEYS.values() if k.field == name), None)


def _override_unit(loc: list[str]) -> str:
    return OVERRIDE_UNITS.get(loc[-1], "") if len(loc) == 3 else ""


def _secure(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"secure"} and isinstance(value["secure"], str)


_KINDS = {
    list: "a list",
    dict: "a mapping",
    str: "text",
    int: "a number",
    float: "a number",
    bool: "true/false",
}


def _kind(value: Any) -> str:
    return _KINDS.get(type(value), "nothing")


def _stacks(directory: Path) -> list[str]:
    return [p.name[len("Pulumi.") : -len(".yaml")] for p in directory.glob("Pulumi.*.yaml")]


def check_pulumi_agrees(
    settings: StackSettings,
    texts: Mapping[str, str],
    *,
    where: str,
    cache: Path | None = SETTINGS_CACHE_DIR,
) -> None:
    """Fail when the config Pulumi hands the program is not what the stack file says.

    `texts` are the project's keys as the engine passes them (prefix stripped; every value
    text, structured values JSON, defaults from Pulumi.yaml filled in). They differ from the
    file only when config comes from elsewhere (an ESC environment, `--config-file`), which
    `frutebox plan` and `diff` cannot see: so that is refused rather than deployed unseen.
    """
    decoded: dict[str, Any] = {}
    for name, text in texts.items():
        key = STACK_KEYS.get(name)
        if key is None:
            continue  # secrets, and keys the stack file itself was checked for
        decoded[name] = _from_pulumi_text(key, text)
    passed = json.dumps(decoded, sort_keys=True)
    try:
        seen = _cached(
            {"pulumi config": passed},
            lambda: parse_settings(decoded, where=f"{where} (as Pulumi passed it)"),
            cache,
        )
    except ConfigError as exc:
        raise ConfigError(
            f"{exc}\nThe config Pulumi passed differs from {where}, which is all `frutebox"
            " plan` and `diff` read. Fix: set these keys in that file only."
        ) from None
    differ = [
        key.name
        for key in STACK_KEYS.values()
        if getattr(seen, key.field) != getattr(settings, key.field)
    ]
    if differ:
        raise ConfigError(
            f"{where}: Pulumi passed other values than the stack file holds for"
            f" {', '.join(f'{PROJECT}:{n}' for n in differ)} (from an ESC environment or"
            " `--config-file`?), and `frutebox plan` and `diff` read only the file. Fix: set"
            " them in the stack file and nowhere else."
        )


def _from_pulumi_text(key: StackKey, text: str) -> Any:
    """A value as the engine passes it (text, JSON for arrays and objects), typed back."""
    if key.pulumi_type in ("array", "object"):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text
    return text
