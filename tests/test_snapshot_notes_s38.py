"""The ``notes`` a snapshot keeps (:data:`md_cg.snapshot.NOTES`), decoded (session 38, attack 5).

* A note's entry held a file time of ``2**63 + 5`` (orjson reads integers up to
  ``2**64 - 1``; only their type was checked): the snapshot was accepted, ``get`` took the
  id back with that time, and ``compact_index()`` -- and ``close()``'s auto-compaction --
  raised ``OverflowError`` from the int64 column. Now the note's entry must fit the
  columns a row is written to, as a compaction writes it, or the snapshot is refused (the
  index rebuilt from the files).
* A note of an id the snapshot holds, of a case/Unicode twin of one, or of a path a held
  entry has, was taken in: ``add`` of the id after its ``forget`` was refused as moved by
  hand, ``add`` after ``delete`` of the twin's holder collided with the noted twin, and
  ``sync`` told the held memory deleted. Such notes are dropped at load (md-cg writes the
  twin's note itself: a twin removed by hand beside its holder; refusing that snapshot
  would rebuild the index on every open).
* A snapshot held any number of notes: a million took 16 s and 780 MB per open. A
  compaction keeps the :data:`~md_cg.snapshot.NOTES_MAX` noted last; a snapshot with more
  is refused.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import orjson
import pytest

from md_cg import MdCG, SyncReport, snapshot
from md_cg.errors import NodeNotFoundError

SNAP = ".mdcg/index.snapshot"


def _store(tmp_path: Path, ids: tuple[str, ...] = ("a1", "b2")) -> Path:
    root = tmp_path / "s"
    with MdCG(root, create=True) as s:
        for node_id in ids:
            s.add(id=node_id, layer="contextual", body=f"body of {node_id} alpha")
        s.compact_index()
    return root


def _section(root: Path) -> tuple[dict[str, Any], dict[str, Any], bytes]:
    """The snapshot's header, its entries section (decoded) and the bytes after it."""
    data = (root / SNAP).read_bytes()
    nl = data.index(b"\n", len(snapshot.MAGIC))
    header = orjson.loads(data[len(snapshot.MAGIC) : nl])
    size = header["entries_len"]
    return header, orjson.loads(data[nl + 1 : nl + 1 + size]), data[nl + 1 + size :]


def _set_notes(root: Path, notes: object) -> None:
    """Rewrite the snapshot's ``notes`` (its checksum made to match, as an attacker would)."""
    header, body, rest = _section(root)
    body[snapshot.NOTES] = notes
    blob = orjson.dumps(body)
    header = {**header, "entries_len": len(blob), "crc32": zlib.crc32(blob)}
    (root / SNAP).write_bytes(snapshot.MAGIC + orjson.dumps(header) + b"\n" + blob + rest)
    # the token file vouching for the rewritten file, as a compaction's would (a snapshot not
    # the file the token file names is checked against the files first: session 38)
    head, ident = snapshot.read_header(str(root)), snapshot.identity(str(root))
    assert head is not None and ident is not None
    (root / ".mdcg" / "index.token").write_text(f"{head.token} {ident[0]}:{ident[1]}:{ident[2]}")


def _without_b2(tmp_path: Path) -> tuple[Path, list[Any]]:
    """A store of a1 and b2 whose snapshot holds no row of b2 (b2's file is there), and
    the :data:`~md_cg.snapshot.COLUMNS` values of an entry of b2 at its path."""
    root = _store(tmp_path)
    b2 = root / "contextual/b2.md"
    data = b2.read_bytes()
    b2.unlink()
    with MdCG(root, auto_compact=None) as s:
        assert s.sync().deleted == ("b2",)
        s.compact_index()
        entry = s._engine.state.entries["a1"]
    b2.write_bytes(data)
    was = [getattr(entry, name) for name in snapshot.COLUMNS]
    was[:2] = ["b2", "contextual/b2.md"]
    return root, was


@pytest.mark.parametrize(
    ("column", "value"), [("mtime_ns", 2**63 + 5), ("size", 2**64 - 1), ("access_count", 2**63)]
)
def test_a_note_entry_number_beyond_its_column_refuses_the_snapshot(
    tmp_path: Path, column: str, value: int
) -> None:
    root, was = _without_b2(tmp_path)
    was[snapshot.COLUMNS.index(column)] = value
    _set_notes(root, [["b2", "gone", "contextual/b2.md", was]])
    why = "damaged (a field of the entry of the note of 'b2')"
    assert snapshot.load_checked(str(root)) == (None, why)
    with MdCG(root, auto_compact=None) as s:
        assert (s.loaded_from, s.ids()) == ("files", ["a1", "b2"])
        assert s.get("b2").body == "body of b2 alpha"
        found = [f.detail for f in s.health().findings if f.path == SNAP]
        assert found == [
            f"the index snapshot is {why}; the index was rebuilt from the files, "
            "and compact_index() writes a new snapshot"
        ]
        assert s.sync() == SyncReport()
        s.compact_index()  # raised OverflowError
    with MdCG(root, auto_compact=1) as s:  # a write, then close()'s compaction
        assert s.loaded_from == "snapshot"
        s.add(id="c3", layer="contextual", body="new one")
    assert snapshot.NOTES not in _section(root)[1]
    with MdCG(root) as s:
        assert (s.loaded_from, s.ids(), s.sync()) == ("snapshot", ["a1", "b2", "c3"], SyncReport())


def test_the_largest_numbers_a_column_holds_are_kept(tmp_path: Path) -> None:
    root, was = _without_b2(tmp_path)
    for column, value in [("mtime_ns", 2**63 - 1), ("size", -(2**63))]:
        was[snapshot.COLUMNS.index(column)] = value
    _set_notes(root, [["b2", "gone", "contextual/b2.md", was]])
    snap, why = snapshot.load_checked(str(root))
    assert why is None and snap is not None
    entry = snap.notes["b2"][2]
    assert entry is not None and (entry.mtime_ns, entry.size) == (2**63 - 1, -(2**63))
    snapshot.close(snap.state)
    with MdCG(root, auto_compact=None) as s:
        assert s.get("b2").body == "body of b2 alpha"  # taken back with the noted stat
        s.compact_index()
    with MdCG(root, auto_compact=None) as s:
        assert (s.loaded_from, s.ids()) == ("snapshot", ["a1", "b2"])
        assert s.sync() == SyncReport(changed=("b2",))  # its stat differs from the file's


def test_notes_of_held_ids_twins_and_paths_are_dropped(tmp_path: Path) -> None:
    root = _store(tmp_path, ("a1", "b2", "c3"))
    held = [
        ["a1", "gone", "contextual/a1.md", None],  # an id the snapshot holds
        ["B2", "gone", "contextual/B2.md", None],  # a case twin of held b2
        ["zz", "gone", "contextual/c3.md", None],  # held c3's file
        ["yy", "gone", "contextual/C3.md", None],  # a twin spelling of it
    ]
    _set_notes(root, held)
    with MdCG(root, auto_compact=None) as s:
        assert s.loaded_from == "snapshot"
        s.forget("a1", "test", force=True)
        assert s.add(id="a1", layer="contextual", body="a1 again").id == "a1"  # was: moved by hand
        s.delete("b2", force=True)
        assert s.add(id="b2", layer="contextual", body="b2 again").id == "b2"  # was: IdCollisionError
        with pytest.raises(NodeNotFoundError) as lost:
            s.get("zz")
        assert str(lost.value).strip("\"'") == "no node with id 'zz' in this store"
        assert s.sync() == SyncReport()  # told deleted=('B2', 'a1', 'yy', 'zz')
        assert s.ids() == ["a1", "b2", "c3"]
        assert s.get("c3").body == "body of c3 alpha"
    ghost = ["ghost", "gone", "contextual/ghost.md", None]  # never held: cannot be told apart
    root = _store(tmp_path / "again", ("a1", "b2", "c3"))
    _set_notes(root, [*held, ghost])
    snap, why = snapshot.load_checked(str(root))
    assert why is None and snap is not None
    assert snap.notes == {"ghost": ("gone", "contextual/ghost.md", None)}
    snapshot.close(snap.state)


def test_a_twin_removed_by_hand_beside_its_holder_keeps_the_snapshot(tmp_path: Path) -> None:
    """md-cg writes a twin's note itself: the snapshot is used, the note dropped."""
    root = _store(tmp_path)
    (root / "contextual/B2.md").write_text("---\nid: B2\n---\nthe twin gamma\n")
    with MdCG(root, auto_compact=None) as s:
        assert s.sync().twins == (("B2", "b2"),)
        s.compact_index()
        (root / "contextual/B2.md").unlink()
        # B2's hit dropped, noted; the two fillers tie: the most recently changed first (session 43)
        assert [hit.id for hit in s.search("gamma")[0]] == ["b2", "a1"]
        assert list(s._engine.hand_after) == ["B2"]
        s.compact_index()
    assert [n[:3] for n in _section(root)[1][snapshot.NOTES]] == [["B2", "gone", "contextual/B2.md"]]
    with MdCG(root, auto_compact=None) as s:
        assert (s.loaded_from, s._engine.snapshot_problem, dict(s._engine.hand_after)) == (
            "snapshot",
            None,
            {},
        )
        assert s.ids() == ["a1", "b2"]
        assert s.sync() == SyncReport()  # the removal is not told (the note was dropped)


def test_more_notes_than_a_compaction_keeps_refuse_the_snapshot(tmp_path: Path) -> None:
    root = _store(tmp_path)
    n = snapshot.NOTES_MAX + 1
    _set_notes(root, [[f"g{k:06d}", "gone", f"contextual/g{k:06d}.md", None] for k in range(n)])
    why = f"damaged ({n:,} notes, more than the {snapshot.NOTES_MAX:,} a compaction keeps)"
    assert snapshot.load_checked(str(root)) == (None, why)
    with MdCG(root, auto_compact=None) as s:
        assert (s.loaded_from, s.ids(), dict(s._engine.hand_after)) == ("files", ["a1", "b2"], {})
        assert s.sync() == SyncReport()
    _set_notes(root, [[f"g{k:06d}", "gone", f"contextual/g{k:06d}.md", None] for k in range(n - 1)])
    snap, why2 = snapshot.load_checked(str(root))
    assert why2 is None and snap is not None and len(snap.notes) == snapshot.NOTES_MAX
    snapshot.close(snap.state)


def test_a_compaction_keeps_the_notes_made_last(tmp_path: Path) -> None:
    root = _store(tmp_path)
    extra = 5
    ids = [f"g{k:06d}" for k in range(snapshot.NOTES_MAX + extra)][::-1]  # noted last: the lowest
    with MdCG(root, auto_compact=None) as s:
        for node_id in ids:
            s._engine.hand_after[node_id] = ("gone", f"contextual/{node_id}.md", None)
        s.compact_index()
    kept = [n[0] for n in _section(root)[1][snapshot.NOTES]]
    assert (
        kept == sorted(ids[extra:]) and kept[0] == "g000000" and kept[-1] == f"g{snapshot.NOTES_MAX - 1:06d}"
    )
    with MdCG(root, auto_compact=None) as s:
        assert (s.loaded_from, len(s._engine.hand_after)) == ("snapshot", snapshot.NOTES_MAX)
