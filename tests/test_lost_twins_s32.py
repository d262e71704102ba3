"""A memory's file moved or deleted by hand, a search that drops its id, then a write
(session 32, review r5 of lostadd-s32). Three holes the note of the dropped id
(:attr:`md_cg.engine.Engine.hand_after`) left:

1. (twin_case.py, twin_nfd.py) The note was looked up by the exact id: ``add(id="X1")``
   -- a case twin of the dropped x1 --, ``add_many``, ``apply_changes(add=...)`` and
   ``rename("y1", "X1")`` SUCCEEDED, as did the NFD spelling of a dropped NFC id, and wrote
   a second file of the memory (``sync`` then told twins); without the search the same
   writes were refused with ``IdCollisionError``. Now the lookup goes by the id's
   uniqueness key: the same refusal, naming the same file, with or without the search.
2. (putback.py) The file put back at its old path by hand: ``update``/``get`` said it was
   moved while it was there, and the next sync told a move from the path to itself. Now
   the handle takes it back; the sync tells nothing (or ``changed`` when its bytes do).
3. (lost_a.py S5) ``rename("y1", "x1")`` onto the dropped id named no file; now it does."""

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
from test_lost_after_read_s32 import _READER  # the reader process: search, then add argv[2]

import md_cg
from md_cg import MdCG, Scope
from md_cg.errors import IdCollisionError, InvalidArgumentError, NodeNotFoundError
from md_cg.node import Node
from md_cg.script import twin_labels

_ENV = {**os.environ, "PYTHONPATH": str(Path(md_cg.__file__).resolve().parent.parent)}
NFC, NFD = "caf\u00e9", "cafe\u0301"


def _store(tmp_path: Path, how: str, first: str = "x1") -> tuple[Path, MdCG]:
    """A handle of a store with ``first`` and y1, ``first``'s file then moved to
    knowledge/handmoved/ or deleted by hand."""
    root = tmp_path / "m"
    s = MdCG(root, refresh_interval=0)
    s.add(Node(id=first, layer="knowledge", body="original walnut text"))
    s.add(Node(id="y1", layer="knowledge", body="pecan other text"))
    if how == "move":
        (root / "knowledge/handmoved").mkdir()
        shutil.move(root / f"knowledge/orphan/{first}.md", root / f"knowledge/handmoved/{first}.md")
    else:
        (root / f"knowledge/orphan/{first}.md").unlink()
    return root, s


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md") if ".mdcg" not in p.parts)


def _collides(new: str, old: str, path: str) -> str:
    new, old = twin_labels(new, old)  # an NFC/NFD pair escaped (session 33)
    return (
        f"node id {new} collides with the existing id {old} ({path}): ids that differ only by "
        "letter case or Unicode normalisation are the same file on macOS and Windows; choose "
        "another id or change the existing node"
    )


#: Every write of a case twin of the dropped x1 (each SUCCEEDED after a search before).
TWIN_WRITES: dict[str, Callable[[MdCG], Any]] = {
    "add": lambda s: s.add(Node(id="X1", layer="knowledge", body="caps")),
    "add_overwrite": lambda s: s.add(Node(id="X1", layer="knowledge", body="caps"), overwrite=True),
    "add_many": lambda s: s.add_many([Node(id="X1", layer="knowledge", body="caps")]),
    "add_unique": lambda s: s.add_unique(Node(id="X1", layer="knowledge", body="caps")),
    "apply_changes": lambda s: s.apply_changes(add=[Node(id="X1", layer="knowledge", body="caps")]),
    "rename": lambda s: s.rename("y1", "X1"),
}


@pytest.mark.parametrize("how", ["move", "delete"])
@pytest.mark.parametrize("searched", [False, True])
@pytest.mark.parametrize("write", list(TWIN_WRITES))
def test_a_twin_of_a_dropped_id_is_refused_as_without_the_search(
    tmp_path: Path, write: str, searched: bool, how: str
) -> None:
    root, s = _store(tmp_path, how)
    with s:
        if searched:
            assert [r.id for r in s.search("walnut")[0]] == ["y1"]  # x1 dropped: its file is gone
        with pytest.raises(IdCollisionError) as err:
            TWIN_WRITES[write](s)
        assert str(err.value) == _collides("X1", "x1", "knowledge/orphan/x1.md")
        moved = ["knowledge/handmoved/x1.md"] if how == "move" else []
        assert _files(root) == [*moved, "knowledge/orphan/y1.md"]
        report = s.sync()
        assert report.twins == ()
        assert report.duplicates == ()
        if how == "delete":  # told deleted: the id is free now
            assert report.deleted == ("x1",)
            TWIN_WRITES[write](s)
            assert "X1" in s
        else:
            assert [(m.node_id, m.new_path) for m in report.moved] == [("x1", "knowledge/handmoved/x1.md")]
            with pytest.raises(IdCollisionError) as err:
                TWIN_WRITES[write](s)
            assert str(err.value) == _collides("X1", "x1", "knowledge/handmoved/x1.md")


def test_an_nfd_spelling_of_a_dropped_nfc_id_is_refused(tmp_path: Path) -> None:
    root, s = _store(tmp_path, "move", first=NFC)
    with s:
        assert [r.id for r in s.search("walnut")[0]] == ["y1"]
        with pytest.raises(IdCollisionError) as err:
            s.add(Node(id=NFD, layer="knowledge", body="decomposed"))
        assert str(err.value) == _collides(NFD, NFC, f"knowledge/orphan/{NFC}.md")
        assert err.value.existing == NFC
        assert _files(root) == [f"knowledge/handmoved/{NFC}.md", "knowledge/orphan/y1.md"]
        assert s.sync().twins == ()


def test_a_scoped_handle_is_refused_the_twin_without_the_id_or_file(tmp_path: Path) -> None:
    root, s = _store(tmp_path, "move")
    s.close()
    with MdCG(root, scope=Scope(), refresh_interval=0) as scoped:
        scoped.search("walnut")
        with pytest.raises(IdCollisionError) as err:
            scoped.add(Node(id="X1", layer="knowledge", body="caps"))
    assert str(err.value) == (
        "node id 'X1' collides with an existing id whose file was moved, deleted or changed outside "
        "md-cg since the last sync: ids that differ only by letter case or Unicode normalisation are "
        "the same file on macOS and Windows; choose another id"
    )
    assert (err.value.existing, err.value.path) == (None, "")
    assert _files(root) == ["knowledge/handmoved/x1.md", "knowledge/orphan/y1.md"]


def test_a_second_process_searching_then_adding_the_twin_is_refused(tmp_path: Path) -> None:
    root, s = _store(tmp_path, "move")
    s.close()
    out = subprocess.run(
        [sys.executable, "-c", _READER, str(root), "X1"], env=_ENV, check=True, capture_output=True, text=True
    ).stdout
    assert out == f"['y1'] IdCollisionError {_collides('X1', 'x1', 'knowledge/orphan/x1.md')}\n"
    assert _files(root) == ["knowledge/handmoved/x1.md", "knowledge/orphan/y1.md"]


def test_a_rename_onto_the_dropped_id_names_its_file(tmp_path: Path) -> None:
    root, s = _store(tmp_path, "move")
    with s:
        s.search("walnut")
        with pytest.raises(NodeNotFoundError) as err:
            s.rename("y1", "x1")
        assert (str(err.value), err.value.hidden) == (_moved("x1"), "lost")
        with pytest.raises(InvalidArgumentError):  # differs from x1 by case only: its own refusal
            s.rename("x1", "X1")
    assert _files(root) == ["knowledge/handmoved/x1.md", "knowledge/orphan/y1.md"]


def _put_back(root: Path, edit: bool) -> None:
    back = root / "knowledge/orphan/x1.md"
    shutil.move(root / "knowledge/handmoved/x1.md", back)
    if edit:
        back.write_text(back.read_text().replace("original walnut text", "edited walnut text"))


@pytest.mark.parametrize("edit", [False, True])
def test_a_file_put_back_is_taken_back_and_the_sync_tells_no_move(tmp_path: Path, edit: bool) -> None:
    root, s = _store(tmp_path, "move")
    with s:
        assert [r.id for r in s.search("walnut")[0]] == ["y1"]
        _put_back(root, edit)
        assert s.get("x1").body == ("edited walnut text" if edit else "original walnut text")
        report = s.sync()
        assert (report.moved, report.changed, report.added, report.deleted) == (
            (),
            ("x1",) if edit else (),
            (),
            (),
        )
        assert s.sync().changed == ()  # told once
        assert s.update("x1", body="after put back").body == "after put back"
        assert _files(root) == ["knowledge/orphan/x1.md", "knowledge/orphan/y1.md"]
        assert [r.id for r in s.search("walnut back")[0]][:1] == ["x1"]


@pytest.mark.parametrize("edit", [False, True])
def test_a_write_after_the_put_back_goes_through_and_the_sync_tells_it_right(
    tmp_path: Path, edit: bool
) -> None:
    root, s = _store(tmp_path, "move")
    with s:
        s.search("walnut")
        _put_back(root, edit)
        with pytest.raises(IdCollisionError) as err:  # the memory is there again: X1 is its twin
            s.add(Node(id="X1", layer="knowledge", body="caps"))
        assert str(err.value) == _collides("X1", "x1", "knowledge/orphan/x1.md")
        assert s.update("x1", body="updated").body == "updated"
        report = s.sync()
        assert (report.moved, report.changed, report.added, report.deleted) == ((), (), (), ())
        assert _files(root) == ["knowledge/orphan/x1.md", "knowledge/orphan/y1.md"]
