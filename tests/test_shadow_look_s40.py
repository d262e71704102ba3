"""A scoped sync's view of duplicated ids and its untold notes, together (session 40).

Two branches met: s40-shadow tells a scoped sync a duplicated id's own copy coming to
stand for it as ``added`` and going as ``deleted`` (``maintenance._seen_first``), never a
move between two copies' files; s40-scopelook lists the hand changes of memories a
scoped sync's scope does not admit in its line as untold (``maintenance._leave_untold``),
for the next sync of a scope that admits them. Merged, ``_seen_first`` took every change
whose entry before the sync the scope did not admit for an own copy come to stand --
another scope's memory edited or moved by hand too --, so agent a's sync left agent b's
edit and move untold as ``added``, and b's sync told ``added ('b2', 'b3')`` where it
should tell ``changed ('b2',)`` and a move of b3. Now a change is ``added`` to a scope
only when the entry standing after the sync is one the scope admits. Every sync here
but the long-lived handle's is a process of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from test_scope_look_s39 import NOTHING
from test_scope_look_s39 import _told as _told_in_process
from test_scope_look_s40 import _in_process, _told
from test_shadow_s40 import _copy_as

from md_cg import MdCG, Scope
from md_cg.reports import Moved

A, B = {"agent_scope": "a"}, {"agent_scope": "b"}


def _sync_lines(root: Path) -> list[dict[str, Any]]:
    """Every ``sync`` line of the log."""
    lines = []
    for shard in sorted((root / ".mdcg" / "log").iterdir()):
        lines += [orjson.loads(x) for x in shard.read_bytes().splitlines() if x.strip()]
    return [r for r in lines if r.get("op") == "sync"]


def _edit(path: Path) -> None:
    path.write_text(path.read_text(encoding="utf-8") + "\nedited by hand\n", encoding="utf-8")


def test_another_scopes_edit_and_move_are_left_untold_as_such(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root, create=True) as s:
        s.add(id="a1", layer="contextual", body="memory a1 about okapis", **A)
        s.add(id="b2", layer="contextual", body="memory b2 about okapis", **B)
        s.add(id="b3", layer="contextual", body="memory b3 about okapis", **B)
    c = root / "contextual"
    _edit(c / "a1.md")
    _edit(c / "b2.md")
    (c / "b3.md").rename(c / "b3_moved.md")
    (a_sync,) = _in_process(root, "a", "sync")
    assert _told(a_sync) == {"changed": ["a1"]}
    # before: [["b2", "added", "contextual/b2.md"], ["b3", "added", "contextual/b3_moved.md"]]
    assert _sync_lines(root)[-1]["untold"] == [
        ["b2", "changed", "contextual/b2.md"],
        ["b3", "moved", "contextual/b3.md"],
    ]
    # before: (("b2", "b3"), (), (), ())
    moved = Moved("b3", "contextual/b3.md", "contextual/b3_moved.md")
    assert _told_in_process(str(root), "b") == ((), ("b2",), (), (moved,))
    assert (_told_in_process(str(root), "b"), _told_in_process(str(root), "-")) == (NOTHING, NOTHING)


def test_an_own_copy_coming_to_stand_is_added_beside_another_scopes_untold_edit(tmp_path: Path) -> None:
    """A person copies agent a's ``d`` into agent b's scope and edits a's ``x``: b's sync
    (a handle open before) tells ``added d`` -- its own copy stands now -- and leaves the
    edit of ``x`` untold as ``changed``, which a's sync tells; neither is told again."""
    root = tmp_path / "m"
    with MdCG(root, create=True) as s:
        s.add(id="d", layer="contextual", body="memory d of agent a", **A)
        s.add(id="x", layer="contextual", body="memory x of agent a", **A)
    with MdCG(root, scope=Scope(agent="b"), refresh_interval=0) as b:
        assert b.sync().clean
        _copy_as(root, "contextual/d.md", "knowledge/copied/d.md", "b", "memory d of agent b")
        _edit(root / "contextual" / "x.md")
        said = b.sync()
        assert (said.added, said.changed, said.deleted, said.moved) == (("d",), (), (), ())
        assert b.get("d").body == "memory d of agent b"
    assert _sync_lines(root)[-1]["untold"] == [["x", "changed", "contextual/x.md"]]
    (a_sync,) = _in_process(root, "a", "sync")
    assert _told(a_sync) == {"changed": ["x"]}
    assert [_told(r) for r in (*_in_process(root, "a", "sync"), *_in_process(root, "b", "sync"))] == [{}, {}]
