"""The package's layers (docs/architecture.md, "Layers"): each module in exactly one layer, every import — at
module level, under TYPE_CHECKING or inside a function — going to its own layer or a lower one, and no import
cycle anywhere. The layer list is written once, in the doc; this test reads it from there."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "responses_gateway"
DOC = ROOT / "docs" / "architecture.md"


def layers() -> list[tuple[str, list[str]]]:
    block = re.search(r"```layers\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert block, "docs/architecture.md has no ```layers block"
    out = []
    for line in block.group(1).strip().splitlines():
        name, _, patterns = line.partition(":")
        out.append((name.strip(), patterns.split()))
    return out


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name relative to it ("tools.frame"; the package itself is
    "responses_gateway")."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts) or "responses_gateway"] = path
    return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules `name` imports, however it imports them."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names if a.name.startswith("responses_gateway")]
            found |= {t.removeprefix("responses_gateway.") or "responses_gateway" for t in targets}
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level == 0:
            if not (node.module or "").startswith("responses_gateway"):
                continue
            base = node.module.removeprefix("responses_gateway").lstrip(".")
        else:
            parts = [] if package == "responses_gateway" else package.split(".")
            parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
            base = ".".join(parts + ([node.module] if node.module else []))
        for alias in node.names:
            full = f"{base}.{alias.name}" if base else alias.name
            found.add(full if full in known else (base or "responses_gateway"))
    return {f for f in found if f in known and f != name}


def layer_of(module: str, table: list[tuple[str, list[str]]]) -> int:
    """The layer whose pattern fits `module` best: an exact name first, else the longest `prefix.*`."""
    best, length = -1, -1
    for i, (_, patterns) in enumerate(table):
        for pattern in patterns:
            if pattern == module:
                return i
            if pattern.endswith(".*") and module.startswith(pattern[:-1]) and len(pattern) > length:
                best, length = i, len(pattern)
    return best


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, set(known)) for name, path in known.items()}


def test_every_module_is_in_a_layer():
    table = layers()
    lost = sorted(name for name in modules() if layer_of(name, table) < 0)
    assert lost == [], f"modules in no layer of docs/architecture.md: {lost}"


def test_no_module_imports_a_higher_layer():
    table = layers()
    upward = []
    for name, targets in graph().items():
        mine = layer_of(name, table)
        for target in sorted(targets):
            theirs = layer_of(target, table)
            if theirs > mine:
                upward.append(f"{name} ({table[mine][0]}) imports {target} ({table[theirs][0]})")
    assert upward == [], "imports going up a layer:\n" + "\n".join(upward)


def test_there_is_no_import_cycle():
    edges = graph()
    cycles = [sorted(c) for c in strongly_connected(edges) if len(c) > 1]
    assert cycles == [], f"import cycles: {cycles}"


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components, iteratively (no recursion limit on a long chain)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on.discard(top)
                    component.append(top)
                    if top == node:
                        break
                out.append(component)
    return out


@pytest.mark.parametrize("source, expected", [
    ("from ...composer import Composer", {"composer"}),
    ("from ..frame import Kit", {"tools.frame"}),
    ("from . import runner", {"tools.web_search.runner"}),
    ("def f():\n    from ...app import create_app", {"app"}),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ...services import Services", {"services"}),
    ("import responses_gateway.app", {"app"}),
])
def test_every_kind_of_import_is_seen(tmp_path, source, expected):
    """From tools/web_search/kit.py: relative, absolute, type-only and function-level imports alike."""
    path = tmp_path / "kit.py"
    path.write_text(source)
    known = {"composer", "tools.frame", "tools.web_search.runner", "app", "services", "tools.web_search.kit"}
    assert imports("tools.web_search.kit", path, known) == expected
