"""One freshness rule for every read; ghost hits; deep health; snapshot columns.

Another process's committed change is seen by every read of a handle under
the same rule: after ``refresh_interval`` seconds (``0``: at once, ``None``:
after :meth:`MdCG.refresh`). The writer here is a forked child (a real
process with its own handle, locks and log shard).
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import no_writes, tree_listing
from stresslib import stress

from md_cg import MdCG, Node, index, snapshot
from md_cg.errors import NodeNotFoundError


def _in_child(root: Path, change: Callable[[MdCG], Any]) -> None:
    def run() -> None:
        with MdCG(root, auto_compact=None) as s:
            change(s)

    assert stress.wait(stress.fork(run)) == 0


def _hub_store(root: Path) -> None:
    with MdCG(root, auto_compact=None) as s:
        s.add(Node(id="hub", layer="self", body="the hub node"))
        s.add(
            Node(
                id="gone", layer="self", body="quagga soon gone", edges=[{"target": "hub", "type": "causal"}]
            )
        )


def _add_new(name: str) -> Callable[[MdCG], Any]:
    return lambda s: s.add(
        Node(id=name, layer="self", body=f"{name} okapi", edges=[{"target": "hub", "type": "causal"}])
    )


# Each read, asked whether the node ``name`` is visible.
READS: dict[str, Callable[[MdCG, str], bool]] = {
    "ids": lambda s, n: n in s.ids(),
    "entries": lambda s, n: n in [e.id for e in s.entries()],
    "len": lambda s, n: len(s) == 3,
    "in": lambda s, n: n in s,
    "iter_nodes": lambda s, n: n in [x.id for x in s.iter_nodes()],
    "search": lambda s, n: n in [r.id for r in s.search(f"{n} okapi", record=False)[0]],
    "neighbours": lambda s, n: n in [x.id for x in s.neighbours("hub", direction="in")],
}


@pytest.mark.parametrize("read", sorted(READS))
def test_another_process_change_is_seen_after_refresh_interval(
    tmp_path: Path, read: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "m"
    _hub_store(root)
    with MdCG(root, refresh_interval=60) as a:
        assert not READS[read](a, "new")
        _in_child(root, _add_new("new"))
        assert not READS[read](a, "new")  # within the interval: the handle has not looked yet
        real = time.monotonic
        monkeypatch.setattr(time, "monotonic", lambda: real() + 61)
        assert READS[read](a, "new")  # the interval has passed: every read looks


@pytest.mark.parametrize("read", sorted(READS))
def test_with_refresh_interval_none_only_refresh_shows_it(tmp_path: Path, read: str) -> None:
    root = tmp_path / "m"
    _hub_store(root)
    with MdCG(root, refresh_interval=None) as a:
        _in_child(root, _add_new("new"))
        assert not READS[read](a, "new")
        assert a.refresh() == ["new"]
        assert READS[read](a, "new")


def test_with_refresh_interval_zero_every_read_sees_adds_and_deletes_at_once(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _hub_store(root)
    with MdCG(root, refresh_interval=0) as a:
        for n, read in enumerate(sorted(READS)):
            name = f"new{n}"
            _in_child(root, _add_new(name))
            if read == "len":
                assert len(a) == 3 + n
            else:
                assert READS[read](a, name), read
        _in_child(root, lambda s: s.delete("gone", force=True))
        assert "gone" not in a and "gone" not in a.ids() and len(a) == 1 + len(READS)
        assert "gone" not in [x.id for x in a.neighbours("hub", direction="in")]
        assert "gone" not in [r.id for r in a.search("quagga", record=False)[0]]
        with pytest.raises(NodeNotFoundError):
            a.get("gone")


def test_get_reads_the_file_so_another_process_edit_is_seen_at_once(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _hub_store(root)
    with MdCG(root, refresh_interval=None) as a:
        _in_child(root, lambda s: s.update("hub", body="edited elsewhere"))
        assert a.get("hub").body == "edited elsewhere"
        _in_child(root, lambda s: s.move("hub", "contextual"))  # the indexed path is gone
        assert a.get("hub").layer == "contextual"
        _in_child(root, _add_new("new"))
        assert a.get("new").body == "new okapi"  # a miss looks at the log once


# -- 8. ghost hits ------------------------------------------------------------------------------------


def test_a_hit_whose_file_was_removed_is_dropped_never_an_error(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root, refresh_interval=None) as s:
        s.add(Node(id="gone", layer="self", body="ghostly zebra"))
        s.add(Node(id="stay", layer="self", body="zebra stays"))
        assert sorted(r.id for r in s.search("zebra")[0]) == ["gone", "stay"]
        (root / "self" / "gone.md").unlink()  # as `git pull` or `rm` would
        results, _ = s.search("ghostly zebra")
        assert [r.id for r in results] == ["stay"]
        assert [r.node.body for r in results] == ["zebra stays"]
        assert "gone" not in s and s.ids() == ["stay"]  # the index was refreshed
        assert [r.id for r in s.search("ghostly")[0]] == ["stay"]
        assert s.health().ok


def test_a_hit_removed_by_another_process_is_dropped(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add_many([Node(id=f"z{i}", layer="self", body=f"zebra number {i}") for i in range(5)])
    with MdCG(root, refresh_interval=None) as a:
        assert len(a.search("zebra")[0]) == 5
        _in_child(root, lambda s: [s.delete(f"z{i}") for i in (1, 3)])
        assert sorted(r.id for r in a.search("zebra")[0]) == ["z0", "z2", "z4"]


# -- issue 10: health(deep=True) compares content and the text index --------------------------------------


def _rewrite_snapshot(root: Path, change: Callable[[Any], None]) -> None:
    snap = snapshot.load(str(root))
    assert snap is not None
    change(snap.state)
    data = snapshot.encode(snap.state, snap.offsets, snap.generation, snap.token)  # the store's own token
    (root / ".mdcg" / "index.snapshot").write_bytes(data)


def _deep_store(root: Path) -> None:
    with MdCG(root) as s:
        s.add(Node(id="n1", layer="self", body="first node alpha"))
        s.add(Node(id="k1", layer="knowledge", tags=["domain:d", "extra"], body="knowledge beta"))
        s.compact_index()


def test_deep_health_catches_a_hand_corrupted_entry(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _deep_store(root)

    def corrupt(state: Any) -> None:
        state.entries["k1"].title = "not the title"
        state.entries["k1"].tags = ["domain:d"]

    _rewrite_snapshot(root, corrupt)
    with MdCG(root) as s:
        assert s.loaded_from == "snapshot"
        assert s.health().ok  # mtime and size still match: only a deep check sees it
        drift = [(f.kind, f.node_id, f.detail) for f in s.health(deep=True).findings]
    assert drift == [("content_drift", "k1", "index differs from the file in: tags, title")]


def test_deep_health_catches_a_corrupted_text_index(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _deep_store(root)

    def corrupt(state: Any) -> None:
        state.text.add("n1", ["bogus", "alpha"], layer=2, bucket=-1, prior=0.5)
        state.text.set_meta("k1", prior=0.9)

    _rewrite_snapshot(root, corrupt)
    with MdCG(root) as s:
        assert s.health().ok
        drift = sorted((f.kind, f.node_id, f.detail) for f in s.health(deep=True).findings)
    assert [d[:2] for d in drift] == [("text_drift", "k1"), ("text_drift", "n1")]
    knowledge = index.layer_code("knowledge")
    assert drift[0][2].endswith(
        f"layer/bucket/prior codes ({knowledge}, 0, 0.9) instead of ({knowledge}, 0, 0.5)"
    )
    assert drift[1][2].startswith("the text index differs from the file: terms (missing [")
    assert drift[1][2].endswith("], extra ['bogus'], or other counts)")


def test_deep_health_is_clean_after_every_kind_of_write(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add_many(
            [
                Node(id=f"n{i}", layer="knowledge", tags=[f"domain:d{i % 3}"], body=f"node {i} 中文")
                for i in range(30)
            ]
        )
        s.update("n1", body="changed words", importance=0.8)
        s.move("n2", "contextual")
        s.delete("n3")
        s.forget("n4", "gone")
        s.add(Node(id="n5", layer="self", body="overwritten"), overwrite=True)
        assert s.health(deep=True).ok
        s.compact_index()
    with MdCG(root) as s:
        assert s.loaded_from == "snapshot"
        assert s.health(deep=True).ok


# -- issue 10: snapshot rows are read by column name -------------------------------------------------------


def _with_columns(root: Path, columns: list[str], fill: Callable[[list[Any]], list[Any]]) -> None:
    """Rewrite the snapshot with other header columns (rows reshaped by ``fill``), checksum valid."""
    data = (root / ".mdcg" / "index.snapshot").read_bytes()
    nl = data.index(b"\n", len(snapshot.MAGIC))
    header = orjson.loads(data[len(snapshot.MAGIC) : nl])
    start = nl + 1
    body = orjson.loads(data[start : start + header["entries_len"]])
    text = data[start + header["entries_len"] :]
    body["entries"] = [fill(row) for row in body["entries"]]
    blob = orjson.dumps(body)
    header.update(columns=columns, entries_len=len(blob), crc32=zlib.crc32(blob))
    new = snapshot.MAGIC + orjson.dumps(header) + b"\n" + blob + text
    (root / ".mdcg" / "index.snapshot").write_bytes(new)


COLUMN_CHANGES = {
    "added": (lambda c: [*c, "new_field"], lambda row: [*row, 7]),
    "removed": (lambda c: c[:-1], lambda row: row[:-1]),
    "reordered": (lambda c: [c[1], c[0], *c[2:]], lambda row: [row[1], row[0], *row[2:]]),
    "renamed": (lambda c: [*c[:-1], "hits"], lambda row: row),
}


@pytest.mark.parametrize("change", sorted(COLUMN_CHANGES))
def test_a_snapshot_with_other_columns_is_refused_and_nothing_is_written(tmp_path: Path, change: str) -> None:
    root = tmp_path / "m"
    _deep_store(root)
    with MdCG(root) as s:
        expected = s.entries()
    cols, fill = COLUMN_CHANGES[change]
    _with_columns(root, cols(list(snapshot.COLUMNS)), fill)
    before = tree_listing(root)
    with no_writes() as attempts:
        s = MdCG(root)
        assert s.loaded_from == "files"
        assert s.entries() == expected
        assert s.health().ok  # another version's snapshot is not damage: replaced at the next compaction
        assert s.search("alpha", record=False)[0][0].id == "n1"
    assert attempts == []
    assert tree_listing(root) == before
    s.close()  # a writable handle that found no usable snapshot leaves a new one
    with MdCG(root) as again:
        assert again.loaded_from == "snapshot" and again.entries() == expected


def test_code_with_a_new_entry_field_refuses_an_older_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "m"
    _deep_store(root)
    monkeypatch.setattr(snapshot, "COLUMNS", (*snapshot.COLUMNS, "a_new_field"))
    snap, problem = snapshot.load_checked(str(root))
    assert (snap, problem) == (None, None)


# -- following another process's compaction -------------------------------------------------------------


def _count_loads(store: MdCG) -> list[int]:
    calls: list[int] = []
    eng = store._engine
    real = eng.load

    def load() -> None:
        calls.append(1)
        real()

    eng.load = load  # type: ignore[method-assign]
    return calls


def _compact(s: MdCG) -> None:
    s.compact_index()


def _compacted_hub(root: Path) -> MdCG:
    """A store with a snapshot, and a reader on it that refreshes only when asked."""
    _hub_store(root)
    with MdCG(root) as s:
        s.compact_index()
    return MdCG(root, refresh_interval=None)


def test_a_reader_follows_the_next_snapshot_without_reloading(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with _compacted_hub(root) as a:
        loads = _count_loads(a)
        first = a._engine.snap_gen
        _in_child(root, _add_new("x"))
        assert a.refresh() == ["x"]  # read the writer's shard
        _in_child(root, _compact)  # removes that shard (its writer is gone)
        _in_child(root, _add_new("y"))
        assert a.refresh() == ["y"]
        assert loads == [] and a._engine.snap_gen == first + 1
        assert a.ids() == ["gone", "hub", "x", "y"]


@pytest.mark.parametrize("compactions", [1, 2])
def test_a_reader_reloads_when_a_compaction_removed_what_it_had_not_read(
    tmp_path: Path, compactions: int
) -> None:
    root = tmp_path / "m"
    with _compacted_hub(root) as a:
        loads = _count_loads(a)
        _in_child(root, _add_new("x"))  # a short-lived writer: its shard is removable at once
        for _ in range(compactions):
            _in_child(root, _compact)
        assert not (root / ".mdcg" / "log").exists() or list((root / ".mdcg" / "log").iterdir()) == []
        assert a.refresh() == ["x"]
        assert loads == [1]
        assert "x" in a and a.get("x").body == "x okapi"
