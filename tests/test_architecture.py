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
    "exchanged": 2,
    "text": 1,
    "textindex_postings": 1,
    "textindex_docs": 1,
    "textindex_similar": 1,
    "textindex_codec": 1,
    "textindex_scope": 1,
    "textindex": 2,
    "textindex_phrase": 2,
    "synonyms": 2,
    "temporal": 2,
    "recall": 1,
    "resurface": 1,
    "nodefile": 2,
    "paths": 2,
    "routing": 2,
    "layout": 3,
    "fastread": 3,
    "watch": 2,
    "access": 3,
    "logs": 3,
    "journal": 3,
    "copyfate": 5,
    "dedupe": 3,
    "judge": 3,
    "reports": 3,
    "merge": 3,
    "index": 4,
    "coldbuild": 5,
    "sqlite_source": 4,
    "snapshot": 5,
    "search": 5,
    "graph": 5,
    "visibility": 5,
    "engine": 6,
    "audit": 6,
    "maintenance": 7,
    "forgetting": 8,
    "editing": 7,
    "protocol": 7,
    "retention": 7,
    "organize": 5,
    "views": 8,
    "loop": 8,
    "store": 9,
    "sample": 10,
    "census": 10,
    "render": 10,
    "pickups": 10,
    "migrate": 10,
    "transfer": 10,
    "benchmark": 11,
    "demo": 11,
    "mcp_server": 12,
    "cli": 13,
    "__init__": 14,
    "launch": 14,
    # md_cg/integrations/: optional extras. The alias table sits below the MCP
    # server (which registers it); the framework backends sit above everything.
    "integrations.__init__": 15,
    "integrations.aliases": 11,
    "integrations.anthropic_memory": 15,
    "integrations.langgraph_store": 15,
}
SUBPACKAGES = ("integrations",)


def module_path(module: str) -> Path:
    return PKG.joinpath(*module.split(".")).with_suffix(".py")


def rank_key(dotted: str) -> str:
    """The RANK key of a module path inside md_cg (``integrations.aliases``, ``store``)."""
    parts = dotted.split(".")
    if parts[0] in SUBPACKAGES and len(parts) > 1:
        return ".".join(parts[:2])
    return parts[0]


def internal_imports(path: Path) -> set[str]:
    """RANK keys of the md_cg modules a file imports (relative imports resolved from its package)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = path.parent.relative_to(PKG).parts  # () for md_cg itself
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ImportFrom) and child.level:
                base = package[: len(package) - (child.level - 1)]
                target = [*base, *(child.module.split(".") if child.module else [])]
                if target and (child.module or target[0] in SUBPACKAGES):
                    if target[0] in SUBPACKAGES and len(target) == 1:
                        found.update(f"{target[0]}.{a.name}" for a in child.names)
                    else:
                        found.add(rank_key(".".join(target)))
                else:
                    found.update(rank_key(a.name) for a in child.names)
            elif isinstance(child, ast.ImportFrom) and (child.module or "").startswith("md_cg."):
                found.add(rank_key(child.module.split(".", 1)[1]))
            visit(child)

    visit(tree)
    return found


def test_every_module_has_a_rank() -> None:
    modules = {p.stem for p in PKG.glob("*.py")}
    for sub in SUBPACKAGES:
        modules |= {f"{sub}.{p.stem}" for p in (PKG / sub).glob("*.py")}
    assert modules == set(RANK), "add new modules to RANK and docs/architecture.md"


def test_subpackage_imports_are_resolved() -> None:
    assert internal_imports(PKG / "integrations" / "anthropic_memory.py") >= {"store", "nodefile", "errors"}
    assert "node" in internal_imports(PKG / "integrations" / "aliases.py")


@pytest.mark.parametrize("module", sorted(RANK))
def test_no_upward_or_sideways_import(module: str) -> None:
    if module == "__init__":
        return  # the package surface re-exports everything, lazily
    for dep in internal_imports(module_path(module)):
        if dep == "__version__":
            continue
        assert RANK[dep] < RANK[module], (
            f"md_cg.{module} (rank {RANK[module]}) imports md_cg.{dep} (rank {RANK[dep]})"
        )


#: The surfaces' own rooms: what a surface may import besides md_cg's public API.
SURFACE_ROOMS = {
    "render",
    "pickups",
    "demo",
    "mcp_server",
    "census",
    "benchmark",
    "integrations.aliases",
    "__version__",
}


def imported_names(path: Path) -> list[tuple[str, str]]:
    """(module RANK key, name) of every import from md_cg in a top-level md_cg file.

    ``from md_cg import x`` and ``from . import x`` give ``("", "x")``;
    ``from md_cg.m import x`` and ``from .m import x`` give ``("m", "x")``.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level == 1:
            module = node.module or ""
        elif node.level == 0 and (node.module == "md_cg" or (node.module or "").startswith("md_cg.")):
            module = node.module.partition(".")[2]
        else:
            continue
        found += [(rank_key(module) if module else "", alias.name) for alias in node.names]
    return found


@pytest.mark.parametrize("surface", ["cli", "mcp_server"])
def test_surfaces_import_only_the_public_api(surface: str) -> None:
    import md_cg

    public = set(md_cg.__all__)
    private = [
        f"{module}.{name}"
        for module, name in imported_names(module_path(surface))
        if module not in SURFACE_ROOMS and name not in public and name not in SURFACE_ROOMS
    ]
    assert imported_names(module_path(surface)), "the parser must see the surface's imports"
    assert private == [], f"md_cg.{surface} reaches past the public API: {private}"


def test_the_layer_table_in_the_docs_matches_the_ranks() -> None:
    doc = (PKG.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = doc[doc.index("| rank | modules |") : doc.index("\n\n", doc.index("| rank | modules |"))]
    documented = {}
    for row in table.splitlines()[2:]:
        rank, modules = row.split("|")[1:3]
        for name in modules.split(","):
            documented[name.strip().strip("`")] = int(rank)
    assert documented == RANK


def test_no_function_over_80_lines_and_no_class_over_600() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("structure", PKG.parent / "bench" / "structure.py")
    assert spec and spec.loader
    structure = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(structure)
    table = structure.sizes(PKG)
    assert [(n, name) for n, name in table["functions"] if n > 80] == []
    assert [(n, name) for n, name in table["classes"] if n > 600] == []
    assert structure.cycles(structure.import_graph(PKG)) == []
    assert structure.cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]  # it can find one
