"""An open from a snapshot decodes and hashes the ids once.

The entries' id -> row map is built once and taken by the entries; when the
text index's id table holds the same ids in the same order (what a rebuild
and a migration write), the text index takes the same strings and a copy of
that map instead of decoding its own (``TextIndex.from_bytes(known=...)``).
The plain-id shortcut of the row check is a vectorised pass over the joined
ids (:func:`md_cg.snapshot._all_plain`) that gives the answer a match of
every id against :data:`md_cg.snapshot._PLAIN_NAME` gives.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from md_cg import MdCG, Node, index, snapshot
from md_cg.textindex import TextIndex, slot_order


def _store(root: Path, n: int = 30) -> None:
    with MdCG(root, auto_compact=None) as s:
        s.add_many(
            [Node(id=f"n{i:03d}", layer="self", body=f"river {i} delta 河流 {i % 4}") for i in range(n)]
        )


def _match(ti: TextIndex, query: str) -> list[tuple[str, float]]:
    return ti.match([(t, 1.0) for t in query.split()], ti.scope(), k=5)


def _loaded(root: Path) -> index.IndexState:
    state = index.build_from_files(str(root))
    state.flush_text()
    snap = snapshot.decode(snapshot.encode(state, {}))
    assert isinstance(snap, snapshot.Snapshot), snap
    return snap.state


def test_the_text_index_shares_the_entries_ids_when_their_order_is_the_same(tmp_path: Path) -> None:
    _store(tmp_path / "m")
    state = _loaded(tmp_path / "m")
    docs, entries = state.text._docs, state.entries
    assert isinstance(entries, index.Entries)
    assert docs.ids == entries._ids == [f"n{i:03d}" for i in range(30)]
    # the very same string objects (decoded once), and two maps, each its own
    assert all(a is b for a, b in zip(docs.ids, entries._ids, strict=True))
    assert docs.slot == entries._rows and docs.slot is not entries._rows
    # changing one leaves the other as it was
    state.put(dataclasses.replace(entries["n003"], title="edited"), "ocean")
    state.flush_text()
    assert "n003" not in entries._rows and docs.slot["n003"] == 30
    assert [d for d, _ in _match(state.text, "ocean")] == ["n003"]
    assert [d for d, _ in _match(state.text, "river 7")[:1]] == ["n007"]


def _edited(root: Path) -> index.IndexState:
    _store(root)
    state = index.build_from_files(str(root))
    state.flush_text()
    state.put(dataclasses.replace(state.entries["n001"], title="moved"), "sea")  # its slot goes last
    state.flush_text()
    return state


def test_rows_are_written_in_the_text_index_order_so_an_edited_store_shares_its_ids(tmp_path: Path) -> None:
    state = _edited(tmp_path / "m")
    assert list(state.entries)[1] == "n001" and slot_order(state.text)[-1] == "n001"
    snap = snapshot.decode(snapshot.encode(state, {}))
    assert isinstance(snap, snapshot.Snapshot), snap
    docs, entries = snap.state.text._docs, snap.state.entries
    assert isinstance(entries, index.Entries)
    assert entries._ids == docs.ids == slot_order(state.text)
    assert all(a is b for a, b in zip(docs.ids, entries._ids, strict=True))
    assert snap.state.entries["n001"].title == "moved"


def test_a_text_index_in_another_order_decodes_its_own_ids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = _edited(tmp_path / "m")
    # rows in the entries' order, as the writer before this change wrote them (same format version)
    monkeypatch.setattr(snapshot, "slot_order", lambda _text: list(state.entries))
    snap = snapshot.decode(snapshot.encode(state, {}))
    monkeypatch.undo()
    assert isinstance(snap, snapshot.Snapshot), snap
    docs, entries = snap.state.text._docs, snap.state.entries
    assert docs.ids[-1] == "n001" and entries._ids[1] == "n001"
    assert docs.ids[-1] is not entries._ids[1]
    assert docs.slot == {i: n for n, i in enumerate(docs.ids)}
    assert [d for d, _ in _match(snap.state.text, "sea")] == ["n001"]


def test_known_ids_are_used_only_when_they_are_exactly_the_images() -> None:
    ti = TextIndex()
    for i in ("a1", "b2", "c3"):
        ti.add(i, ["river", i], layer=0, bucket=-1)
    data = ti.to_bytes()
    same = ["a1", "b2", "c3"]
    loaded = TextIndex.from_bytes(data, known=(same, {k: n for n, k in enumerate(same)}))
    assert loaded._docs.ids[0] is same[0]
    for other in (["a1", "c3", "b2"], ["a1", "b2"], ["a1", "b2", "c3", "d4"], ["a1", "b2\x00c3", "x"]):
        got = TextIndex.from_bytes(data, known=(other, {k: n for n, k in enumerate(other)}))
        assert got._docs.ids == same and got._docs.slot == {"a1": 0, "b2": 1, "c3": 2}
        assert all(a is not b for a, b in zip(got._docs.ids, other, strict=False))


def test_a_snapshot_with_an_id_on_two_rows_is_refused(tmp_path: Path) -> None:
    _store(tmp_path / "m", 5)
    state = index.build_from_files(str(tmp_path / "m"))
    data = snapshot.encode(state, {})
    forged = data.replace(b'"entries":["n000","n001"', b'"entries":["n001","n001"')
    assert forged != data
    got = snapshot.decode(_reseal(forged))
    assert got == "damaged (an id on two rows)"


def _reseal(data: bytes) -> bytes:
    """``data`` with the entries section's CRC-32 of its header made to match again."""
    import re
    import zlib

    import orjson

    nl = data.index(b"\n", len(snapshot.MAGIC))
    header = orjson.loads(data[len(snapshot.MAGIC) : nl])
    entries = data[nl + 1 : nl + 1 + header["entries_len"]]
    header["crc32"] = zlib.crc32(entries)
    out = snapshot.MAGIC + orjson.dumps(header) + data[nl:]
    assert re.search(rb'"crc32":\d+', out)
    return out


def _plain_by_match(ids: list[str]) -> bool:
    return bool(ids) and all(snapshot._PLAIN_NAME.fullmatch(i) is not None for i in ids)


@pytest.mark.parametrize(
    "ids",
    [
        ["a"],
        ["k1", "K-2", "_x", "9"],
        ["-a"],
        ["a", "-b"],
        ["a" * 100, "b"],
        ["a" * 101],
        ["a", ""],
        [""],
        ["a\nb"],
        ["a\nb", "c"],
        ["ok", "caf\u00e9"],
        ["河流"],
        ["a.b"],
        ["a b"],
        ["a/b"],
        ["a\x00b"],
        ["a", "b\n"],
    ],
)
def test_all_plain_answers_as_a_match_of_every_id(ids: list[str]) -> None:
    assert snapshot._all_plain("\n".join(ids), len(ids)) is _plain_by_match(ids)


def test_all_plain_on_random_ids() -> None:
    rng = random.Random(5)
    alphabet = "aZ09_-\n.é河 "
    for _ in range(3000):
        ids = [
            "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 4))) for _ in range(rng.randint(1, 4))
        ]
        assert snapshot._all_plain("\n".join(ids), len(ids)) is _plain_by_match(ids), ids
    assert snapshot._all_plain("", 0) is False


def test_a_crafted_id_with_a_newline_is_not_taken_as_plain(tmp_path: Path) -> None:
    _store(tmp_path / "m", 3)
    state = index.build_from_files(str(tmp_path / "m"))
    data = snapshot.encode(state, {})
    forged = _reseal(data.replace(b'"entries":["n000"', b'"entries":["n\\n0"'))
    table = snapshot._Table(__import__("orjson").loads(_entries_of(forged)))
    problem = table.check()
    assert table.plain is False
    assert problem is not None and problem.startswith("unsafe (a row with id 'n\\n0'")


def _entries_of(data: bytes) -> bytes:
    import orjson

    nl = data.index(b"\n", len(snapshot.MAGIC))
    header = orjson.loads(data[len(snapshot.MAGIC) : nl])
    return data[nl + 1 : nl + 1 + header["entries_len"]]


def test_a_store_added_to_and_deleted_from_opens_with_shared_ids(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _store(root, 12)
    with MdCG(root, auto_compact=None) as s:
        s.add(Node(id="late", layer="self", body="added after the first batch"))
        s.delete("n004", force=True)
        s.search("river")  # the text of the writes indexed
        s.compact_index()
    with MdCG(root, read_only=True) as s:
        assert s.loaded_from == "snapshot"
        state = s._engine.state
        docs, entries = state.text._docs, state.entries
        assert isinstance(entries, index.Entries)
        want = [f"n{i:03d}" for i in range(12) if i != 4] + ["late"]
        assert entries._ids == want and docs.ids == want
        assert all(a is b for a, b in zip(docs.ids, entries._ids, strict=True))
        hits, _ = s.search("added after", k=3)
        assert [r.id for r in hits if not r.filler][:1] == ["late"]
