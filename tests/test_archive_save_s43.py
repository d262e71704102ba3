"""Session 43 (attack atk12).

F1: archive, unarchive and organize's archive are moves too (the file's bytes put under
``archive/`` or back, the old file removed in one commit), but they removed the old file by
a look at its stamp then an unlink, without the setting aside and check that session 42 gave
re-tag, ``move`` and ``rename``: a person's save landing between md-cg's read and the
unlink was removed -- the archived copy held the bytes read before it. Now their commit is
guarded by the stamps of the files read (:func:`md_cg.engine._change_once`): the old file is
set aside and checked, a save found there is put back and the archive runs again over it.

F3: undoing a refused move (:func:`md_cg.journal._put_back`) told md-cg's own new file by
its inode alone, and an in-place edit keeps the inode: a person's edit of the moved file (or
of a linking file a rename rewrote) made while it was at its path was removed with md-cg's
temp files. Now a file whose stamp or bytes are not those written is kept beside the path as
``<stem>.saved-<time>.md`` (:func:`md_cg.exchanged.keep_aside`).

The children are tests/test_move_s42.py's (a person's save just before md-cg's k-th unlink or
setting aside of x's file, by another process; a SIGKILL at a journal step), here finding an
archived x too."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
import test_exchange_s41
import test_move_s42
from test_exchange_s41 import _files, spawn
from test_hand_race_s39 import RUN_OP

from md_cg import Edge, MdCG, Node

store = test_exchange_s41.store

#: tests/test_move_s42.py's child, its x found where it is archived too
CHILD = test_move_s42.CHILD.replace('s.path_of("x")', 's.path_of("x", include_archived=True)').replace(
    "s.path_of(target)", "s.path_of(target, include_archived=True)"
)
assert CHILD.count("include_archived=True") == 2

ORGANIZE = (
    "r = s.organize('dryRun', candidates=[{'layer': 'knowledge', 'title': 'x', 'content': 'base'}]); "
    "s.organize('apply', run_id=r.run_id, decisions=[{'action': 'archive', 'id': 'x'}])"
)
#: the op, and whether x is archived before it
OPS = {
    "archive": ("s.archive('x')", False),
    "unarchive": ("s.unarchive('x')", True),
    "organize": (ORGANIZE, False),
}


def _store(root: Path, archived: bool = False, links: str = "") -> tuple[str, str]:
    """x in a bucket (archived when ``archived``), and nodes ``links`` linking to it: x's
    path now, and its path once the op has moved it."""
    with MdCG(root) as s:
        s.add(Node(id="x", layer="knowledge", body="base", tags=["domain:work"]))
        for i in links:
            s.add(Node(id=i, layer="knowledge", body=f"links {i}", edges=[Edge(target="x", type="similar")]))
        rel = s.path_of("x").relative_to(root).as_posix()
        if archived:
            s.archive("x")
    archived_rel = "archive/" + rel
    return (archived_rel, rel) if archived else (rel, archived_rel)


def _child(root: Path, op: str, *, k: int = 1, kill: str = "-") -> dict[str, object]:
    return spawn(CHILD, root, op, f"x {k} {kill}", kill != "-")


def _x(root: Path) -> tuple[str, str, int]:
    """x's path and body (archived or not) after a sync, and the commits it recovered."""
    with MdCG(root) as s:
        recovered = s.sync().recovered
        node = s.get("x", include_archived=True)
        return s.path_of("x", include_archived=True).relative_to(root).as_posix(), node.body, recovered


@pytest.mark.parametrize("how", sorted(OPS))
def test_a_save_landing_just_before_the_old_file_is_removed_is_moved_with_it(store: Path, how: str) -> None:
    """Before: archived with body 'base', the saved line in no file. Now the save is set
    aside, found, put back, and the op runs again over it: one file, moved, with the line."""
    op, archived = OPS[how]
    _, to = _store(store, archived)
    assert _child(store, op) == {"ok": True, "saves": 1}
    assert _x(store) == (to, "base\nHAND0", 0)
    assert _files(store) == [to]


def test_saves_before_every_run_refuse_the_archive_with_the_guards_message(store: Path) -> None:
    """A save before each run's setting aside: refused after three runs (ChangedOnDiskError),
    every save kept in x's file, x not archived."""
    rel, _ = _store(store)
    # the child's hook saves before the k-th (1st) setting aside of x's file: its count
    # set back before each one, it saves before every one
    again = "once = F.Dir.set_aside\nF.Dir.set_aside = lambda *a: (calls.__setitem__(0, 0), once(*a))[1]\n"
    out = spawn(CHILD.replace(RUN_OP, again + RUN_OP), store, "s.archive('x')", "x 1 -")
    message = (
        f"node 'x': its file {rel} changed on disk since it was read (an edit by hand or another "
        "program); nothing was written and the edit is kept -- read the node again and repeat the change"
    )
    assert out == {"ok": False, "type": "ChangedOnDiskError", "message": message, "saves": 3}
    assert _x(store) == (rel, "base\nHAND0\nHAND1\nHAND2", 0)
    assert _files(store) == [rel]


@pytest.mark.parametrize("how", ["archive", "unarchive"])
def test_killed_after_a_save_was_set_aside_recovery_undoes_the_move_and_keeps_the_save(
    store: Path, how: str
) -> None:
    """The save lands just before the setting aside, the writer is killed before its check
    (``aside-1``): the next process's recovery puts the save back at its path and takes the
    moved copy back -- x once, where it was, with the line. Before: no ``aside-1`` step (the
    child was not killed) and the save was unlinked."""
    op, archived = OPS[how]
    rel, to = _store(store, archived)
    assert _child(store, op, kill="aside-1") == {"killed": True}
    assert not (store / rel).exists() and (store / to).exists()  # the save at its temp name
    assert _x(store) == (rel, "base\nHAND0", 1)
    assert _files(store) == [rel]


#: the journal steps of an archive's commit, in order; killed before ``logged`` nothing is done
STEPS = ["temps", "logged", "rename-1", "renamed", "aside-1", "deleted"]


@pytest.mark.parametrize("kill", STEPS)
@pytest.mark.parametrize("how", ["archive", "unarchive"])
def test_killed_at_each_step_without_a_save_recovery_leaves_x_in_one_file(
    tmp_path: Path, how: str, kill: str
) -> None:
    """No save: killed at each step, the next process leaves x in one file -- where it was
    when killed before the line, moved after (rolled forward), its body as it was."""
    op, archived = OPS[how]
    rel, to = _store(tmp_path, archived)
    assert _child(tmp_path, op, k=0, kill=kill) == {"killed": True}
    where = rel if kill == "temps" else to
    assert _x(tmp_path) == (where, "base", 0 if kill == "temps" else 1)
    assert _files(tmp_path) == [where]


@pytest.mark.parametrize("kill", ["rename-1", "renamed", "deleted"])
def test_killed_then_the_old_file_saved_before_recovery_keeps_the_save(tmp_path: Path, kill: str) -> None:
    """Killed at a step where the old file is still at its path (or already removed), a
    person then writes it (their editor's save): recovery does not remove it -- the line is
    in a file of x."""
    rel, _ = _store(tmp_path)
    text = (tmp_path / rel).read_text()
    assert _child(tmp_path, "s.archive('x')", k=0, kill=kill) == {"killed": True}
    (tmp_path / (rel + ".swp")).write_text(text + "HAND9\n")
    os.replace(tmp_path / (rel + ".swp"), tmp_path / rel)
    with MdCG(tmp_path) as s:
        s.sync()
    assert any("HAND9" in (tmp_path / f).read_text() for f in _files(tmp_path))


# F3: a person edits md-cg's new file in place (another process, the inode kept) and saves
# x's old file (an editor's rename), both just before md-cg sets the old file aside: the
# check finds the save and the move is undone -- before, with the new file and its edit.
EDIT_BOTH = textwrap.dedent(
    """
    import glob
    INPLACE = ("import sys; f = open(sys.argv[1], 'r+'); t = f.read(); f.seek(0); "
               "f.write(t + 'EDIT\\\\n'); f.close()")
    real = F.Dir.set_aside
    def both(self, name, tmp):
        if os.path.join(root, self.rel, name) == tpath and not saves[0]:
            new = [p for p in glob.glob(root + "/**/" + NEW, recursive=True) if p != tpath]
            subprocess.run([sys.executable, "-c", INPLACE, new[0]], check=True)
            subprocess.run([sys.executable, "-c", SAVE, root, tpath, "0"], check=True)
            saves[0] = 1
        return real(self, name, tmp)
    F.Dir.set_aside = both
    """
)

#: the op, the file md-cg puts that the person edits in place, x's new id
PUTBACK = {
    "retag": ("s.update('x', tags=['domain:family'])", "x.md", "x"),
    "layer": ("s.move('x', 'contextual')", "x.md", "x"),
    "rename": ("s.rename('x', 'y')", "y.md", "y"),
    "archive": ("s.archive('x')", "x.md", "x"),
    "linker": ("s.rename('x', 'y')", "a.md", "y"),
}


@pytest.mark.parametrize("how", sorted(PUTBACK))
def test_an_in_place_edit_of_the_new_file_is_kept_when_the_move_is_undone(store: Path, how: str) -> None:
    """The undo keeps md-cg's new file with the person's edit beside its path as
    ``<stem>.saved-<time>.md``; the move then runs again over the old file's save. Before:
    EDIT in no file."""
    op, new, node_id = PUTBACK[how]
    _store(store, links="a" if how == "linker" else "")
    hook = EDIT_BOTH.replace("NEW,", f"{new!r},")
    assert spawn(CHILD.replace(RUN_OP, hook + RUN_OP), store, op, "x 0 -") == {"ok": True, "saves": 1}
    kept = [f for f in _files(store) if ".saved-" in f]
    assert len(kept) == 1 and Path(kept[0]).name.startswith(Path(new).stem + ".saved-")
    text = (store / kept[0]).read_text()
    assert text.endswith("links a\nEDIT\n" if how == "linker" else "base\nEDIT\n")
    with MdCG(store) as s:
        s.sync()
        moved = s.get(node_id, include_archived=True)
        assert moved.body == "base\nHAND0"
        ids = s.ids(include_archived=True)
        indexed = sorted(s.path_of(i, include_archived=True).relative_to(store).as_posix() for i in ids)
        assert indexed == [f for f in _files(store) if ".saved-" not in f]
        if how == "linker":
            assert [e.target for e in s.get("a").edges] == ["y"]
    assert not [f for f in _files(store) if Path(f).name.startswith(".")]  # no temp file left


def test_an_undo_with_no_edit_leaves_no_kept_file(store: Path) -> None:
    """The same undo without the in-place edit: md-cg's own new file, as written, is removed
    (nothing kept beside), and the move runs again over the save."""
    _store(store)
    op = PUTBACK["retag"][0]
    assert _child(store, op) == {"ok": True, "saves": 1}
    assert [f for f in _files(store) if ".saved-" in f] == []
    with MdCG(store) as s:
        assert (s.get("x").body, s.get("x").tags) == ("base\nHAND0", ["domain:family"])
