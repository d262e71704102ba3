"""Session 36, second pass: what a scoped handle was still told of a hidden memory.

A person may give a memory's file any name in its layer (the id is in the frontmatter), and
may bring back a copy of a memory by hand. Three refusals of a scoped handle named (or lost)
another scope's memory:

1. ``import_nodes`` of a record ``x`` whose file ``contextual/x.md`` holds another scope's
   ``hush`` (filed there by hand) listed it as bad "the file contextual/x.md holds memory
   'hush' ..." (:func:`md_cg.engine.foreign_file`);
2. the handle's own ``x``, ``hush``'s file moved over ``x.md`` by hand: ``get``, ``update``,
   ``move``, ``rename``, ``forget``, ``delete``, ``archive`` of ``x`` said "... unusable: it
   holds memory 'hush' now", a search result's node too, and ``read_text("x")`` returned
   ``hush``'s file, its body included;
3. ``add(id="x", overwrite=True)`` (and ``add_many``) replaced an unsynced
   ``contextual/x.md`` holding another scope's ``x`` (a copy brought back by hand): that
   memory was lost.

Each is now said as an id taken by (or a file changed to) a memory outside the scope,
naming neither it nor its file, and nothing is written; an unscoped handle is told as before.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from md_cg import MdCG, Node, Scope
from md_cg.errors import DuplicateIdError, ImportSourceError, NodeNotFoundError
from md_cg.transfer import BadRecord, import_nodes

A = Scope(agent="a")
#: how ``hush`` is hidden from the scope ``A``: another agent's, or too sensitive
HIDDEN = {"agent": {"agent_scope": "b"}, "secret": {"sensitivity": "secret"}}
TAKEN = "node id 'x' is taken by a memory outside this handle's scope; choose another id"


def _files(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of the store, ``.mdcg/`` (index, log, audit) too, but the lock files."""
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file() and p.relative_to(root).parts[:2] != (".mdcg", "locks")
    }


# -- 1. import onto a hidden memory's hand-named file ------------------------------------------


def _import_store(root: Path, hidden: dict[str, str], at: str) -> Path:
    with MdCG(root, create=True) as s:
        s.add(Node(id="hush", layer="contextual", body="The door code 4711", **hidden))
        if at.startswith("archive/"):
            s.archive(["hush"])
    [old] = list(root.rglob("hush.md"))
    (root / at).parent.mkdir(parents=True, exist_ok=True)
    os.rename(old, root / at)
    source = root.parent / "in.jsonl"
    record = {"id": "x", "layer": "contextual", "body": "new text"}
    if at.startswith("archive/"):
        record["archived"] = True
    source.write_text(json.dumps(record) + "\n")
    return source


IMPORT_TAKEN = "id 'x' is taken by a memory outside this handle's scope; choose another id"
PLACES = ["contextual/x.md", "archive/contextual/x.md"]


def _held(rel: str) -> str:
    return (
        f"the file {rel} holds memory 'hush' (edited by hand, or placed there); it is not "
        "written over -- move that file to its own name, or rename one of them"
    )


@pytest.mark.parametrize("at", PLACES)
@pytest.mark.parametrize("hidden", sorted(HIDDEN))
def test_a_scoped_import_onto_a_hidden_memorys_file_names_nothing_of_it(
    tmp_path: Path, hidden: str, at: str
) -> None:
    root = tmp_path / "s"
    source = _import_store(root, HIDDEN[hidden], at)
    with MdCG(root, scope=A) as s:
        s.sync()
        before = _files(root)
        report = import_nodes(s, source, skip_bad=True)
        assert report.bad == [BadRecord("record 1", "x", IMPORT_TAKEN)]
        with pytest.raises(ImportSourceError) as got:
            import_nodes(s, source)
        assert str(got.value) == (
            f"{source}: 1 bad record(s); nothing was imported\n  {source}: record 1: {IMPORT_TAKEN}"
        )
        assert _files(root) == before
    assert _files(root) == before


@pytest.mark.parametrize("at", PLACES)
def test_an_unscoped_import_still_names_it(tmp_path: Path, at: str) -> None:
    root = tmp_path / "s"
    source = _import_store(root, HIDDEN["agent"], at)
    with MdCG(root) as s:
        s.sync()
        before = _files(root)
        assert import_nodes(s, source, skip_bad=True).bad == [BadRecord("record 1", "x", _held(at))]
    assert _files(root) == before


def test_a_scoped_import_is_told_of_a_memory_it_sees(tmp_path: Path) -> None:
    """A shared ``hush`` is one agent ``a`` sees: named, as before."""
    root = tmp_path / "s"
    source = _import_store(root, {}, "contextual/x.md")
    with MdCG(root, scope=A) as s:
        bad = import_nodes(s, source, skip_bad=True).bad
    assert bad == [BadRecord("record 1", "x", _held("contextual/x.md"))]


# -- 2. the handle's own memory, its file replaced by a hidden memory's -----------------------

LOST_SCOPED = (
    "no node with id 'x' in this store (its file was moved, deleted or changed outside md-cg since "
    "the last sync; run `mdcg sync` (MdCG.sync()) to take that in, then try again)"
)
LOST_NAMED = (
    "no node with id 'x' in this store (its file contextual/x.md was changed outside md-cg and is "
    "unusable: it holds memory 'hush' now; fix it, then run `mdcg sync` (MdCG.sync()))"
)


def _replaced_store(root: Path, hidden: dict[str, str]) -> None:
    """Agent ``a``'s ``x``; ``hush`` (``hidden``) moved over ``contextual/x.md`` by hand."""
    with MdCG(root, create=True) as s:
        s.add(Node(id="hush", layer="contextual", body="The door code 4711", **hidden))
        s.add(Node(id="x", layer="contextual", body="apple pie recipe", agent_scope="a"))
    os.replace(root / "contextual/hush.md", root / "contextual/x.md")


def _search_node(s: MdCG) -> object:
    results, _ = s.search("apple")
    assert [r.id for r in results] == ["x"]
    return results[0].node


OWN: dict[str, Callable[[MdCG], object]] = {
    "get": lambda s: s.get("x"),
    "read_text": lambda s: s.read_text("x"),
    "search_node": _search_node,
    "update": lambda s: s.update("x", body="z"),
    "move": lambda s: s.move("x", "structural"),
    "rename": lambda s: s.rename("x", "y"),
    "forget": lambda s: s.forget("x", "gone"),
    "delete": lambda s: s.delete("x"),
    "archive": lambda s: s.archive(["x"]),
    # attack a3 of session 36: the edit's callback was given hush's whole file
    "edit_text": lambda s: s.edit_text("x", _never_called),
}


def _never_called(text: str) -> str:
    raise AssertionError(f"the edit was given another memory's file: {text!r}")


@pytest.mark.parametrize("hidden", sorted(HIDDEN))
@pytest.mark.parametrize("name", list(OWN))
def test_a_scoped_handle_is_not_told_what_replaced_its_memorys_file(
    tmp_path: Path, name: str, hidden: str
) -> None:
    root = tmp_path / "s"
    _replaced_store(root, HIDDEN[hidden])
    before = _files(root)
    with MdCG(root, scope=A) as s:
        with pytest.raises(NodeNotFoundError) as got:
            OWN[name](s)
        assert str(got.value) == LOST_SCOPED
        assert (got.value.node_id, got.value.hidden) == ("x", "lost")
    after = _files(root)
    if name == "search_node":  # a search records its access, as every search does
        after = {k: v for k, v in after.items() if not k.startswith(".mdcg/access/")}
    assert after == before


def test_a_scoped_search_and_listing_show_nothing_of_it(tmp_path: Path) -> None:
    root = tmp_path / "s"
    _replaced_store(root, HIDDEN["agent"])
    with MdCG(root, scope=A) as s:
        results, _ = s.search("door code 4711")
        assert [(r.id, r.filler) for r in results] == [("x", True)]  # a filler: no term of it
        assert [e.id for e in s.list_nodes()] == ["x"]
        assert [e.title for e in s.list_nodes()] == ["apple pie recipe"]  # as the index holds it
        assert list(s.iter_nodes()) == []


@pytest.mark.parametrize("name", ["get", "read_text", "update", "forget", "edit_text"])
def test_an_unscoped_handle_is_still_told(tmp_path: Path, name: str) -> None:
    root = tmp_path / "s"
    _replaced_store(root, HIDDEN["agent"])
    with MdCG(root) as s:
        if name == "read_text":  # the trusted handle reads the file as it is
            assert "The door code 4711" in s.read_text("x")
            return
        with pytest.raises(NodeNotFoundError) as got:
            OWN[name](s)
        assert str(got.value) == LOST_NAMED


def test_a_scoped_handle_is_told_of_a_memory_it_sees(tmp_path: Path) -> None:
    """A shared ``hush`` moved over ``x.md`` is one agent ``a`` sees: named, as before."""
    root = tmp_path / "s"
    _replaced_store(root, {})
    with MdCG(root, scope=A) as s:
        with pytest.raises(NodeNotFoundError) as got:
            s.get("x")
        assert str(got.value) == LOST_NAMED


# -- 3. an overwrite of an unsynced copy of another scope's memory ----------------------------


def _untracked_store(root: Path, fields: dict[str, str]) -> bytes:
    """``contextual/x.md`` holds ``x`` (``fields``) and the index does not know it: the
    memory was forgotten, then its file brought back by hand."""
    with MdCG(root, create=True) as s:
        s.add(Node(id="x", layer="contextual", body="the other x", **fields))
    kept = root.parent / "x.md"
    shutil.copy(root / "contextual/x.md", kept)
    with MdCG(root) as s:
        s.forget("x", "gone")
    shutil.copy(kept, root / "contextual/x.md")
    return kept.read_bytes()


def _x() -> Node:
    return Node(id="x", layer="contextual", body="new text")


ADDS: dict[str, Callable[[MdCG], object]] = {
    "add_overwrite": lambda s: s.add(_x(), overwrite=True),
    "add_many_overwrite": lambda s: s.add_many([_x()], overwrite=True),
    "add": lambda s: s.add(_x()),
    "add_many": lambda s: s.add_many([_x()]),
    "apply_changes": lambda s: s.apply_changes(add=[_x()]),
}


@pytest.mark.parametrize("hidden", sorted(HIDDEN))
@pytest.mark.parametrize("name", list(ADDS))
def test_a_scoped_add_does_not_replace_an_unsynced_file_of_another_scope(
    tmp_path: Path, name: str, hidden: str
) -> None:
    root = tmp_path / "s"
    held = _untracked_store(root, HIDDEN[hidden])
    before = _files(root)
    with MdCG(root, scope=A) as s:
        with pytest.raises(DuplicateIdError) as got:
            ADDS[name](s)
        assert str(got.value) == TAKEN
        assert (got.value.node_id, got.value.path) == ("x", "")
    assert _files(root) == before
    assert (root / "contextual/x.md").read_bytes() == held


@pytest.mark.parametrize("fields", [{"agent_scope": "a"}, {}], ids=["own", "shared"])
@pytest.mark.parametrize("name", ["add_overwrite", "add_many_overwrite"])
def test_a_scoped_overwrite_still_replaces_a_file_the_scope_admits(
    tmp_path: Path, name: str, fields: dict[str, str]
) -> None:
    root = tmp_path / "s"
    _untracked_store(root, fields)
    with MdCG(root, scope=A) as s:
        ADDS[name](s)
        assert (s.get("x").body, s.get("x").agent_scope) == ("new text", "a")
    assert "new text" in (root / "contextual/x.md").read_text()


@pytest.mark.parametrize("name", ["add_overwrite", "add_many_overwrite"])
def test_an_unscoped_overwrite_still_replaces_it(tmp_path: Path, name: str) -> None:
    root = tmp_path / "s"
    _untracked_store(root, HIDDEN["agent"])
    with MdCG(root) as s:
        ADDS[name](s)
        assert (s.get("x").body, s.get("x").agent_scope) == ("new text", None)


def test_an_unscoped_add_is_still_told_of_the_unsynced_file(tmp_path: Path) -> None:
    root = tmp_path / "s"
    _untracked_store(root, HIDDEN["agent"])
    with MdCG(root) as s:
        with pytest.raises(DuplicateIdError) as got:
            s.add(_x())
        assert (got.value.path, got.value.untracked) == ("contextual/x.md", True)
