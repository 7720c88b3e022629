"""Imports point downwards only: the pure core never reaches the shell, and nothing is circular.

Checked by reading every module's imports (all of them, including those inside functions),
not by importing: a lazy import that would break the rule counts as much as a top-level one.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from fnmatch import fnmatchcase
from functools import cache
from pathlib import Path

import pytest

from tests.factories import ROOT

PACKAGE = "frutebox_infra"

BASE = ("plumbing", "catalog")
MODEL = (*BASE, "estimates", "recipes", "deploy.contract", "seeding", "stack")
CORE = (*MODEL, "planner", "deploy", "views", "report")
MAY_IMPORT: dict[str, tuple[str, ...]] = {
    "__init__": (),
    "plumbing": (),
    "catalog": ("plumbing",),
    "estimates": BASE,
    "recipes": (*BASE, "estimates"),
    "deploy.contract": ("plumbing",),
    "seeding": (*BASE, "recipes", "deploy.contract"),
    "stack": (*BASE, "recipes", "seeding"),
    "planner": MODEL,
    "deploy": (*MODEL, "planner"),
    "views": (*MODEL, "planner", "deploy"),
    "report": ("plumbing", "planner", "views"),
    "seeding.seeder": (),
    "seeding.delivery": ("seeding",),
    "runpod": (*MODEL, "seeding.delivery"),
    "emulator": (*CORE, "seeding.seeder"),
    "program": (*CORE, "runpod"),
    "commands": (*CORE, "runpod", "emulator"),
    "__main__": ("commands",),
}
"""Which unit (a package, or a module named apart) may import which; a module's unit is the
longest entry it falls in, and a unit may always import itself. Bottom to top as listed."""

REPORTS_SEE = ("report", "report.*", "views", "views.*", "planner", "plumbing.*")
"""What a report may import of ours, narrower than MAY_IMPORT: itself, the views, the planner
package (whose `__init__` re-exports its result types; never a `planner.<module>`) and
plumbing. A report renders; what it shows is worked out by the planner or in a view."""

PURE_CORE = CORE
"""No pulumi, no HTTP, no subprocess: the layers that do the thinking."""

SHELL_ONLY = ("pulumi", "pulumi_command", "httpx", "jsonschema", "subprocess", "socket")
"""What the pure core must never reach, directly or through another module."""

OWNERS = {
    "pulumi": ("program.fleet",),
    "pulumi_command": ("program.fleet",),
    "httpx": ("runpod",),
}
"""Third-party imports with one home in the package."""


@cache
def modules() -> dict[str, Path]:
    """Every module of the package by dotted name, without the package prefix."""
    out = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        parts = path.relative_to(ROOT / PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts) or "__init__"] = path
    return out


def _within(name: str, entry: str) -> bool:
    return name == entry or name.startswith(entry + ".")


def unit(name: str) -> str:
    """The table entry a module falls in: the longest that matches (`seeding.seeder` over
    `seeding`)."""
    matches = [entry for entry in MAY_IMPORT if _within(name, entry)]
    if not matches:
        raise AssertionError(f"{PACKAGE}.{name} has no entry: add it to MAY_IMPORT in {__file__}")
    return max(matches, key=len)


@cache
def parsed(name: str) -> ast.Module:
    """A module's syntax tree, parsed once for every check here."""
    return ast.parse(modules()[name].read_text(encoding="utf-8"))


@cache
def imports(name: str) -> frozenset[str]:
    """What `name` imports: our modules without the package prefix, others by top-level name."""
    known = modules()
    package = name if known[name].name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(parsed(name)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            # `from pkg import sub` imports the submodule `pkg.sub` when there is one.
            targets = [f"{base}.{a.name}" if _ours(f"{base}.{a.name}") else base
                       for a in node.names]  # fmt: skip
        else:
            continue
        for target in targets:
            found.add(_ours(target) or target.split(".")[0])
    found.discard(name)
    return frozenset(found)


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    parts = [PACKAGE, *package.split(".")] if package else [PACKAGE]
    base = parts[: len(parts) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def _ours(dotted: str) -> str | None:
    """`frutebox_infra.x.y` -> `x.y` when that is a module of ours (else None)."""
    if dotted == PACKAGE:
        return "__init__"
    if not dotted.startswith(PACKAGE + "."):
        return None
    name = dotted.removeprefix(PACKAGE + ".")
    return name if name in modules() else None


def edges() -> Iterator[tuple[str, str]]:
    for name in modules():
        for target in imports(name):
            if target in modules():
                yield name, target


def reachable(name: str) -> set[str]:
    """Every module and third-party name `name` imports, directly or through our modules."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        for target in imports(todo.pop()):
            if target not in seen:
                seen.add(target)
                if target in modules():
                    todo.append(target)
    return seen


def test_every_module_has_an_entry() -> None:
    assert {name: unit(name) for name in modules()}


def test_each_unit_imports_only_what_the_table_allows() -> None:
    refused = sorted(
        f"{a} ({unit(a)}) imports {b} ({unit(b)})"
        for a, b in edges()
        if unit(b) != unit(a) and unit(b) not in MAY_IMPORT[unit(a)]
    )
    assert refused == []


def test_the_table_points_downwards_only() -> None:
    order = list(MAY_IMPORT)
    upward = [f"{a} -> {b}" for a, allowed in MAY_IMPORT.items() for b in allowed
              if order.index(b) >= order.index(a)]  # fmt: skip
    assert upward == []


def test_no_import_cycles() -> None:
    graph: dict[str, set[str]] = {}
    for a, b in edges():
        # A package's __init__ re-exports its submodules; a submodule naming its package
        # means "a sibling", which the edge to that sibling already records.
        if not _within(a, b):
            graph.setdefault(a, set()).add(b)
    cycles = [f"{a} -> ... -> {a}" for a in sorted(graph) if a in _reach(graph, a)]
    assert cycles == []


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo += graph.get(node, ())
    return seen


def test_a_package_that_re_exports_is_never_imported_by_its_own_modules() -> None:
    """The planner's `__init__` re-exports its modules' result types: a planner module that
    imported the package would run that `__init__` half-built. The cycle check above reads such
    an import as "a sibling", so it is held here."""
    re_exporting = {p for p in modules() if any(_within(m, p) and m != p for m in imports(p))}
    assert "planner" in re_exporting
    inward = sorted(f"{a} imports {b}" for a, b in edges() if b in re_exporting and _within(a, b))
    assert inward == []


def test_reports_see_views_and_the_planners_result_types_only() -> None:
    unseen = sorted(
        f"{name} imports {target}"
        for name in modules()
        if unit(name) == "report"
        for target in imports(name)
        if target in modules() and not any(fnmatchcase(target, p) for p in REPORTS_SEE)
    )
    assert unseen == []


@pytest.mark.parametrize(
    "name", [n for n in modules() if unit(n) in PURE_CORE], ids=lambda n: f"{PACKAGE}.{n}"
)
def test_the_pure_core_never_reaches_the_shell(name: str) -> None:
    reached = reachable(name)
    shell = sorted(m for m in reached if m in modules() and unit(m) not in PURE_CORE)
    assert shell == [], f"{name} reaches the shell"
    assert sorted(reached & set(SHELL_ONLY)) == []


@pytest.mark.parametrize("library", sorted(OWNERS))
def test_a_library_is_imported_only_by_its_home(library: str) -> None:
    users = sorted(n for n in modules() if library in imports(n))
    assert users, f"nobody imports {library}: update OWNERS"
    assert [u for u in users if not any(_within(u, o) for o in OWNERS[library])] == []


def test_the_walker_sees_lazy_and_relative_imports() -> None:
    """The checks above can fail: the walker finds an import hidden in a function."""
    assert "emulator.server" in imports("commands.cli") or "emulator" in reachable("commands.cli")
    assert "pulumi" in imports("program.fleet") and "httpx" in reachable("runpod")
    assert (
        "subprocess" in imports("commands.git_refs") and unit("commands.git_refs") not in PURE_CORE
    )


ENDPOINT_VARIABLES = ("RUNPOD_API_KEY", "RUNPOD_API_URL", "RUNPOD_PROXY_URL_TEMPLATE")


def _names_a_variable(name: str) -> list[str]:
    """The RunPod endpoint variables a module spells out as a string of their own (an env
    lookup, a settings alias), not inside a sentence."""
    return sorted(
        {
            n.value
            for n in ast.walk(parsed(name))
            if isinstance(n, ast.Constant) and n.value in ENDPOINT_VARIABLES
        }
    )


def test_only_endpoints_resolves_the_runpod_key_and_url() -> None:
    """One resolution, one precedence: every other module goes through endpoints.py."""
    readers = {n: v for n in modules() if n != "stack.endpoints" and (v := _names_a_variable(n))}
    assert readers == {}
    assert _names_a_variable("stack.endpoints") == sorted(ENDPOINT_VARIABLES)


def _is_any(node: ast.expr | None) -> bool:
    """`Any`, `typing.Any` or the string "Any"."""
    return (
        (isinstance(node, ast.Name) and node.id == "Any")
        or (isinstance(node, ast.Attribute) and node.attr == "Any")
        or (isinstance(node, ast.Constant) and node.value == "Any")
    )


@cache
def _classes() -> frozenset[str]:
    """Every class the package defines, by name."""
    return frozenset(
        node.name
        for name in modules()
        for node in ast.walk(parsed(name))
        if isinstance(node, ast.ClassDef)
    )


def _any_stand_ins(module: ast.AST) -> list[str]:
    """Where `module` types one of our classes as `Any` instead of importing it: a name bound
    to `Any` (`Account = Any`), or a parameter named after one of our classes (`account`
    for `Account`) annotated `Any`. Either hides an import cycle from the checks above."""
    found = []
    for node in ast.walk(module):
        if isinstance(node, ast.Assign | ast.AnnAssign) and _is_any(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found += [f"{t.id} = Any" for t in targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.arg) and _is_any(node.annotation):
            typed = "".join(part.title() for part in node.arg.split("_"))
            if typed in _classes():
                found.append(f"{node.arg}: Any (for {typed})")
    return found


def test_no_module_types_one_of_our_classes_as_any() -> None:
    """A module that cannot import a class without a cycle must lose the cycle, not the type."""
    stand_ins = {name: found for name in modules() if (found := _any_stand_ins(parsed(name)))}
    assert stand_ins == {}


def test_the_any_check_sees_an_alias_and_a_parameter() -> None:
    """The check above can fail: it finds both shapes of stand-in, and only those."""
    source = (
        "from typing import Any\nimport typing\nAccount = Any\nRecord: object = typing.Any\n"
        "def f(account: Any, pod_record: 'Any', body: Any, catalog: object) -> None: ...\n"
    )
    assert _any_stand_ins(ast.parse(source)) == [
        "Account = Any",
        "Record = Any",
        "account: Any (for Account)",
        "pod_record: Any (for PodRecord)",
    ]


def _exit_constants(name: str) -> list[str]:
    """The `EXIT_*` names a module assigns (tuple unpacking included), wherever it does."""
    targets: list[ast.expr] = []
    for node in ast.walk(parsed(name)):
        if isinstance(node, ast.Assign):
            targets += node.targets
        elif isinstance(node, ast.AnnAssign):
            targets.append(node.target)
    names = []
    for target in targets:
        for n in ast.walk(target):
            if isinstance(n, ast.Name) and n.id.startswith("EXIT_"):
                names.append(n.id)
    return sorted(names)


def test_exit_codes_have_one_home() -> None:
    """errors.py defines every exit code a command returns; everyone else imports them."""
    definers = {n: names for n in modules() if (names := _exit_constants(n))}
    assert definers == {"plumbing.errors": ["EXIT_DRIFT", "EXIT_OK", "EXIT_PROBLEMS", "EXIT_USAGE"]}


def _numbers_passed_to(tree: ast.AST, callee: str) -> list[int]:
    """Lines where `callee(...)` is given a number literal: a bound spelt again."""
    lines = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        if node.func.id != callee:
            continue
        values = [*node.args, *(k.value for k in node.keywords)]
        if any(isinstance(v, ast.Constant) and isinstance(v.value, int | float) for v in values):
            lines.append(node.lineno)
    return lines


def test_the_deploy_steps_bounds_have_one_home() -> None:
    """runpod/timeouts.py holds the numbers; a module may pass settings through, never new ones."""
    spelt = {}
    for name in modules():
        if lines := _numbers_passed_to(parsed(name), "Timeouts"):
            spelt[name] = lines
    assert spelt == {}


def test_the_bounds_check_sees_a_number_passed() -> None:
    tree = ast.parse("t = Timeouts(running_s=900.0)\nu = Timeouts(healthy_s=s.healthy)")
    assert _numbers_passed_to(tree, "Timeouts") == [1]
