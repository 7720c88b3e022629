"""No module of ours reaches into another package's private names.

A private name (`_x`, or a `_private` module) of the standard library, pydantic, pytest or the
Pulumi SDK may change in any release: `dataclasses._FIELD` did, and every import of a home-made
copy of dataclasses broke on a new Python. Read statically from every file we ship or test with.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.factories import ROOT

OURS = ("frutebox_infra", "tests", "support", "bench", "conftest")
DOCUMENTED = {"os._exit"}
"""Underscored, yet documented and public: the process exit that skips clean-up handlers."""
SOURCES = [
    *sorted(
        path
        for folder in ("frutebox_infra", "tests", "bench")
        for path in (ROOT / folder).rglob("*.py")
        if ".venv" not in path.parts
    ),
    ROOT / "__main__.py",
]


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _theirs(module: str) -> bool:
    return module.split(".")[0] not in OURS


def private_uses(source: str) -> list[str]:
    """Each private name of another package that `source` imports or reaches by attribute."""
    tree = ast.parse(source)
    found: list[str] = []
    foreign: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _theirs(alias.name):
                    foreign.add((alias.asname or alias.name).split(".")[0])
                    if any(_private(part) for part in alias.name.split(".")):
                        found.append(f"import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if not _theirs(node.module):
                continue
            if any(_private(part) for part in node.module.split(".")):
                found.append(f"from {node.module} import ...")
            for alias in node.names:
                foreign.add(alias.asname or alias.name)
                if _private(alias.name):
                    found.append(f"from {node.module} import {alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            root: ast.expr = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            text = ast.unparse(node)
            if isinstance(root, ast.Name) and root.id in foreign and text not in DOCUMENTED:
                found.append(text)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "getattr" and len(node.args) >= 2:
                target, name = node.args[0], node.args[1]
                if (
                    isinstance(target, ast.Name)
                    and target.id in foreign
                    and isinstance(name, ast.Constant)
                    and isinstance(name.value, str)
                    and _private(name.value)
                ):
                    found.append(ast.unparse(node))
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call):
            call = node.value
            if (
                isinstance(call.func, ast.Name)
                and call.func.id == "vars"
                and call.args
                and isinstance(call.args[0], ast.Name)
                and call.args[0].id in foreign
                and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, str)
                and _private(node.slice.value)
            ):
                found.append(ast.unparse(node))
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_private_name_of_another_package(path: Path) -> None:
    assert private_uses(path.read_text(encoding="utf-8")) == []


def test_the_check_sees_every_shape_of_reaching_in() -> None:
    """The test above can fail: each way of reaching a private name is found, ours are not."""
    source = (
        "import dataclasses, pulumi.runtime\nfrom pydantic._internal import core\n"
        "from _pytest.assertion import rewrite\nfrom dataclasses import _FIELD\n"
        "from frutebox_infra.plumbing import _ours\nfrom support.common import heading\n"
        "a = vars(dataclasses)['_FIELD']\nb = getattr(dataclasses, '_MISSING_TYPE')\n"
        "c = pulumi.runtime._sync_monitor\nd = dataclasses.__name__\ne = self._mine\n"
    )
    assert sorted(private_uses(source)) == [
        "from _pytest.assertion import ...",
        "from dataclasses import _FIELD",
        "from pydantic._internal import ...",
        "getattr(dataclasses, '_MISSING_TYPE')",
        "pulumi.runtime._sync_monitor",
        "vars(dataclasses)['_FIELD']",
    ]
