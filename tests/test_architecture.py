"""Layers you can see: no md_cg module imports a module of its own layer or above.

The ranks mirror docs/architecture.md. Imports under ``if TYPE_CHECKING:``
count too: a cycle that only type checkers see is still a cycle in the design.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "md_cg"

RANK = {
    "errors": 0,
    "script": 0,
    "node": 1,
    "ccg": 1,
    "fsops": 1,
    "text": 1,
    "textindex_postings": 1,
    "textindex_docs": 1,
    "textindex_similar": 1,
    "textindex_codec": 1,
    "textindex": 2,
    "synonyms": 1,
    "temporal": 1,
    "recall": 1,
    "resurface": 1,
    "nodefile": 2,
    "paths": 2,
    "routing": 2,
    "layout": 3,
    "access": 3,
    "logs": 3,
    "journal": 3,
    "dedupe": 2,
    "judge": 3,
    "reports": 3,
    "merge": 3,
    "index": 4,
    "sqlite_source": 4,
    "snapshot": 5,
    "search": 5,
    "graph": 5,
    "engine": 6,
    "maintenance": 7,
    "protocol": 7,
    "loop": 8,
    "store": 9,
    "sample": 10,
    "census": 10,
    "migrate": 10,
    "benchmark": 11,
    "demo": 11,
    "mcp_server": 12,
    "cli": 13,
    "__init__": 14,
}


def internal_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ImportFrom) and child.level == 1:
                if child.module:
                    found.add(child.module.split(".")[0])
                else:
                    found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and (child.module or "").startswith("md_cg."):
                found.add(child.module.split(".")[1])
            visit(child)

    visit(tree)
    return found


def test_every_module_has_a_rank() -> None:
    modules = {p.stem for p in PKG.glob("*.py")}
    assert modules == set(RANK), "add new modules to RANK and docs/architecture.md"


@pytest.mark.parametrize("module", sorted(RANK))
def test_no_upward_or_sideways_import(module: str) -> None:
    if module == "__init__":
        return  # the package surface re-exports everything, lazily
    for dep in internal_imports(PKG / f"{module}.py"):
        if dep == "__version__":
            continue
        assert RANK[dep] < RANK[module], (
            f"md_cg.{module} (rank {RANK[module]}) imports md_cg.{dep} (rank {RANK[dep]})"
        )
