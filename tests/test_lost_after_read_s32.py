"""A memory's file moved or deleted by hand, then a read, then ``add`` of its id (session
32, review rev3 finding 2: core1.py, lg9.py). ``search`` with a query -- one that hits
the memory, or filler -- dropped the id from the index when it found the hit's file gone
(:meth:`md_cg.engine.Engine.drop_missing`), without the note every other drop leaves for
the next sync: ``add(id="x1")`` on the same handle then SUCCEEDED and wrote a second file
of x1 next to the moved copy (``sync`` reported a duplicate, ``health`` a
``duplicate_id``), while without the search it was refused. Now every write after any
read refuses the id, naming the file, until a sync takes the move in; after the sync the
moved file is the memory and ``add`` of the id is the plain duplicate error."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_hand_moved_s31 import _moved

import md_cg
from md_cg import MdCG, Scope
from md_cg.errors import DuplicateIdError, NodeNotFoundError
from md_cg.node import Node

_ENV = {**os.environ, "PYTHONPATH": str(Path(md_cg.__file__).resolve().parent.parent)}

#: The reads of the review's list; the first three dropped the id before the fix.
READS: dict[str, Callable[[MdCG], Any]] = {
    "search_hit": lambda s: s.search("walnut"),
    "search_filler": lambda s: s.search("pecan"),
    "inject": lambda s: s.inject("walnut"),
    "get": lambda s: s.get("x1"),
    "list_page": lambda s: s.list_page(),
    "list_nodes": lambda s: s.list_nodes(),
    "neighbours": lambda s: s.neighbours("y1", direction="both"),
    "recall_stats": lambda s: s.recall_stats(),
    "entries": lambda s: s.entries(),
    "health": lambda s: s.health(),
}


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("x1.md") if ".mdcg" not in p.parts)


def _store(tmp_path: Path, how: str, *, reopen: bool = False) -> tuple[Path, MdCG]:
    """An open handle of a store with x1 and y1, x1's file then moved or deleted by hand;
    ``reopen``: the handle that wrote them closed first (its close wrote a snapshot, which
    every later open loads: no open scans the files) and a new one opened after the hand."""
    root = tmp_path / "m"
    s = MdCG(root, refresh_interval=0)
    s.add(Node(id="x1", layer="knowledge", body="original walnut text"))
    s.add(Node(id="y1", layer="knowledge", body="pecan other text"))
    if reopen:
        s.close()
        assert (root / ".mdcg/index.snapshot").exists()
    if how == "move":
        (root / "knowledge/handmoved").mkdir()
        shutil.move(root / "knowledge/orphan/x1.md", root / "knowledge/handmoved/x1.md")
    else:
        (root / "knowledge/orphan/x1.md").unlink()
    return root, MdCG(root, refresh_interval=0) if reopen else s


def _refused(call: Callable[[], Any]) -> tuple[str, str | None]:
    with pytest.raises(NodeNotFoundError) as err:
        call()
    return str(err.value), err.value.hidden


@pytest.mark.parametrize("how", ["move", "delete"])
@pytest.mark.parametrize("read", list(READS))
def test_add_after_any_read_is_refused_until_a_sync(tmp_path: Path, read: str, how: str) -> None:
    root, s = _store(tmp_path, how)
    left = ["knowledge/handmoved/x1.md"] if how == "move" else []
    with s:
        for _ in range(2):  # a read twice: the second one finds the id already dropped
            try:
                READS[read](s)
            except NodeNotFoundError:
                pass  # get says it too

        def add() -> Node:
            return s.add(Node(id="x1", layer="knowledge", body="new text"))

        assert _refused(add) == (_moved("x1"), "lost")
        assert _refused(lambda: s.update("x1", body="changed")) == (_moved("x1"), "lost")
        assert _files(root) == left
        report = s.sync()
        assert report.duplicates == ()
        assert [f.kind for f in s.health().findings] == []
        if how == "move":
            assert [(m.node_id, m.new_path) for m in report.moved] == [("x1", "knowledge/handmoved/x1.md")]
            assert s.get("x1").body == "original walnut text"
            with pytest.raises(DuplicateIdError) as dup:
                add()
            assert str(dup.value) == (
                "node id 'x1' already exists at knowledge/handmoved/x1.md; update that node, "
                "or add again with overwrite to replace it"
            )
        else:
            assert report.deleted == ("x1",)
            add()
            assert s.get("x1").body == "new text"
            left = ["knowledge/orphan/x1.md"]
        assert _files(root) == left


#: Every write of the id after a search that dropped it: each names the file (apply_changes
#: named none, and supersede said only "no node with id 'x1'", before).
WRITES: dict[str, Callable[[MdCG], Any]] = {
    "add": lambda s: s.add(Node(id="x1", layer="knowledge", body="new text")),
    "add_many": lambda s: s.add_many([Node(id="x1", layer="knowledge", body="new text")]),
    "add_unique": lambda s: s.add_unique(Node(id="x1", layer="knowledge", body="new text")),
    "apply_changes": lambda s: s.apply_changes(add=[Node(id="x1", layer="knowledge", body="new")]),
    "update": lambda s: s.update("x1", body="changed"),
    "rename": lambda s: s.rename("x1", "x2"),
    "archive": lambda s: s.archive("x1"),
    "edit_text": lambda s: s.edit_text("x1", lambda t: t + "more\n"),
    "forget": lambda s: s.forget("x1", "why"),
    "delete": lambda s: s.delete("x1"),
    "supersede": lambda s: s.supersede("x1", "y1"),
    "get": lambda s: s.get("x1"),
}


@pytest.mark.parametrize("write", list(WRITES))
def test_every_write_after_a_search_names_the_file(tmp_path: Path, write: str) -> None:
    root, s = _store(tmp_path, "move")
    with s:
        assert [r.id for r in s.search("walnut")[0]] == ["y1"]  # filler: x1's file is gone
        assert _refused(lambda: WRITES[write](s)) == (_moved("x1"), "lost")
    written = sorted(p.relative_to(root).as_posix() for p in root.rglob("x*.md"))
    assert written == ["knowledge/handmoved/x1.md"]


def test_a_scoped_handle_is_refused_without_the_file(tmp_path: Path) -> None:
    root, s = _store(tmp_path, "move")
    s.close()
    with MdCG(root, scope=Scope(), refresh_interval=0) as scoped:
        scoped.search("walnut")
        text, hidden = _refused(lambda: scoped.add(Node(id="x1", layer="knowledge", body="new")))
    assert (text, hidden) == (
        "no node with id 'x1' in this store (its file was moved, deleted or changed outside md-cg "
        "since the last sync; run `mdcg sync` (MdCG.sync()) to take that in, then try again)",
        "lost",
    )
    assert _files(root) == ["knowledge/handmoved/x1.md"]


_READER = """
import sys
from md_cg import MdCG
from md_cg.node import Node
with MdCG(sys.argv[1], refresh_interval=0) as s:
    hits = [r.id for r in s.search("walnut")[0]]
    try:
        s.add(Node(id=sys.argv[2], layer="knowledge", body="from the reader"))
        print(hits, "added")
    except Exception as exc:
        print(hits, type(exc).__name__, exc)
"""


@pytest.mark.parametrize("how", ["move", "delete"])
def test_a_second_process_reading_then_adding_is_refused(tmp_path: Path, how: str) -> None:
    root, s = _store(tmp_path, how, reopen=True)
    with s:
        out = subprocess.run(
            [sys.executable, "-c", _READER, str(root), "x1"],
            env=_ENV,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        assert out == f"['y1'] NodeNotFoundError {_moved('x1')}\n"
        s.search("walnut")
        assert _refused(lambda: s.add(Node(id="x1", layer="knowledge", body="new"))) == (_moved("x1"), "lost")
        assert _files(root) == (["knowledge/handmoved/x1.md"] if how == "move" else [])
        assert s.sync().duplicates == ()


def test_the_langgraph_store_put_after_a_search_writes_where_the_file_now_is(tmp_path: Path) -> None:
    """The LangGraph store takes hand changes in before each batch (session 32, lgstore):
    its search finds the moved item, and a put after it writes the file where it now is
    -- never a second file (rev3 lg9: a put after a search made one)."""
    pytest.importorskip("langgraph")
    from md_cg.integrations.langgraph_store import MdCGStore, node_id_for

    root = tmp_path / "m"
    md = MdCG(root, refresh_interval=0)
    store, ns = MdCGStore(md), ("mem", "u")
    for key in "ab":
        store.put(ns, key, {"text": "original " + key})
    node_id = node_id_for(ns, "b")
    (before,) = root.rglob(f"{node_id}.md")
    (root / "knowledge/handmoved").mkdir()
    shutil.move(before, root / f"knowledge/handmoved/{node_id}.md")
    assert sorted(x.key for x in store.search(ns, query="original")) == ["a", "b"]
    store.put(ns, "b", {"text": "new b"})
    assert [p.relative_to(root).as_posix() for p in root.rglob(f"{node_id}.md")] == [
        f"knowledge/handmoved/{node_id}.md"
    ]
    assert md.sync().duplicates == ()
    assert store.get(ns, "b").value == {"text": "new b"}
    md.close()
