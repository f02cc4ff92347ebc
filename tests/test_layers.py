"""The controller's folders form layers: no folder imports, through any chain, one that imports it.

A cycle between folders means neither can be read, tested or replaced alone
(``classify`` and ``pipeline`` once imported each other through ``FlowId``).
The graph is read from the source with ``ast``, so imports inside functions
and under ``TYPE_CHECKING`` count too.  A module at the package's top level
(``controller/flowid.py``) is a node of its own.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "controller"


def _node(module: str) -> str | None:
    """The folder (or top-level module) a dotted name belongs to; None outside the package."""
    parts = module.split(".")
    if parts[0] != "controller" or len(parts) < 2:
        return None
    return parts[1] if (PACKAGE / parts[1]).is_dir() else f"{parts[1]}.py"


def _imported(path: Path) -> Iterator[str]:
    package = ["controller", *path.relative_to(PACKAGE).parts[:-1]]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            yield module
            # `from controller import metrics` names a module, not an attribute.
            yield from (f"{module}.{alias.name}" for alias in node.names)


def folder_graph() -> dict[str, dict[str, set[str]]]:
    """Folder -> folders it imports -> the files that do it."""
    graph: dict[str, dict[str, set[str]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        source = relative.parts[0] if len(relative.parts) > 1 else relative.name
        edges = graph.setdefault(source, {})
        for module in _imported(path):
            target = _node(module)
            if target is not None and target != source:
                edges.setdefault(target, set()).add(str(relative))
    return graph


def find_cycle(graph: dict[str, dict[str, set[str]]]) -> list[str] | None:
    """One cycle of the graph as a closed path (first node repeated last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, {})):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (cycle := visit(target)) is not None:
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)) is not None:
            return cycle
    return None


def test_no_cycle_between_folders() -> None:
    graph = folder_graph()
    cycle = find_cycle(graph)
    if cycle is not None:
        steps = [
            f"  {a} -> {b} ({', '.join(sorted(graph[a][b]))})" for a, b in itertools.pairwise(cycle)
        ]
        raise AssertionError("folders import each other:\n" + "\n".join(steps))


def test_cycle_finder_names_the_cycle() -> None:
    graph = {"a": {"b": {"a/x.py"}}, "b": {"c": {"b/y.py"}}, "c": {"a": {"c/z.py"}}, "d": {}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": set()}, "b": {}}) is None


def test_flow_identity_is_a_leaf() -> None:
    assert folder_graph()["flowid.py"] == {}
