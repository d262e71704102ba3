"""A scoped sync logs as told only the hand changes of memories its scope admits (session 39).

What a scoped sync finds by looking at the files -- a memory it held whose file a person
removed, edited or moved, a file made by hand, no write of md-cg between -- it took in for
every scope and logged in its sync line, telling only its scope's. Every process following
that line took another scope's change in as told: agent b's sync, and an unscoped one,
told nothing, and the change was told to no one. Now the line logs as told only the
changes of memories the scope admits (by the entry held now; a removal by the entry held
before); the others are noted in the process (``Engine.hand_after``) for a sync that may
tell them and for its compaction, and (session 40) listed in the line as untold, so that
every process following it takes them in and notes them too. The person,
the writers and the other handles' syncs are processes of their own where the test says.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from test_compaction_notes_s37 import _entries_section
from test_scoped_deletions3_s31 import ADD, _run  # writers of their own

from md_cg import MdCG, Scope, maintenance, snapshot
from md_cg.access import inject_items
from md_cg.errors import NodeNotFoundError
from md_cg.reports import Moved

A, B = {"agent_scope": "a"}, {"agent_scope": "b"}
MEMORIES = {"a1": A, "a2": A, "b1": B, "b2": B, "b3": B, "s": {}, "s2": {}}
#: a process of its own syncing with the scope argv[2] ("-": none); prints what it was told
TOLD = (
    "import sys, json\nfrom md_cg import MdCG, Scope\n"
    "scope = None if sys.argv[2] == '-' else Scope(agent=sys.argv[2])\n"
    "with MdCG(sys.argv[1], scope=scope) as h:\n    r = h.sync()\n"
    "moved = [[m.node_id, m.old_path, m.new_path] for m in r.moved]\n"
    "print(json.dumps([r.added, r.changed, r.deleted, moved]))\n"
)
NEW_B4 = "---\nid: b4\nagent_scope: b\n---\nmemory b4 about okapis, written by hand\n"


def _lists(report: Any) -> tuple[Any, ...]:
    return (report.added, report.changed, report.deleted, report.moved)


def _told(root: str, who: str) -> tuple[Any, ...]:
    """What a sync of a process of its own (scope ``who``, ``-``: none) tells."""
    import subprocess

    from conftest import python_env

    out = subprocess.run(
        [sys.executable, "-c", TOLD, root, who], check=True, capture_output=True, text=True, env=python_env()
    ).stdout
    added, changed, deleted, moved = json.loads(out)
    return (tuple(added), tuple(changed), tuple(deleted), tuple(Moved(*m) for m in moved))


def _by_hand(root: str) -> None:
    """A person removes a1 and b1, edits a2 and b2, moves b3, writes b4's file."""
    c = Path(root) / "contextual"
    (c / "a1.md").unlink()
    (c / "b1.md").unlink()
    for i in ("a2", "b2"):
        (c / f"{i}.md").write_text((c / f"{i}.md").read_text() + "\nedited by hand\n")
    (c / "b3.md").rename(c / "b3_moved.md")
    (c / "b4.md").write_text(NEW_B4)


MOVED_B3 = Moved("b3", "contextual/b3.md", "contextual/b3_moved.md")
B_TOLD = (("b4",), ("b2",), ("b1",), (MOVED_B3,))
NOTHING: tuple[Any, ...] = ((), (), (), ())


def _store(tmp_path: Path) -> str:
    root = str(tmp_path / "m")
    _run(ADD, root, json.dumps(MEMORIES))
    return root


@pytest.mark.parametrize("then", ["b", "-"])
def test_another_scopes_hand_changes_are_told_by_the_next_sync_that_admits_them(
    tmp_path: Path, then: str
) -> None:
    """Agent a's sync (a process of its own) tells a's changes; the next sync of agent b
    or an unscoped one tells b's (before: nothing), and the one after it nothing."""
    root = _store(tmp_path)
    _by_hand(root)
    assert _told(root, "a") == ((), ("a2",), ("a1",), ())
    assert _told(root, then) == B_TOLD
    assert _told(root, "b") == NOTHING
    assert _told(root, "-") == NOTHING


def test_long_lived_handles_of_each_scope(tmp_path: Path) -> None:
    """Three handles open before the person's changes (each its own engine and log
    cursor): a's sync, then b's -- which tells b's changes (before: nothing) --, then the
    unscoped one's, which tells nothing more; a's second sync tells nothing, and its
    engine's unscoped sync tells b's changes from its notes, once."""
    root = _store(tmp_path)
    with (
        MdCG(root, scope=Scope(agent="a"), refresh_interval=0) as a,
        MdCG(root, scope=Scope(agent="b"), refresh_interval=0) as b,
        MdCG(root, refresh_interval=0) as full,
    ):
        for h in (a, b, full):
            assert h.sync().clean
        _by_hand(root)
        assert _lists(a.sync()) == ((), ("a2",), ("a1",), ())
        assert _lists(a.sync()) == NOTHING
        assert _lists(b.sync()) == B_TOLD
        assert _lists(full.sync()) == NOTHING
        assert sorted(a._engine.hand_after) == ["b1", "b2", "b3", "b4"]
        # the same process's unscoped sync after b's: b's line told them (not again)
        assert _lists(maintenance.sync(a._engine, None, None)) == NOTHING
        assert dict(a._engine.hand_after) == {}


def test_the_same_engines_next_sync_tells_them_from_its_notes(tmp_path: Path) -> None:
    root = _store(tmp_path)
    with MdCG(root, scope=Scope(agent="a"), refresh_interval=0) as a:
        assert a.sync().clean
        _by_hand(root)
        assert _lists(a.sync()) == ((), ("a2",), ("a1",), ())
        assert _lists(maintenance.sync(a._engine, None, Scope(agent="b"))) == B_TOLD
        assert _lists(maintenance.sync(a._engine, None, None)) == NOTHING
    # the scoped sync of b logs the notes it tells (session 40; session 38 logged none, and
    # every other process told them again): told once
    assert _told(root, "-") == NOTHING
    assert _told(root, "b") == NOTHING


def test_a_scoped_pick_up_leaves_them_too(tmp_path: Path) -> None:
    """The MCP server's pick-up before each call (agent a) tells a's changes and logs
    only them; an unscoped process tells b's (before: nothing)."""
    root = _store(tmp_path)
    with MdCG(root, scope=Scope(agent="a"), refresh_interval=0) as a:
        assert a.sync_if_changed(min_interval=0) is None
        _by_hand(root)
        report = a.sync_if_changed(min_interval=0)
        assert report is not None and _lists(report) == ((), ("a2",), ("a1",), ())
        assert a.sync_if_changed(min_interval=0) is None
        assert _told(root, "-") == B_TOLD
        assert _told(root, "b") == NOTHING


def test_a_shared_memory_narrowed_by_hand_to_another_scope(tmp_path: Path) -> None:
    """s2, shared, edited by hand to agent b's: a's sync does not tell it (a sees it no
    more) and leaves it to b's, which tells it changed (before: nothing). a's search
    finds it no more; another agent-a handle that has not synced holds it as it was (as
    before any sync: session 37) -- its hit's node is refused and ``inject`` leaves it out."""
    root = _store(tmp_path)
    path = Path(root) / "contextual" / "s2.md"
    with (
        MdCG(root, scope=Scope(agent="a"), refresh_interval=0) as a,
        MdCG(root, scope=Scope(agent="a")) as a2,
    ):
        assert a.sync().clean
        assert "s2" in {r.id for r in a2.search("okapis", record=False)[0]}
        path.write_text(path.read_text().replace("---\n", "---\nagent_scope: b\n", 1))
        assert _lists(a.sync()) == NOTHING
        assert {r.id for r in a.search("okapis", record=False)[0]} == {"a1", "a2", "s"}
        hit = next(r for r in a2.search("okapis", record=False)[0] if r.id == "s2")
        with pytest.raises(NodeNotFoundError):
            _ = hit.node
        assert sorted(item.id for item in inject_items(a2, "okapis", 10)) == ["a1", "a2", "s"]
        # a's engine left its note to b: its next agent-a sync or pick-up has nothing to
        # take (a note was a's to take by the entry held before it too: every pick-up looked)
        assert sorted(a._engine.hand_after) == ["s2"]
        assert not maintenance._notes_to_tell(a._engine, Scope(agent="a"))
        assert _lists(a.sync()) == NOTHING
        assert sorted(a._engine.hand_after) == ["s2"]
        assert _told(root, "b") == ((), ("s2",), (), ())
        assert _told(root, "-") == NOTHING
        assert _lists(a.sync()) == NOTHING
        assert dict(a._engine.hand_after) == {}  # b's sync line told it


def test_a_compaction_after_a_scoped_sync_keeps_the_removal(tmp_path: Path) -> None:
    """a's process compacts after its sync: the snapshot keeps b1's ``gone`` note, and an
    unscoped process opening after it tells b1's removal (before: nothing). b2's edit,
    b3's move and b4 are in the snapshot as a took them in: told to a process that follows
    the log without reloading it (b's long-lived handle), not to one opening after (a
    limit, as for session 38's notes)."""
    root = _store(tmp_path)
    with MdCG(root, scope=Scope(agent="b"), refresh_interval=0) as b:
        assert b.sync().clean
        _by_hand(root)
        with MdCG(root, scope=Scope(agent="a"), refresh_interval=0) as a:
            assert _lists(a.sync()) == ((), ("a2",), ("a1",), ())
            a.compact_index()
        rows = _entries_section(Path(root)).get(snapshot.NOTES, [])
        assert isinstance(rows, list)
        assert [(r[0], r[1], r[2]) for r in rows] == [("b1", "gone", "contextual/b1.md")]
        assert _told(root, "-") == ((), (), ("b1",), ())
        assert _told(root, "-") == NOTHING
        # b followed the compaction exactly (its index still held b's memories as before)
        assert _lists(b.sync()) == (("b4",), ("b2",), (), (MOVED_B3,))


def test_reads_before_any_sync_tells_them_serve_no_removed_file_and_write_nothing(tmp_path: Path) -> None:
    """Between a's sync and b's, b's and an unscoped handle's searches (and a read-only
    handle's opened then) do not serve b1, whose file is gone, nor does a's serve any of b's; none
    of those reads writes a byte under ``.mdcg/``."""
    root = _store(tmp_path)
    meta = Path(root) / ".mdcg"

    def listing() -> dict[str, tuple[int, int]]:
        return {
            str(p.relative_to(meta)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(meta.rglob("*"))
            if p.is_file() and "locks" not in p.parts and p.name != "gate"
        }

    with (
        MdCG(root, scope=Scope(agent="b"), refresh_interval=0) as b,
        MdCG(root, refresh_interval=0) as full,
        MdCG(root, scope=Scope(agent="a"), refresh_interval=0) as a,
    ):
        for h in (a, b, full):
            h.search("okapis", record=False)
        _by_hand(root)
        assert _lists(a.sync()) == ((), ("a2",), ("a1",), ())
        before = listing()
        assert {r.id for r in a.search("okapis", record=False)[0]} == {"a2", "s", "s2"}
        # a's line took b's changes in, untold (session 40): b3 at its new path, b4
        assert {r.id for r in b.search("okapis", record=False)[0]} == {"b2", "b3", "b4", "s", "s2"}
        everyone = {"a2", "b2", "b3", "b4", "s", "s2"}
        assert {r.id for r in full.search("okapis", record=False)[0]} == everyone
        with MdCG(root, read_only=True) as fresh:
            assert {r.id for r in fresh.search("okapis", record=False)[0]} == everyone
        assert listing() == before
        assert _lists(b.sync()) == B_TOLD
        assert os.path.exists(Path(root) / "contextual" / "b3_moved.md")


def test_changes_found_by_two_scoped_syncs_add_up(tmp_path: Path) -> None:
    """Between two of a's syncs and after them: b3 moved, then edited; b2 edited, then
    removed; b5 written by hand, then removed. The others hold b3 at b3.md, b2 as it was,
    and never held b5: a's engine's unscoped sync tells b3 moved and b2 deleted, nothing
    of b5 (a note of b5 gone told a deletion of a memory never told, refused its ``add``
    and was kept by the compaction); agent b's process tells the same (before: nothing)."""
    root = _store(tmp_path)
    c = Path(root) / "contextual"
    b5 = NEW_B4.replace("b4", "b5")
    with MdCG(root, scope=Scope(agent="a"), refresh_interval=0) as a:
        assert a.sync().clean
        (c / "b3.md").rename(c / "b3_moved.md")
        (c / "b2.md").write_text((c / "b2.md").read_text() + "\nedited by hand\n")
        (c / "b5.md").write_text(b5)
        assert _lists(a.sync()) == NOTHING
        (c / "b3_moved.md").write_text((c / "b3_moved.md").read_text() + "\nedited by hand\n")
        (c / "b2.md").unlink()
        (c / "b5.md").unlink()
        assert _lists(a.sync()) == NOTHING
        assert {i: n[:2] for i, n in a._engine.hand_after.items()} == {
            "b3": ("moved", "contextual/b3.md"),
            "b2": ("gone", "contextual/b2.md"),
        }
        a.compact_index()
        rows = _entries_section(Path(root)).get(snapshot.NOTES, [])
        assert isinstance(rows, list) and [r[0] for r in rows] == ["b2"]
        assert _lists(maintenance.sync(a._engine, None, Scope(agent="b"))) == ((), (), ("b2",), (MOVED_B3,))
    _run(ADD, root, json.dumps({"b5": B}))  # never told, so not refused
    with MdCG(root) as full:
        assert full.get("b5").agent_scope == "b"
