"""Structure figures of the md_cg package (the structure issue's before/after table).

    python bench/structure.py

Prints the largest modules, classes and functions (lines, decorators and
docstrings included), how many functions exceed 80 lines and classes 600,
and the import cycles among md_cg's modules (``TYPE_CHECKING`` imports count).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "md_cg"


def sizes(pkg: Path = PKG) -> dict[str, list[tuple[int, str]]]:
    """(lines, name) of every module, class and function, largest first."""
    out: dict[str, list[tuple[int, str]]] = {"modules": [], "classes": [], "functions": []}
    for path in sorted(pkg.rglob("*.py")):
        rel = path.relative_to(pkg).as_posix()
        text = path.read_text(encoding="utf-8")
        out["modules"].append((len(text.splitlines()), rel))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                out["classes"].append((node.end_lineno - node.lineno + 1, f"{rel}:{node.name}"))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out["functions"].append((node.end_lineno - node.lineno + 1, f"{rel}:{node.name}"))
    return {kind: sorted(rows, reverse=True) for kind, rows in out.items()}


def import_graph(pkg: Path = PKG) -> dict[str, set[str]]:
    """Top-level md_cg module -> the md_cg modules it imports (relative or absolute)."""
    graph: dict[str, set[str]] = {}
    for path in pkg.glob("*.py"):
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                deps.update([node.module.split(".")[0]] if node.module else [a.name for a in node.names])
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("md_cg."):
                deps.add(node.module.split(".")[1])
        own = (path.stem, "__init__")
        graph[path.stem] = {d for d in deps if (pkg / f"{d}.py").exists() and d not in own}
    graph.pop("__init__", None)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main() -> int:
    table = sizes()
    for kind, rows in table.items():
        print(f"largest {kind}: " + ", ".join(f"{name} {n}" for n, name in rows[:3]))
    print(f"functions over 80 lines: {sum(n > 80 for n, _ in table['functions'])}")
    print(f"classes over 600 lines: {sum(n > 600 for n, _ in table['classes'])}")
    print(f"import cycles: {cycles(import_graph()) or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
