"""A compaction keeps the notes of files a person moved or removed after md-cg wrote them
(session 36's attack a2, left open there; fixed in session 37).

A process that follows another process's write of ``hot`` and finds its file gone (a
person moved or removed it) notes it, for its next sync to tell, and refuses an add of
``hot`` until then. Every ``forget`` compacts: the snapshot it wrote held nothing of the
note, so a process opening after it knew nothing of it -- its add of ``hot`` went ahead,
and with the file moved by hand to another name the id was then in two files (a later
``forget`` removed the person's copy with the memory); its sync told nothing. Now the
snapshot keeps the compacting process's notes (:data:`md_cg.snapshot.NOTES`), a process
loading it takes them in, and a note the new snapshot does not bear out (a stale one: the
write was undone through md-cg) is dropped when a process loads it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from test_add_race_s35 import _ENV, _FORGETTER, HOT, LOST_HOT, _md_files, _run, _store, start_adder

from md_cg import MdCG, snapshot
from md_cg.errors import NodeNotFoundError

#: Adds ``hot`` and exits without compacting (its ``put`` stays in the log).
_ADD_NO_COMPACT = """
import sys
from md_cg import MdCG
with MdCG(sys.argv[1], auto_compact=None) as m:
    m.add(id="hot", body="hot by another process", layer="contextual", created_at=1700000001)
"""
MOVED = "contextual/hot-by-hand.md"


def _noted_then_compacted(tmp_path: Path, how: str) -> Path:
    """``hot`` added by another process, then moved (``how`` ``"mv"``) or removed
    (``"rm"``) by hand; a handle that follows the add notes it (its ``get`` is refused
    as lost) and compacts by forgetting another memory. Returns the store."""
    root = _store(tmp_path)
    with MdCG(root) as a:
        a.add(id="other", body="another memory", layer="contextual")
        assert a.ids() == ["other", "seed"]  # read before the add
        _run(_ADD_NO_COMPACT, root)
        if how == "mv":
            (root / HOT).rename(root / MOVED)
        else:
            (root / HOT).unlink()
        with pytest.raises(NodeNotFoundError) as lost:
            a.get("hot")
        assert (lost.value.hidden, str(lost.value).strip("\"'")) == ("lost", LOST_HOT)
        a.forget("other", "done with it")  # compacts: the snapshot covers the add's line
    assert list((root / ".mdcg/log").iterdir()) == []  # every shard folded into the snapshot
    return root


@pytest.mark.parametrize("how", ["mv", "rm"])
def test_a_process_opening_after_the_compaction_refuses_the_add(tmp_path: Path, how: str) -> None:
    """Before: the add went ahead (with ``mv``, ``hot`` then in two files)."""
    root = _noted_then_compacted(tmp_path, how)
    with MdCG(root) as f:
        with pytest.raises(NodeNotFoundError) as refused:
            f.add(id="hot", body="hot again", layer="contextual")
        assert (refused.value.hidden, str(refused.value).strip("\"'")) == ("lost", LOST_HOT)
        with pytest.raises(NodeNotFoundError) as read:
            f.get("hot")
        assert str(read.value).strip("\"'") == LOST_HOT
    kept = [MOVED, "contextual/seed.md"] if how == "mv" else ["contextual/seed.md"]
    assert _md_files(root) == kept


def test_its_sync_tells_the_move_and_the_next_compaction_keeps_no_note(tmp_path: Path) -> None:
    """The sync of a process opening after the compaction tells what the compacting one
    would have told (before: nothing, and ``hot`` stayed out of the index as moved)."""
    root = _noted_then_compacted(tmp_path, "mv")
    with MdCG(root) as f:
        report = f.sync()
        assert [(m.node_id, m.old_path, m.new_path) for m in report.moved] == [("hot", HOT, MOVED)]
        assert (report.added, report.deleted) == ((), ())
        assert f.get("hot").body == "hot by another process"
        f.compact_index()
    head = _entries_section(root)
    assert snapshot.NOTES not in head
    with MdCG(root) as g:
        assert (g.get("hot").body, g.sync().moved, _md_files(root)) == (
            "hot by another process",
            (),
            [MOVED, "contextual/seed.md"],
        )


def test_its_sync_tells_the_removal_and_the_id_is_free_after(tmp_path: Path) -> None:
    root = _noted_then_compacted(tmp_path, "rm")
    with MdCG(root) as f:
        assert f.sync().deleted == ("hot",)
        assert f.add(id="hot", body="hot again", layer="contextual").id == "hot"
    with MdCG(root, read_only=True) as g:
        assert (g.ids(), g.get("hot").body) == (["hot", "seed"], "hot again")
    assert _md_files(root) == [HOT, "contextual/seed.md"]


def test_a_handle_open_across_the_compaction_still_refuses(tmp_path: Path) -> None:
    """A handle that opened before the add, read nothing since, and reloads the snapshot
    (the compaction folded shards it had not read) takes the note in."""
    root = _store(tmp_path)
    with MdCG(root, refresh_interval=0) as b:
        assert b.ids() == ["seed"]
        with MdCG(root) as a:
            a.add(id="other", body="another memory", layer="contextual")
            _run(_ADD_NO_COMPACT, root)
            (root / HOT).rename(root / MOVED)
            with pytest.raises(NodeNotFoundError):
                a.get("hot")
            a.forget("other", "done with it")
        with pytest.raises(NodeNotFoundError) as refused:
            b.add(id="hot", body="hot again", layer="contextual")
        assert str(refused.value).strip("\"'") == LOST_HOT
        assert [(m.node_id, m.new_path) for m in b.sync().moved] == [("hot", MOVED)]
    assert _md_files(root) == [MOVED, "contextual/seed.md"]


def test_a_stale_note_is_not_kept_by_a_compaction(tmp_path: Path) -> None:
    """Session 35's stale note (another process added ``hot`` and stays open, a third
    forgot it and compacted): the handle that holds it drops it when it loads the
    forget's snapshot, so its own compaction keeps none, and a process opening after it
    adds ``hot`` (kept, the note made every process refuse the add until a sync)."""
    root = _store(tmp_path)
    with MdCG(root) as a:
        assert a.ids() == ["seed"]
        adder = start_adder(root)
        try:
            assert adder.stdout is not None and adder.stdout.readline() == "added\n"
            _run(_FORGETTER, root)
            assert "hot" not in a.ids()
            a.compact_index()
        finally:
            adder.communicate("go\n", timeout=60)
        assert adder.returncode == 0
    assert snapshot.NOTES not in _entries_section(root)
    with MdCG(root) as f:
        assert f.add(id="hot", body="hot again", layer="contextual").id == "hot"
        assert f.sync().deleted == ()
    assert _md_files(root) == [HOT, "contextual/seed.md"]


def _entries_section(root: Path) -> dict[str, object]:
    """The snapshot's entries section, decoded."""
    data = (root / ".mdcg/index.snapshot").read_bytes()
    head, _, rest = data[len(snapshot.MAGIC) :].partition(b"\n")
    size = orjson.loads(head)["entries_len"]
    return dict(orjson.loads(rest[:size]))


def test_the_notes_round_trip_and_a_crafted_one_refuses_the_snapshot(tmp_path: Path) -> None:
    root = _noted_then_compacted(tmp_path, "mv")
    kept = _entries_section(root)[snapshot.NOTES]
    assert isinstance(kept, list) and [n[:3] for n in kept] == [["hot", "gone", HOT]]
    snap = snapshot.load(str(root))
    assert snap is not None
    assert snap.notes == {"hot": ("gone", HOT, None)}  # this handle never held it
    # a note keeping the entry held before (its scope fields: a scoped sync tells by them)
    seed = snap.state.entries["seed"]
    notes = {**snap.notes, "seed": ("gone", "contextual/seed.md", seed)}
    again = snapshot.decode(snapshot.encode(snap.state, snap.offsets, notes=notes))
    # seed's note is dropped at load: the snapshot holds seed (session 38; its entry's
    # round trip: test_snapshot_notes_s38.py)
    assert not isinstance(again, str) and again.notes == snap.notes
    entry = orjson.loads(orjson.dumps(snapshot._encode_notes(notes)))[1][3]
    for bad, why in [
        (
            ["hot", "gone", "../../etc/passwd.md", None],
            "unsafe (a note of id 'hot' at '../../etc/passwd.md')",
        ),
        (["hot", "eaten", HOT, None], "damaged (a note)"),
        (["../x", "gone", HOT, None], "unsafe (a note of id '../x' at 'contextual/hot.md')"),
        (["hot", "gone", HOT, [1, 2]], "damaged (the entry of the note of 'hot')"),
    ]:
        assert snapshot._decode_notes([bad], {}) == why
    assert isinstance(entry, list)
    assert snapshot._decode_notes([["seed", "gone", "contextual/seed.md", entry]], {}) == {
        "seed": ("gone", "contextual/seed.md", seed)
    }
    # a kind a compaction never writes, an id noted twice (attack a1 of session 37: a crafted
    # "moved" note made a sync tell a false move)
    for kind in ("moved", "changed", "added"):
        assert snapshot._decode_notes([["seed", kind, "contextual/seed.md", None]], {}) == "damaged (a note)"
    twice = [["hot", "gone", HOT, None], ["hot", "gone", MOVED, None]]
    assert snapshot._decode_notes(twice, {}) == "damaged (two notes of id 'hot')"
    for column, value, why in [
        ("path", "/etc/passwd", "unsafe"),
        ("id", "other", "unsafe"),
        ("layer", "nowhere", "unsafe"),
        ("tags", "not-a-list", "damaged (a field"),
    ]:
        crafted = list(entry)
        crafted[snapshot.COLUMNS.index(column)] = value
        got = snapshot._decode_notes([["seed", "gone", "contextual/seed.md", crafted]], {})
        assert isinstance(got, str) and got.startswith(why)
    # a crafted note in a snapshot with a valid checksum: refused, rebuilt from the files
    state = snap.state
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(snapshot, "_encode_notes", lambda notes: [["hot", "gone", "../escape.md", None]])
        data = snapshot.encode(state, snap.offsets, notes=snap.notes)
    assert snapshot.decode(data) == "unsafe (a note of id 'hot' at '../escape.md')"
    snapshot.close(snap.state)


#: Narrows ``x`` to agent b's secret (a process that does not compact).
_NARROW = """
import sys
from md_cg import MdCG
with MdCG(sys.argv[1], auto_compact=None) as m:
    m.update("x", agent_scope="b", sensitivity="secret", body="SECRET of agent b")
"""
#: A scoped process (agent a, up to normal) reads ``x``: its body, or the refusal.
_SCOPED_GET = """
import sys
from md_cg import MdCG, Scope
with MdCG(sys.argv[1], scope=Scope(agent="a", max_sensitivity="normal")) as m:
    try:
        print(m.get("x").body)
    except KeyError as exc:
        print(type(exc).__name__, exc.args[0])
"""


def test_a_file_back_at_its_path_is_read_with_its_own_scope(tmp_path: Path) -> None:
    """Attack a1 of session 37 (F1): the note keeps the entry its process held before the
    write it followed -- a shared memory, narrowed since by another process to agent b's
    secret. The file moved away and back; a fresh process scoped to agent a took it back
    with the note's old entry and read the secret (``get``, ``read_text``). Now a file
    taken back is indexed with its own fields: refused, as after any sync."""
    root = _store(tmp_path)
    away = tmp_path / "away.md"
    with MdCG(root) as a:
        a.add(id="x", body="public note", layer="contextual")
        a.add(id="other", body="other", layer="contextual")
        assert a.get("x").body == "public note"
        _run(_NARROW, root)
        (root / "contextual/x.md").rename(away)
        with pytest.raises(NodeNotFoundError):
            a.get("x")
        a.forget("other", "done with it")  # compacts: the snapshot keeps the note
    away.rename(root / "contextual/x.md")
    done = subprocess.run(
        [sys.executable, "-c", _SCOPED_GET, str(root)], env=_ENV, capture_output=True, text=True
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "NodeNotFoundError no node with id 'x' in this store\n"
    with MdCG(root) as b:
        assert (b.get("x").body, b.get("x").agent_scope) == ("SECRET of agent b", "b")
        assert b.sync().changed == ("x",)  # the file differs from what the note's process held


#: A durable write (``{write}``) interrupted while it fsyncs (Ctrl-C): undone, nothing written.
_UNDONE = """
import sys
from md_cg import MdCG, fsops
def ctrl_c(calls):
    raise KeyboardInterrupt
fsops.fsync_all = ctrl_c
m = MdCG(sys.argv[1], auto_compact=None, durable=True)
try:
    m.{write}
except KeyboardInterrupt:
    print("undone")
m.close()
"""
_UNDONE_ADD = _UNDONE.replace("{write}", 'add(id="hot", body="hot", layer="contextual")')


def test_an_add_its_writer_undid_is_no_hand_change(tmp_path: Path) -> None:
    """Attack a1 of session 37 (F2): a follow took the put of an add rolled back by its own
    process (``done`` marked ``undone``) for a file removed by hand; the compaction kept
    the note, so every process refused the retry and a sync told ``deleted``."""
    root = _store(tmp_path)
    with MdCG(root) as a:
        assert a.ids() == ["seed"]
        done = subprocess.run(
            [sys.executable, "-c", _UNDONE_ADD, str(root)], env=_ENV, capture_output=True, text=True
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, "undone\n", "")
        assert "hot" not in a.ids() and "hot" not in a._engine.hand_after
        a.compact_index()
    assert snapshot.NOTES not in _entries_section(root)
    with MdCG(root) as f:
        assert f.add(id="hot", body="hot again", layer="contextual").id == "hot"
        assert f.sync().deleted == ()
    assert _md_files(root) == [HOT, "contextual/seed.md"]


_UNDONE_UPDATE = _UNDONE.replace("{write}", 'update("x", body="never written")')


@pytest.mark.parametrize("who", ["held", "fresh"])
def test_a_hand_removal_beside_an_undone_write_of_the_id_is_told(tmp_path: Path, who: str) -> None:
    """Attack a2 of session 37 (G1, a regression of the skip of undone writes): ``x`` in the
    snapshot, another process's durable ``update("x")`` rolled back, a person removes
    ``x.md``: the follow dropped ``x`` quietly (the undone write made no note any more) and
    no sync ever told it. Now an id the index held whose writes in the tail were all
    undone and whose file is gone is noted gone by hand."""
    root = _store(tmp_path)
    with MdCG(root) as m:
        m.add(id="x", body="x body", layer="contextual")
        m.compact_index()
    held = MdCG(root) if who == "held" else None
    if held is not None:
        assert held.get("x").body == "x body"
    done = subprocess.run(
        [sys.executable, "-c", _UNDONE_UPDATE, str(root)], env=_ENV, capture_output=True, text=True
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "undone\n", "")
    (root / "contextual/x.md").unlink()
    if held is not None:
        with pytest.raises(NodeNotFoundError):
            held.get("x")
        assert held.sync().deleted == ("x",)
        held.close()
    with MdCG(root) as f:
        assert f.sync().deleted == (() if who == "held" else ("x",))
        assert f.sync().deleted == ()
    assert _md_files(root) == ["contextual/seed.md"]


#: Deletes (or renames) ``x`` durably, pausing after its commit line until ``go`` exists.
_PAUSED = """
import sys, time
from pathlib import Path
from md_cg import MdCG, journal
real = journal.Journal.append
def paused(self, records):
    out = real(self, records)
    if any(r.get("op") == "commit" for r in records):
        Path(sys.argv[2]).touch()
        while not Path(sys.argv[3]).exists():
            time.sleep(0.01)
    return out
journal.Journal.append = paused
with MdCG(sys.argv[1], durable=True, auto_compact=None) as m:
    m.delete("x", force=True) if sys.argv[4] == "delete" else m.rename("x", "x2")
"""


def _follow_mid_flight(a: MdCG, root: Path, tmp_path: Path, code: str, op: str) -> None:
    """Run ``code`` (a paused write of ``x``) in another process; ``a`` reads ``x``, and
    follows the write between its commit line and its files; then the write finishes."""
    assert a.get("x").body == "x body"
    flag, go = tmp_path / "logged", tmp_path / "go"
    args = [sys.executable, "-c", code, str(root), str(flag), str(go), op]
    w = subprocess.Popen(args, env=_ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert a.get("seed").body == "seed memory" and a._engine.cursor.pending  # followed mid-flight
    go.touch()
    assert w.communicate(timeout=60)[1] == "" and w.returncode == 0


@pytest.mark.parametrize("op", ["delete", "rename"])
def test_a_write_followed_mid_flight_then_an_undone_add_is_no_hand_removal(tmp_path: Path, op: str) -> None:
    """Attack a3 of session 37 (a regression of the note for undone writes): a handle
    followed another process's ``delete``/``rename`` of ``x`` between its commit line and
    its unlink; a third process's durable ``add("x")`` was rolled back; the handle's next
    follow saw only that undone write of ``x`` (the delete's line was in its earlier tail)
    and noted ``x`` gone by hand: its compaction kept the note, every process refused the
    add and its sync told ``deleted``."""
    root = _store(tmp_path)
    with MdCG(root) as m:
        m.add(id="x", body="x body", layer="contextual")
        m.compact_index()
    with MdCG(root, refresh_interval=0) as a:
        _follow_mid_flight(a, root, tmp_path, _PAUSED, op)
        undone = _UNDONE.replace("{write}", 'add(id="x", body="never", layer="contextual")')
        done = subprocess.run(
            [sys.executable, "-c", undone, str(root)], env=_ENV, capture_output=True, text=True
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, "undone\n", "")
        assert "x" not in a.ids() and "x" not in a._engine.hand_after
        a.compact_index()
        assert a.sync().deleted == ()
    assert snapshot.NOTES not in _entries_section(root)
    with MdCG(root) as f:
        assert f.add(id="x", body="x again", layer="contextual").id == "x"


#: Updates ``x`` durably, pausing after its commit line until ``go`` exists.
_PAUSED_UPDATE = _PAUSED.replace(
    'm.delete("x", force=True) if sys.argv[4] == "delete" else m.rename("x", "x2")',
    'm.update("x", body="x v2")',
)


def test_a_hand_removal_after_an_update_followed_mid_flight_is_told(tmp_path: Path) -> None:
    """Attack a4 of session 37: the ids of every commit closed in a follow were kept from
    the note beside an undone write -- an ``update`` removes no file, so a person's ``rm``
    after it went untold (and, after a compaction, by every process)."""
    root = _store(tmp_path)
    with MdCG(root) as m:
        m.add(id="x", body="x body", layer="contextual")
        m.compact_index()
    with MdCG(root, refresh_interval=0) as a:
        _follow_mid_flight(a, root, tmp_path, _PAUSED_UPDATE, "update")
        undone = _UNDONE.replace("{write}", 'add(id="x", body="never", layer="contextual", overwrite=True)')
        done = subprocess.run(
            [sys.executable, "-c", undone, str(root)], env=_ENV, capture_output=True, text=True
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, "undone\n", "")
        (root / "contextual/x.md").unlink()
        with pytest.raises(NodeNotFoundError) as lost:
            a.get("x")
        assert lost.value.hidden == "lost"
        a.compact_index()
    with MdCG(root) as f:
        assert f.sync().deleted == ("x",)
