"""The import graph of ``src/infercast`` keeps the docs' layer order and has no cycles.

The graph is read from the source with :mod:`ast`, so it holds every import a module can run:
module level, inside functions (lazy imports) and under ``if TYPE_CHECKING:``. The order is
the ``layer-order`` block of the docs (one line per layer, lowest first): a package may import
its own modules and packages on lower lines, nothing on its line or above. Type-only imports
(under ``if TYPE_CHECKING:``) never run, so they cannot close a cycle; they still count for
the layer order.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "infercast"
ROOT_NAME = "__init__"  # the layer name of the package's own __init__ (its public API)
BLOCK = re.compile(r"<!-- layer-order -->\s*```text\n(.*?)```", re.S)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, package: str) -> list[tuple[str, list[str], bool]]:
    """(module imported from, names, type-only) of every import in ``tree``."""
    out: list[tuple[str, list[str], bool]] = []

    def walk(node: ast.AST, type_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for n in child.body:
                    walk_one(n, True)
                for n in child.orelse:
                    walk_one(n, type_only)
            else:
                walk_one(child, type_only)

    def walk_one(node: ast.AST, type_only: bool) -> None:
        if isinstance(node, ast.Import):
            out.extend((a.name, [], type_only) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.append((target, [a.name for a in node.names], type_only))
        walk(node, type_only)

    walk(tree, False)
    return out


def import_graph() -> dict[str, dict[str, bool]]:
    """module -> {imported infercast module: type-only}, over every module of the package."""
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, dict[str, bool]] = defaultdict(dict)
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for target, names, type_only in _imports(tree, package):
            if target != "infercast" and not target.startswith("infercast."):
                continue
            # ``from pkg import mod`` imports the submodule; ``from mod import name`` the module
            targets = [f"{target}.{n}" for n in names if f"{target}.{n}" in files] or [target]
            for t in targets:
                if t != name:
                    graph[name][t] = graph[name].get(t, True) and type_only
    return graph


def layer_of(module: str) -> str:
    """The layer name of a module: its top-level package or module under ``infercast``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT_NAME


def layer_order() -> list[list[str]]:
    """The docs' layer-order block: a list of layers (each a list of names), lowest first."""
    for page in sorted((ROOT / "docs").rglob("*.md")):
        found = BLOCK.search(page.read_text(encoding="utf-8"))
        if found:
            return [line.split() for line in found.group(1).splitlines() if line.strip()]
    raise AssertionError("no '<!-- layer-order -->' block under docs/")


def find_cycle(graph: dict[str, dict[str, bool]]) -> list[str] | None:
    """One cycle among the run-time imports (type-only edges left out), or None."""
    edges = {m: [t for t, type_only in ts.items() if not type_only] for m, ts in graph.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for t in edges.get(m, ()):
            if state.get(t) == 1:
                return path[path.index(t) :] + [t]
            if t not in state:
                found = visit(t)
                if found:
                    return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(edges):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_every_package_is_in_the_layer_order():
    named = {name for layer in layer_order() for name in layer}
    actual = {layer_of(_module_name(p)) for p in PACKAGE.rglob("*.py")}
    assert actual - named == set(), "add these to the docs' layer-order block"
    assert named - actual == set(), "the layer-order block names packages that do not exist"


def test_imports_follow_the_layer_order():
    rank = {name: i for i, layer in enumerate(layer_order()) for name in layer}
    bad = sorted(
        f"{m} -> {t}"
        for m, targets in import_graph().items()
        for t in targets
        if layer_of(m) != layer_of(t) and rank[layer_of(t)] >= rank[layer_of(m)]
    )
    assert bad == []


def test_no_import_cycles():
    assert find_cycle(import_graph()) is None


def test_only_the_cli_imports_commands():
    bad = sorted(
        f"{m} -> {t}"
        for m, targets in import_graph().items()
        for t in targets
        if layer_of(t) == "commands" and layer_of(m) not in ("commands", "cli")
    )
    assert bad == []


def test_the_graph_sees_lazy_and_type_only_imports():
    """The reader itself: a function-level import and a TYPE_CHECKING import are both edges."""
    tree = ast.parse(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from infercast.a import B\ndef f():\n    from .c import d\n"
    )
    assert _imports(tree, "infercast.x") == [
        ("typing", ["TYPE_CHECKING"], False),
        ("infercast.a", ["B"], True),
        ("infercast.x.c", ["d"], False),
    ]


@pytest.mark.parametrize(
    "edges, cycle",
    [
        ({"a": {"b": False}, "b": {"a": False}}, True),
        ({"a": {"b": False}, "b": {"a": True}}, False),  # type-only back edge
        ({"a": {"b": False}, "b": {"c": False}}, False),
    ],
)
def test_find_cycle(edges, cycle):
    assert (find_cycle(edges) is not None) == cycle
