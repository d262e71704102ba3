"""A scoped sync takes only its scope's notes of files changed by hand (session 38, F4).

A process that follows another process's write of a memory whose file a person then
changed, moved or removed notes it (``Engine.hand_after``), for its next sync to tell.
A scoped handle's sync tells only its scope's changes -- but it took and cleared every
note, the other scopes' too: they were told to no one. The same process's next sync of
another scope (or an unscoped one) told nothing, and its compaction, which keeps the
notes of ids gone by hand (session 37), kept none of them, so a process opening after it
told nothing either. Now a scoped sync (and pick-up) takes the notes of the ids its scope
admits -- by the entry held before the note or the entry held now -- and leaves the
others for a sync that admits them and for the compaction. The writers and the person
are processes of their own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_compaction_notes_s37 import _entries_section
from test_scoped_deletions3_s31 import ADD, SYNC, UPDATE, _run  # writers of their own

from md_cg import MdCG, Scope, maintenance, snapshot
from md_cg.errors import NodeNotFoundError
from md_cg.reports import Moved

#: a person: removes the files of argv[2], appends a line to those of argv[3], moves
#: those of argv[4] to ``<id>_moved.md``
HAND = (
    "import sys, pathlib\nc = pathlib.Path(sys.argv[1]) / 'contextual'\n"
    "for i in filter(None, sys.argv[2].split(',')):\n    (c / f'{i}.md').unlink()\n"
    "for i in filter(None, sys.argv[3].split(',')):\n"
    "    (c / f'{i}.md').write_text((c / f'{i}.md').read_text() + '\\nedited by hand\\n')\n"
    "for i in filter(None, sys.argv[4].split(',')):\n    (c / f'{i}.md').rename(c / f'{i}_moved.md')\n"
)
A, B = {"agent_scope": "a"}, {"agent_scope": "b"}
MEMORIES = {"a1": A, "a2": A, "a3": A, "b1": B, "b2": B, "b3": B, "s": {}, "k": {}}


def _lists(report: Any) -> tuple[Any, ...]:
    return (report.added, report.changed, report.deleted, report.moved)


def _by_hand(root: str, rm: str = "", edit: str = "", mv: str = "") -> None:
    _run(HAND, root, rm, edit, mv)


def _written_then_changed(root: str, handle: MdCG, *, mv: str = "") -> None:
    """Another process updates every memory through md-cg; a person then removes a1, b1
    and s, edits a2 and b2 (and moves ``mv``); ``handle`` follows the updates after that
    (a read), so it notes each change for its next sync."""
    _run(UPDATE, root, ",".join(MEMORIES))
    _by_hand(root, rm="a1,b1,s", edit="a2,b2", mv=mv)
    assert "a1" not in handle.ids()  # follows the log: the notes


def _snapshot_notes(root: str) -> dict[str, str]:
    """id -> kind of the notes the snapshot keeps."""
    rows = _entries_section(Path(root)).get(snapshot.NOTES, [])
    assert isinstance(rows, list)
    return {row[0]: row[1] for row in rows}


@pytest.mark.parametrize("then", [None, "b"])
def test_a_scoped_sync_leaves_the_other_scopes_notes_to_the_next_sync(
    tmp_path: Path, then: str | None
) -> None:
    """Agent a's sync tells a's changes and the shared one; the same process's next sync
    -- unscoped, or agent b's -- tells b's (before: nothing)."""
    root = str(tmp_path / "m")
    _run(ADD, root, json.dumps(MEMORIES))
    with MdCG(root, scope=Scope(agent="a"), refresh_interval=0) as a:
        assert a.sync().clean
        _written_then_changed(root, a)
        assert _lists(a.sync()) == ((), ("a2",), ("a1", "s"), ())
        other = None if then is None else Scope(agent=then)
        assert _lists(maintenance.sync(a._engine, None, other)) == ((), ("b2",), ("b1",), ())
        assert _lists(maintenance.sync(a._engine, None, None)) == ((), (), (), ())  # told once
        assert dict(a._engine.hand_after) == {}


def test_a_scoped_pick_up_leaves_them_too_and_says_nothing_of_them(tmp_path: Path) -> None:
    root = str(tmp_path / "m")
    _run(ADD, root, json.dumps(MEMORIES))
    with MdCG(root, scope=Scope(agent="a"), refresh_interval=0) as a:
        assert a.sync_if_changed(min_interval=0) is None
        _written_then_changed(root, a)
        report = a.sync_if_changed(min_interval=0)
        assert report is not None and _lists(report) == ((), ("a2",), ("a1", "s"), ())
        assert a.sync_if_changed(min_interval=0) is None  # b's notes are not a's to tell
        assert _lists(a.sync()) == ((), (), (), ())
        assert sorted(a._engine.hand_after) == ["b1", "b2"]
        assert _lists(maintenance.sync(a._engine, None, None)) == ((), ("b2",), ("b1",), ())


@pytest.mark.parametrize("how", ["sync", "pick_up"])
def test_the_compaction_after_a_scoped_sync_keeps_the_other_scopes_gone_notes(
    tmp_path: Path, how: str
) -> None:
    """Before: the snapshot kept no note, and an unscoped process opening after it told
    nothing of b1's removal (an ``add`` of b1 went ahead)."""
    root = str(tmp_path / "m")
    _run(ADD, root, json.dumps(MEMORIES))
    with MdCG(root, scope=Scope(agent="a"), refresh_interval=0) as a:
        assert a.sync().clean
        _written_then_changed(root, a)
        report = a.sync() if how == "sync" else a.sync_if_changed(min_interval=0)
        assert report is not None and _lists(report) == ((), ("a2",), ("a1", "s"), ())
        a.compact_index()
    assert _snapshot_notes(root) == {"b1": "gone"}
    with MdCG(root) as full:
        with pytest.raises(NodeNotFoundError) as refused:  # its file may be somewhere
            full.add(id="b1", layer="contextual", body="b1 again", agent_scope="b")
        assert refused.value.hidden == "lost"
        # b2's edit is in the snapshot's entry: a compaction keeps only the notes of ids gone
        assert _lists(full.sync()) == ((), (), ("b1",), ())
    with MdCG(root) as full:
        assert _lists(full.sync()) == ((), (), (), ())


def test_another_scopes_memory_moved_by_hand_is_told_by_the_next_sync(tmp_path: Path) -> None:
    """b3 moved by hand: agent a's sync takes its file in (unnamed), and the note the
    follow left says where it was, for the unscoped sync to tell the move (before:
    nothing -- a's sync cleared the note)."""
    root = str(tmp_path / "m")
    _run(ADD, root, json.dumps(MEMORIES))
    with MdCG(root, scope=Scope(agent="a"), refresh_interval=0) as a:
        assert a.sync().clean
        _written_then_changed(root, a, mv="a3,b3")
        moved_a3 = Moved("a3", "contextual/a3.md", "contextual/a3_moved.md")
        told = a.sync()
        assert _lists(told) == ((), ("a2",), ("a1", "s"), (moved_a3,))
        assert "b3" not in json.dumps(told.to_dict())
        moved_b3 = Moved("b3", "contextual/b3.md", "contextual/b3_moved.md")
        assert _lists(maintenance.sync(a._engine, None, None)) == ((), ("b2",), ("b1",), (moved_b3,))
        assert _lists(maintenance.sync(a._engine, None, None)) == ((), (), (), ())


def test_a_note_without_the_entry_held_before_is_left_to_an_unscoped_sync(tmp_path: Path) -> None:
    """An id an unscoped sync told deleted, added again by agent b and removed by hand:
    the note keeps no entry of it (the sync line settled the id), so agent a's sync does
    not tell it -- and now leaves it for an unscoped sync, which does."""
    root = str(tmp_path / "m")
    _run(ADD, root, json.dumps({"ma": A, "k": {}}))
    with MdCG(root, scope=Scope(agent="a"), refresh_interval=0) as a:
        a.sync()
        _run(UPDATE, root, "ma")
        _by_hand(root, rm="ma")
        _run(SYNC, root)  # an unscoped sync tells and logs the deletion
        _run(ADD, root, json.dumps({"ma": B}))
        _run(UPDATE, root, "ma")
        _by_hand(root, rm="ma")
        assert _lists(a.sync()) == ((), (), (), ())
        assert _lists(maintenance.sync(a._engine, None, None)) == ((), (), ("ma",), ())


def test_the_mcp_servers_pick_ups_leave_the_other_scopes_notes(tmp_path: Path) -> None:
    """The server (agent a) picks up before every call: its sync tool tells a's changes,
    and its compaction keeps b1's note for the unscoped process after it."""
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client

    from md_cg.mcp_server import create_server

    root = str(tmp_path / "m")
    _run(ADD, root, json.dumps(MEMORIES))
    server = create_server(root, scope=Scope(agent="a"))

    async def run() -> dict[str, Any]:
        async with Client(server) as client:
            await client.call_tool("list", {})  # the first pick-up: nothing changed
            _run(UPDATE, root, ",".join(MEMORIES))
            _by_hand(root, rm="a1,b1,s", edit="a2,b2")
            await client.call_tool("list", {})  # follows the updates and picks up
            result = await client.call_tool("sync", {})
            assert not result.is_error, result.content[0].text
            return json.loads(result.content[0].text)

    synced = anyio.run(run)
    told = (synced["added"], synced["changed"], synced["deleted"], synced["moved"])
    assert told == ([], ["a2"], ["a1", "s"], [])
    server.store.compact_index()
    server.store.close()
    assert _snapshot_notes(root) == {"b1": "gone"}
    with MdCG(root) as full:
        assert _lists(full.sync()) == ((), (), ("b1",), ())
