"""Opening from a snapshot builds no entries, and what it builds lazily equals a cold build.

A snapshot keeps the fields that place a node as columns and the rest of each
row as JSON decoded on first use (:class:`md_cg.index.Entries`); the maps the
index derives from entries (bucket counts, id keys and twins, restricted ids,
reverse edges, superseded ids) are set up from the columns. Every test here
compares the lazy state with the eager one, field by field, on a store with
every kind of entry the index treats specially.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import knowledge

from md_cg import MdCG, Node, index, snapshot
from md_cg.index import Entries, Entry, IndexState
from md_cg.node import Edge
from md_cg.textindex import slot_order

MAPS = (
    "buckets",
    "bucket_domains",
    "reverse",
    "keys",
    "twin_keys",
    "bucket_codes",
    "problems",
    "duplicates",
    "negative_terms",
    "restricted",
    "superseded",
)


def _mixed_store(root: Path) -> None:
    """Restricted, archived, superseded, twin-key, misplaced, duplicated, negative and broken nodes."""
    later = time.time() + 86_400
    with MdCG(root, auto_compact=None) as s:
        s.add_many([knowledge(f"k{i}", domain=f"域{i % 3}") for i in range(6)])
        s.add_many(
            [
                Node(id="secret1", layer="self", body="a private matter", sensitivity="secret"),
                Node(id="scoped", layer="contextual", body="agent only", agent_scope="agent-a"),
                Node(id="ws", layer="contextual", body="workspace only", workspace_scope="w1"),
                Node(id="temp1", layer="self", body="soon gone", retention_tier="temp", expires_at=later),
                Node(id="until", layer="self", body="valid a while", valid_until=later),
                Node(id="old", layer="self", body="the old claim"),
                Node(id="new", layer="self", body="the new claim", edges=[Edge("old", "supersedes")]),
                Node(id="linker", layer="self", body="see k1", edges=[Edge("k1", "similar"), Edge("k2")]),
                Node(id="Foo", layer="self", body="upper case twin"),
                Node(id="caf\u00e9", layer="self", body="nfc twin"),
                Node(id="rej1", layer="rejected", body="a rejected claim about rivers"),
                Node(id="tobe_archived", layer="contextual", body="archive me"),
            ]
        )
        s.archive(["tobe_archived"])
    (root / "contextual" / "foo.md").write_text("---\nid: foo\nlayer: contextual\n---\nlower case twin\n")
    (root / "contextual" / "cafe\u0301.md").write_text("---\nid: cafe\u0301\nlayer: contextual\n---\nnfd\n")
    (root / "contextual" / "misplaced.md").write_text("---\nid: misplaced\nlayer: self\n---\nwrong folder\n")
    (root / "contextual" / "k3.md").write_text("---\nid: k3\nlayer: contextual\n---\nan older copy\n")
    (root / "self" / "broken.md").write_text("---\nid: [unclosed\n---\nbody\n")


def _cold(root: Path) -> IndexState:
    """A cold build of ``root``, its text indexed."""
    state = index.build_from_files(str(root))
    state.flush_text()
    return state


def _snapshot_state(root: Path) -> IndexState:
    """The state of a snapshot written from a cold build of ``root`` (then loaded, lazily)."""
    data = snapshot.encode(_cold(root), {})
    snap = snapshot.decode(data)
    assert isinstance(snap, snapshot.Snapshot), snap
    return snap.state


def _assert_same(lazy: IndexState, eager: IndexState, *, ordered: bool = True) -> None:
    """Field by field; ``ordered``: the entries in the same order too (else as sets)."""
    if ordered:
        assert list(lazy.entries.keys()) == list(eager.entries.keys())
    else:
        assert sorted(lazy.entries.keys()) == sorted(eager.entries.keys())
    for node_id, e in eager.entries.items():
        got = lazy.entries[node_id]
        assert dataclasses.asdict(got) == dataclasses.asdict(e), node_id
        assert got == e
    for name in MAPS:
        assert getattr(lazy, name) == getattr(eager, name), name
    assert list(lazy.buckets.items()) == list(eager.buckets.items())  # the same order too
    assert lazy.text.doc_term_counts() == eager.text.doc_term_counts()


def test_the_mixed_store_has_every_special_kind(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _mixed_store(root)
    state = _cold(root)
    assert state.restricted == {"secret1", "scoped", "ws", "temp1", "until", "tobe_archived"}
    assert state.superseded == {"old"}
    assert state.reverse["k1"] == {("linker", "similar")}
    assert state.twins() == {"caf\u00e9": ["cafe\u0301", "caf\u00e9"], "foo": ["Foo", "foo"]}
    assert state.entries["tobe_archived"].path == "archive/contextual/tobe_archived.md"
    assert state.entries["misplaced"].path == "contextual/misplaced.md"
    assert state.duplicates == {"k3": ["contextual/k3.md"]}
    assert list(state.problems) == ["self/broken.md"]
    assert set(state.negative_terms) == {"rej1"}


def test_open_from_snapshot_builds_no_entry_until_one_is_used(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _mixed_store(root)
    state = _snapshot_state(root)
    entries = state.entries
    assert isinstance(entries, Entries) and entries.lazy
    assert entries._live == {}  # nothing materialised by opening
    assert len(entries) == len(_cold(root).entries)
    assert "k1" in entries and "nope" not in entries and entries.get("nope") is None
    e = entries["k1"]
    assert list(entries._live) == ["k1"] and entries["k1"] is e and entries.get("k1") is e
    with pytest.raises(KeyError):
        entries["nope"]


def test_lazy_entries_equal_a_cold_build_field_by_field(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _mixed_store(root)
    eager = _cold(root)
    lazy = _snapshot_state(root)
    # One entry first, then all (the mapping materialises the rest in row order).
    assert dataclasses.asdict(lazy.entries["new"]) == dataclasses.asdict(eager.entries["new"])
    _assert_same(lazy, eager)
    assert not lazy.entries.lazy


def test_the_same_edits_give_the_same_state_lazy_or_eager(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _mixed_store(root)
    eager = _cold(root)
    lazy = _snapshot_state(root)
    for state in (eager, lazy):
        replaced = dataclasses.replace(state.entries["k2"], title="a new title", tags=["x"])
        state.put(replaced, "a new body")
        fresh = {**dataclasses.asdict(state.entries["old"]), "id": "fresh", "path": "self/fresh.md"}
        state.put(Entry(**fresh), "f")
        assert state.drop("new") is not None
        assert state.drop("Foo") is not None
        assert state.drop("absent") is None
    assert len(lazy.entries) == len(eager.entries)
    assert "new" not in lazy.entries and "fresh" in lazy.entries
    assert lazy.superseded == eager.superseded == set()
    assert lazy.twins() == eager.twins() == {"caf\u00e9": ["cafe\u0301", "caf\u00e9"]}
    lazy.flush_text()
    eager.flush_text()
    _assert_same(lazy, eager)


def test_a_snapshot_of_a_lazy_state_equals_the_first(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _mixed_store(root)
    eager = _cold(root)
    again = snapshot.decode(snapshot.encode(_snapshot_state(root), {}))
    assert isinstance(again, snapshot.Snapshot)
    _assert_same(again.state, eager)


def test_the_store_opens_lazily_and_answers_like_a_cold_open(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _mixed_store(root)
    with MdCG(root) as s:
        assert s.loaded_from == "files"
        cold_entries = s.entries()
        cold = s.search("claim", record=False)[0]
        s.compact_index()
    with MdCG(root) as s:
        assert s.loaded_from == "snapshot"
        results = s.search("claim", record=False)[0]
        live = s._engine.state.entries._live  # type: ignore[attr-defined]
        # the first search materialised what it returned and what the visibility rule looks at, no more
        shown = {r.id for r in results}
        assert set(live) <= {*shown, "secret1", "scoped", "ws", "temp1", "until", "tobe_archived", "old"}
        assert len(live) < len(s._engine.state.entries)
        assert [(r.id, r.filler) for r in results] == [(r.id, r.filler) for r in cold]
        assert [r.id for r in results if not r.filler] == ["new"]
        assert s.entries() == cold_entries


def test_a_crafted_bucket_on_an_unbucketed_row_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _mixed_store(root)
    state = _cold(root)
    fake = dataclasses.replace(state.entries["old"], bucket="k_bucket")
    state.entries["old"] = fake
    got = snapshot.decode(snapshot.encode(state, {}))
    assert got == "unsafe (a row with a bucket outside the knowledge layer)"


@pytest.mark.parametrize("bad", [b"[1,2]", b"[1,"])
def test_a_damaged_row_is_named_when_it_is_first_used(tmp_path: Path, bad: bytes) -> None:
    root = tmp_path / "m"
    _mixed_store(root)
    state = _snapshot_state(root)
    entries = state.entries
    assert isinstance(entries, Entries)
    table = entries._make.__self__  # type: ignore[union-attr]
    row = entries.raw_row("k1")
    assert row is not None
    start, end = table.ptr[row], table.ptr[row + 1]
    table.blob = memoryview(bytes(table.blob[:start]) + bad.ljust(end - start) + bytes(table.blob[end:]))
    message = f"^snapshot row {row} \\(id 'k1'\\) does not have the header's columns$"
    with pytest.raises(ValueError, match=message):
        entries["k1"]
    assert dataclasses.asdict(entries["k2"]) == dataclasses.asdict(_cold(root).entries["k2"])


@pytest.mark.parametrize(
    ("ids", "twin"),
    [
        (["k1", "k2", "n_3"], None),
        (["Abc", "k1"], "ABC"),
        (["abc", "k-1", "9"], "ABC"),
        (["河流", "k1"], None),
    ],
    ids=["lower", "upper", "digits", "unicode"],
)
def test_id_keys_of_plain_and_other_ids(tmp_path: Path, ids: list[str], twin: str | None) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add_many([Node(id=i, layer="self", body=f"body {i}") for i in ids])
    if twin is not None:
        (root / "contextual" / f"{twin}.md").write_text(f"---\nid: {twin}\nlayer: contextual\n---\ntwin\n")
    eager = _cold(root)
    lazy = _snapshot_state(root)
    assert list(lazy.keys.items()) == list(eager.keys.items())
    assert len(eager.keys) == len(ids)
    assert lazy.twins() == eager.twins() == ({} if twin is None else {"abc": sorted([twin, ids[0]])})
    _assert_same(lazy, eager)


def test_a_snapshot_of_a_partly_used_and_edited_lazy_state_equals_the_eager_one(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _mixed_store(root)
    eager = _cold(root)
    lazy = _snapshot_state(root)
    assert lazy.entries["k4"] == eager.entries["k4"]  # materialised, then written from the entry
    for state in (eager, lazy):
        state.put(dataclasses.replace(state.entries["k2"], title="edited"), "edited body")
        state.drop("linker")
        state.put(dataclasses.replace(state.entries["old"], id="x9", path="self/x9.md"), "x")
    entries = lazy.entries
    assert isinstance(entries, Entries) and entries.lazy  # most rows are copied as they are
    copied = sum(1 for _, e, _ in entries.walk() if e is None)
    assert copied == len(eager.entries) - 4  # all but k4, k2, old (all used) and the new x9
    again = snapshot.decode(snapshot.encode(lazy, {}))
    assert isinstance(again, snapshot.Snapshot)
    eager.flush_text()
    # a snapshot's rows follow the text index's slot order, where an edited node went last
    assert list(again.state.entries.keys()) == slot_order(eager.text) != list(eager.entries.keys())
    _assert_same(again.state, eager, ordered=False)
    assert again.state.reverse == eager.reverse and "k1" not in again.state.reverse


def test_rows_copied_in_runs_are_the_bytes_copied_row_by_row(tmp_path: Path, monkeypatch) -> None:
    """A compaction copies the unused rows of a loaded snapshot in runs of consecutive rows; what it
    writes is byte for byte what copying each row alone writes (runs broken by used, edited,
    dropped and new entries; archived, conflicted, restricted, misplaced rows and edges in them)."""
    root = tmp_path / "m"
    _mixed_store(root)

    def parts() -> list[bytes]:
        lazy = _snapshot_state(root)
        assert lazy.entries["k4"] is not None  # used: a run ends before it
        lazy.put(dataclasses.replace(lazy.entries["k2"], title="edited"), "edited body")
        lazy.drop("temp1")
        lazy.put(dataclasses.replace(lazy.entries["old"], id="x9", path="self/x9.md"), "x")
        return [bytes(p) for p in snapshot.encode_parts(lazy, {"a": 1}, 7)[1:]]

    runs: list[int] = []
    copy_run = snapshot._Columns.copy_run

    def counted(self, ids, table, first):  # type: ignore[no-untyped-def]
        runs.append(len(ids))
        return copy_run(self, ids, table, first)

    monkeypatch.setattr(snapshot._Columns, "copy_run", counted)
    in_runs = parts()
    assert len(runs) >= 3 and max(runs) >= 5  # runs, not single rows

    def by_row(self, ids, table, first):  # type: ignore[no-untyped-def]
        for k, node_id in enumerate(ids):
            self.copy(node_id, table, first + k)

    monkeypatch.setattr(snapshot._Columns, "copy_run", by_row)
    assert parts() == in_runs


def test_a_text_image_with_a_duplicate_id_is_refused() -> None:
    from md_cg import textindex_codec as codec
    from md_cg.textindex import TextIndex

    ti = TextIndex()
    ti.add("docQQ1", ["river"], layer=0, bucket=-1)
    ti.add("docQQ2", ["delta"], layer=0, bucket=-1)
    header, arrays = codec.decode(ti.to_bytes())
    arrays = [a.copy() for a in arrays]
    ids = [i for i, a in enumerate(arrays) if a.tobytes() == b"docQQ1\x00docQQ2"]
    assert len(ids) == 1
    arrays[ids[0]] = np.frombuffer(b"docQQ1\x00docQQ1", dtype=np.uint8)
    header.pop("arrays")
    with pytest.raises(ValueError, match="id or vocabulary table"):
        TextIndex.from_bytes(codec.encode(header, arrays))
    assert len(TextIndex.from_bytes(ti.to_bytes())) == 2


def test_sync_after_an_open_from_a_snapshot_builds_only_the_entries_it_changes(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _mixed_store(root)
    (root / "self" / "broken.md").unlink()
    conflicted = "---\nid: k5\nlayer: knowledge\n---\n<<<<<<< ours\na\n=======\nb\n>>>>>>> theirs\n"
    with MdCG(root) as s:
        s.sync()
        k5 = s._engine.state.entries["k5"].path  # type: ignore[attr-defined]
        s.compact_index()
    (root / k5).write_text(conflicted)
    with MdCG(root) as s:
        s.sync()
        s.compact_index()
    edited = root / "self" / "old.md"
    edited.write_text(edited.read_text() + "edited by hand\n")
    (root / "self" / "until.md").unlink()
    with MdCG(root) as s:
        assert s.loaded_from == "snapshot"
        state = s._engine.state  # type: ignore[attr-defined]
        assert state.entries.lazy and state.entries._live == {}
        report = s.sync()
        assert (report.added, report.changed, report.deleted) == ((), ("old",), ("until",))
        assert [c[0] for c in report.conflicts] == ["k5"]
        # the edited node, the conflicted one (listed), k3, whose losing copy (contextual/k3.md,
        # not indexed) is parsed again by every sync, and "new", which supersedes "old" (the
        # sync looks for supersedes cycles since session 27): nothing else was built
        assert set(state.entries._live) == {"old", "k5", "k3", "new"}
        assert state.entries.lazy
        assert state.entries["old"].mtime_ns == edited.stat().st_mtime_ns


def test_mtime_and_size_columns_that_do_not_match_the_rows_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _mixed_store(root)
    data = snapshot.encode(_cold(root), {})
    snap = snapshot.decode(data)
    assert isinstance(snap, snapshot.Snapshot)
    table = snap.state.entries.source
    n = len(table.ids)
    assert [table.stat_of(r) for r in range(n)] == [
        (e.mtime_ns, e.size) for e in (snap.state.entries[i] for i in table.ids)
    ]
    ptr = np.arange(n + 1, dtype=np.uint64)
    blob = np.zeros(n, dtype=np.uint8)
    good = np.zeros(n, dtype=np.int64)
    when = np.zeros(n, dtype=np.float64)
    for mtimes, sizes in [(good[:-1], good), (good, good.astype(np.float64)), (good, good[:-1])]:
        with pytest.raises(ValueError, match="the mtime and size columns of the rows section do not match"):
            table.attach(({"rows": n}, [ptr, blob, mtimes, sizes, when]))
    nan = when.copy()
    nan[3] = np.nan
    for changed in [when[:-1], good, nan, np.full(n, np.inf)]:
        with pytest.raises(ValueError, match="the changed-time column of the rows section does not match"):
            table.attach(({"rows": n}, [ptr, blob, good, good, changed]))
    with pytest.raises(ValueError):
        table.attach(({"rows": n}, [ptr, blob, good, good]))  # a rows section of version 9
    with pytest.raises(ValueError):
        table.attach(({"rows": n}, [ptr, blob]))  # a rows section of an older layout


def test_listed_of_a_lazy_state_gives_every_layer_and_changed_time_as_built(tmp_path: Path) -> None:
    """``Entries.listed`` (what a listing sorts by) answers rows from the snapshot's
    columns, a materialised or replaced entry from itself."""
    root = tmp_path / "m"
    _mixed_store(root)
    eager = _cold(root)
    expected = [(i, e.layer, e.changed) for i, e in eager.entries.items()]
    assert len({c for _, _, c in expected}) == 3  # two batches and the hand-written files (0.0)
    lazy = _snapshot_state(root)
    assert list(lazy.entries.listed()) == expected
    assert lazy.entries._live == {}  # answered from the columns
    assert list(lazy.entries.tag_pairs()) == [(i, e.tags) for i, e in eager.entries.items()]
    assert list(lazy.entries.listed_of(["k3", "k1"])) == [
        x for i in ("k3", "k1") for x in expected if x[0] == i
    ]
    assert [lazy.entries.changed_of(i) for i, *_ in expected] == [c for _, _, c in expected]
    assert lazy.entries._live == {}  # tags and times from the rows, no entry built
    with pytest.raises(KeyError):
        lazy.entries.changed_of("nope")
    moved = dataclasses.replace(eager.entries["k2"], layer="self", updated_at=5.0, tags=("new",))
    lazy.entries["k2"] = moved
    want = [(i, "self", 5.0) if i == "k2" else (i, layer, c) for i, layer, c in expected]
    assert sorted(lazy.entries.listed()) == sorted(want)
    assert list(lazy.entries.listed_of(["k2"])) == [("k2", "self", 5.0)]
    assert dict(lazy.entries.tag_pairs())["k2"] == ("new",)
    assert list(eager.entries.listed()) == expected  # a plain dict answers the same


def test_changed_is_the_update_else_the_creation_else_zero() -> None:
    e = Entry("a", "self/a.md", "self", None, 0, 0, (), None, None, None, None, None, (), (), "", ())
    assert e.changed == 0.0
    assert dataclasses.replace(e, created_at=7.5).changed == 7.5
    assert dataclasses.replace(e, created_at=7.5, updated_at=9.25).changed == 9.25
    assert dataclasses.replace(e, updated_at=0.0, created_at=7.5).changed == 0.0


def test_placed_of_a_lazy_state_gives_every_entry_path_and_stat_as_built(tmp_path: Path) -> None:
    """``Entries.placed`` (what a sync compares with the files) answers rows from the
    snapshot's columns in one pass (``all_paths``): archived, hand-placed and bucketed
    paths as a cold build has them, a materialised or replaced entry from itself."""
    root = tmp_path / "m"
    _mixed_store(root)
    eager = _cold(root)
    expected = [(i, e.path, e.mtime_ns, e.size) for i, e in eager.entries.items()]
    placed = {p for _, p, _, _ in expected}
    assert {"archive/contextual/tobe_archived.md", "contextual/misplaced.md"} <= placed
    assert len({p.rsplit("/", 1)[0] for _, p, _, _ in expected if p.startswith("knowledge/")}) == 3
    lazy = _snapshot_state(root)
    assert list(lazy.entries.placed()) == expected
    assert lazy.entries._live == {}  # answered from the columns
    lazy.entries["k1"]  # materialised: answered from the entry
    moved = dataclasses.replace(eager.entries["k2"], path="knowledge/elsewhere/k2.md", size=1)
    lazy.entries["k2"] = moved  # put since the snapshot
    want = [(i, moved.path, moved.mtime_ns, 1) if i == "k2" else (i, p, m, z) for i, p, m, z in expected]
    assert sorted(lazy.entries.placed()) == sorted(want)


def test_conflicted_of_a_lazy_state_reads_the_conflict_rows_and_what_was_put_since(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _mixed_store(root)
    eager = _cold(root)
    conflicted = "---\nid: {0}\nlayer: knowledge\n---\n<<<<<<< ours\na\n=======\nb\n>>>>>>> theirs\n"
    for node_id in ("k4", "k5", "k0"):
        (root / eager.entries[node_id].path).write_text(conflicted.format(node_id))
    eager = _cold(root)
    assert sorted(e.id for e in eager.entries.conflicted()) == ["k0", "k4", "k5"]
    lazy = _snapshot_state(root)
    assert sorted(e.id for e in lazy.entries.conflicted()) == ["k0", "k4", "k5"]
    assert set(lazy.entries._live) == {"k0", "k4", "k5"}  # only those were built
    lazy.entries["k4"] = dataclasses.replace(eager.entries["k4"], conflict=False)  # resolved since
    lazy.entries["k1"] = dataclasses.replace(eager.entries["k1"], conflict=True)  # conflicted since
    assert sorted(e.id for e in lazy.entries.conflicted()) == ["k0", "k1", "k5"]


def _reference(entries: list[Entry], layer: str | None, tag: str | None, since, until) -> list[str]:
    """The listing's rule written plainly over built entries: newest change first, ties by id."""
    picked = [
        e
        for e in entries
        if (layer is None or e.layer == layer)
        and (tag is None or tag.casefold() in {t.casefold() for t in e.tags})
        and (since is None or e.changed >= since)
        and (until is None or e.changed <= until)
    ]
    return [e.id for e in sorted(picked, key=lambda e: (-e.changed, e.id))]


def test_a_listing_page_equals_the_plain_rule_and_builds_only_the_page(tmp_path: Path) -> None:
    """``list_page`` sorts and filters by the index's columns: on a store opened from its
    snapshot it builds only the page's entries (numpy over the rows' columns), and every
    page, total and filter equals the plain rule over every entry built (ties broken by
    id), both on a store as opened and on one whose entries were all built; archived and
    expired nodes are left out unless asked for."""
    root = tmp_path / "m"
    nodes = [
        Node(
            id=f"n{i:03d}",
            layer=("self", "contextual", "structural")[i % 3],
            body=f"note {i}",
            tags=["Even"] if i % 2 == 0 else ["odd"],
            created_at=1_000_000.0 + (i * 7919) % 97,  # repeats: ties broken by id
            updated_at=None if i % 4 else 2_000_000.0 + i % 5,
        )
        for i in range(240)
    ]
    nodes[7].retention_tier, nodes[7].expires_at = "temp", 1_000.0  # expired long ago
    with MdCG(root, auto_compact=None) as s:
        s.add_many(nodes, stamp=False)
        s.archive(["n004", "n100"])
        s.compact_index()
    with MdCG(root, read_only=True) as s:
        by_tag = s.list_page(tag="EVEN", limit=4)  # tags decoded from the rows, not built
        restricted = {"n004", "n100", "n007"}  # the visibility rule reads their entries
        assert s._engine.state.entries._live.keys() - restricted == {e.id for e in by_tag.entries}
        assert by_tag.total == 118
    with MdCG(root, read_only=True) as s:
        everything = s.entries(include_expired=True, include_archived=True)
    shown = [e for e in everything if e.id not in ("n004", "n100", "n007")]
    cases = [
        ("self", None, None, None),
        (None, "even", None, None),
        (None, "ODD", 1_000_010.0, 1_000_050.0),
        ("contextual", None, 2_000_001.0, None),
        (None, None, None, 1_000_000.0),
        ("structural", "even", 3e9, None),
        (None, None, None, None),
        ("contextual", None, None, 1_000_050.0),
    ]
    with MdCG(root, read_only=True) as settled:
        settled.entries()  # every entry built: the plain pass
        for layer, tag, since, until in cases:
            want = _reference(shown, layer, tag, since, until)
            for limit, offset in [(None, 0), (5, 0), (5, 4), (1000, 2), (3, len(want)), (1, 0)]:
                end = None if limit is None else offset + limit
                args = {"tag": tag, "since": since, "until": until, "limit": limit, "offset": offset}
                with MdCG(root, read_only=True) as fresh:  # as opened: the columns
                    got = fresh.list_page(layer, **args)
                    built = fresh._engine.state.entries._live.keys()
                    if tag is None:  # the page, and the restricted nodes the visibility rule reads
                        assert built - {"n004", "n100", "n007"} == {e.id for e in got.entries}
                assert (got.total, [e.id for e in got.entries]) == (len(want), want[offset:end]), args
                assert settled.list_page(layer, **args) == got
                assert settled.list_nodes(layer, **args) == got.entries
        every = settled.list_page(include_archived=True, include_expired=True)
    with MdCG(root, read_only=True) as fresh:
        assert fresh.list_page(include_archived=True, include_expired=True) == every
    assert every.total == 240 and [e.id for e in every.entries] == _reference(
        everything, None, None, None, None
    )
    with MdCG(root, auto_compact=None) as w:  # rows replaced, deleted and added since the snapshot
        assert w.list_page(tag="odd").total == 119  # the tag map is built now, then kept by the writes
        w.update("n010", body="note 10, changed")
        w.delete("n011")
        w.add(id="late", layer="contextual", body="a late note", tags=["ODD"])
        w.update("n012", tags=["odd", "twelve"])
        columns = w._engine.state.entries.columns()
        assert columns is not None and len(columns.dropped) == 3
        assert [e.id for e in columns.extra] == ["n010", "late", "n012"]
        with MdCG(root, read_only=True) as settled:
            now = [e for e in settled.entries() if e.id not in ("n004", "n100", "n007")]
        for layer, tag, since, until in cases:
            want = _reference(now, layer, tag, since, until)
            for limit, offset in [(None, 0), (5, 0), (3, 1), (1000, 2)]:
                got = w.list_page(layer, tag=tag, since=since, until=until, limit=limit, offset=offset)
                end = None if limit is None else offset + limit
                assert (got.total, [e.id for e in got.entries]) == (len(want), want[offset:end]), layer
        assert [e.id for e in w.list_page(limit=3).entries] == ["n012", "late", "n010"]
        assert [e.id for e in w.list_page(tag="Odd", limit=2).entries] == ["n012", "late"]
