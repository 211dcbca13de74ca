"""The package's modules import one another without a cycle.

Module-level imports only: an import inside a function or under
``TYPE_CHECKING`` runs later (or never) and cannot deadlock an import. A
cycle is printed as its chain of modules, so a failure says where to cut.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "hermes_store"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Each module of the package and the package modules it imports at module level."""
    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ImportFrom) and node.module in paths:
                if node.module != name:  # a package importing its own submodules
                    graph[name].add(node.module)
                for alias in node.names:
                    if f"{node.module}.{alias.name}" in paths:
                        graph[name].add(f"{node.module}.{alias.name}")
            elif isinstance(node, ast.Import):
                graph[name].update(alias.name for alias in node.names if alias.name in paths)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle a depth-first walk meets (each reported once, from its first module)."""
    found: list[list[str]] = []
    done: set[str] = set()

    def walk(name: str, chain: list[str]) -> None:
        for target in sorted(graph[name]):
            if target in chain:
                found.append([*chain[chain.index(target) :], target])
            elif target not in done:
                walk(target, [*chain, target])
        done.add(name)

    for name in sorted(graph):
        if name not in done:
            walk(name, [name])
    return found


def test_the_package_has_no_import_cycle() -> None:
    found = cycles(import_graph())
    assert found == [], "\n".join(" -> ".join(chain) for chain in found)


def test_the_walk_sees_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
