"""Layers you can see: no md_cg module imports a module of its own layer or above.

The ranks mirror docs/architecture.md. Imports under ``if TYPE_CHECKING:`` do
not count (they never run).
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
    "textindex": 1,
    "synonyms": 1,
    "nodefile": 2,
    "layout": 2,
    "routing": 2,
    "access": 2,
    "judge": 3,
    "merge": 3,
    "index": 4,
    "reports": 4,
    "sqlite_source": 4,
    "search": 5,
    "graph": 5,
    "loop": 5,
    "store": 6,
    "sample": 7,
    "census": 7,
    "migrate": 7,
    "benchmark": 8,
    "demo": 8,
    "mcp_server": 9,
    "cli": 10,
    "__init__": 11,
}


def internal_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
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
