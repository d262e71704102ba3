"""Session 39 (user simulation): ``mdcg`` loads only what a command uses.

Importing :mod:`md_cg.cli` imported the whole store (``md_cg.store`` and the engine,
the index, numpy, PyYAML and python-frontmatter, rapidfuzz, orjson), so ``mdcg --help``
and ``mdcg search --help`` paid for them (about 1,700 M instructions for ``--help``, 730 M
now). The CLI now imports the store in the commands that open one, :mod:`md_cg.render`
no longer imports the index, and the store imports :mod:`md_cg.organize` (with
:mod:`md_cg.dedupe`) only for ``organize`` and the identical-memory check of ``add``
without an id: ``search`` and ``get`` never load them.

Each case runs ``mdcg`` in a child process (a module an earlier test imported would be
in ``sys.modules`` here) and lists which of :data:`HEAVY` are loaded when it exits.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from md_cg import MdCG

#: Modules a command may or may not need: third-party packages of some weight, and
#: the md-cg modules that pull them in.
HEAVY = (
    "frontmatter",
    "mcp",
    "md_cg.dedupe",
    "md_cg.engine",
    "md_cg.index",
    "md_cg.organize",
    "md_cg.store",
    "numpy",
    "orjson",
    "rapidfuzz",
    "sqlite3",
    "yaml",
)

#: What every command that opens a store loads (the text index is numpy arrays;
#: node files and logs are read with orjson, rapidfuzz folds text for the index).
STORE = [
    "frontmatter",
    "md_cg.engine",
    "md_cg.index",
    "md_cg.store",
    "numpy",
    "orjson",
    "rapidfuzz",
    "yaml",
]

PROBE = f"""
import atexit, json, sys

def loaded():
    sys.stderr.write("LOADED " + json.dumps([m for m in {HEAVY!r} if m in sys.modules]) + "\\n")

atexit.register(loaded)
sys.argv = ["mdcg", *sys.argv[1:]]
from md_cg.launch import main
main()
"""


def loaded_by(args: list[str], cwd: Path, code: int = 0) -> list[str]:
    """Which of :data:`HEAVY` ``mdcg ARGS`` has loaded when it exits (run in ``cwd``)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    last = done.stderr.splitlines()[-1]
    assert last.startswith("LOADED "), done.stderr
    return list(json.loads(last.removeprefix("LOADED ")))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli_import") / "mem"
    with MdCG(root) as s:
        s.add(id="bs", body="# binary search\nhalve a sorted array", tags=["domain:cs"])
        s.add(id="tea", body="# green tea\nsteep at 80 degrees")
    return root


def test_importing_the_cli_loads_no_heavy_module(tmp_path: Path) -> None:
    code = f"import json, sys, md_cg.cli; print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


@pytest.mark.parametrize("args", [["--help"], ["search", "--help"], ["add", "--help"], ["get", "--help"]])
def test_help_loads_no_heavy_module(args: list[str], tmp_path: Path) -> None:
    assert loaded_by(args, tmp_path) == []


def test_a_usage_error_loads_no_heavy_module(tmp_path: Path) -> None:
    assert loaded_by(["search"], tmp_path, code=2) == []  # the query is missing


@pytest.mark.parametrize("args", [["search", "binary search"], ["get", "bs"], ["list"]])
def test_reading_commands_load_the_store_but_not_organize(
    args: list[str], store: Path, tmp_path: Path
) -> None:
    assert loaded_by(["--root", str(store), *args], tmp_path) == STORE


def test_add_without_an_id_loads_organize_for_its_identical_check(store: Path, tmp_path: Path) -> None:
    """The probe sees a lazily imported module: ``add`` of a text with no id asks
    :meth:`MdCG.identical` (md_cg.organize) whether the layer holds it already."""
    assert loaded_by(["--root", str(store), "add", "# rust\nownership and borrowing"], tmp_path) == sorted(
        [*STORE, "md_cg.organize", "md_cg.dedupe"]
    )
    assert loaded_by(["--root", str(store), "add", "# go\ngoroutines", "--id", "go"], tmp_path) == STORE


def test_a_snippet_looks_for_as_many_terms_as_the_index_ranks_a_query_on() -> None:
    """md_cg.render does not import the index (numpy): it keeps the number itself."""
    from md_cg import render, textindex

    assert render.SNIPPET_TERMS == textindex.MAX_QUERY_TERMS == 128


def test_a_snippet_of_a_title_match_reads_the_title_from_the_body() -> None:
    """``title=None``: the snippet takes the body's title (md_cg.index.title_of, imported
    when needed) to tell whether the title shows the match already."""
    from md_cg.render import snippet

    body = "# green tea\n" + "steep " * 5 + "\nmore"
    assert snippet(body, ["green"]) == "steep steep steep steep steep more"  # the title shows it
    long_title = "# " + "word " * 40 + "green tea"  # cut before the match: a window on it
    assert snippet(long_title + "\nbody", ["green"], width=30) == "…word green tea body"
