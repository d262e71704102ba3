"""An index entry's sequence fields are tuples, whichever way the entry was built.

A fresh write, a cold open (entries from the files) and an open from the
snapshot (rows decoded lazily) all give the same tuples. Tuples matter twice:
a caller cannot change the index through an entry the API returned, and once
collected past, a tuple of strings is not tracked by the garbage collector --
lists were four tracked objects per node, whose full collections made a write
at 1M nodes cost about 1.8x a write at 10k.
"""

from __future__ import annotations

import gc
from pathlib import Path

import orjson
import pytest

from md_cg import MdCG, Node, paths, snapshot
from md_cg.index import Entries, Entry
from md_cg.node import Edge

PROCEDURE = "# 功能名：排序\n# 生效条件：数组已加载\n# 执行：快速排序\n\n正文"
EXPECTED = {
    "kp_a": {
        "tags": ("domain:sorting", "algorithms"),
        "ccg_missing": ("steps", "verified_by", "not_applicable"),
        "conditions": ("数组为空",),
        "edges": (("kp_b", "causal"), ("kp_gone", "similar")),
    },
    "kp_b": {
        "tags": (),
        "ccg_missing": ("applies_when", "steps", "executes", "verified_by", "not_applicable"),
        "conditions": (),
        "edges": (),
    },
}


def _procedure() -> Node:
    return Node(
        id="kp_a",
        body=PROCEDURE,
        tags=["domain:sorting", "algorithms"],
        non_applicable_conditions=["数组为空"],
        edges=[Edge(target="kp_b", type="causal"), Edge(target="kp_gone", type="similar")],
    )


def _store(root: Path) -> None:
    with MdCG(root, auto_compact=None) as s:
        s.add_many([_procedure(), Node(id="kp_b", body="plain fact about quicksort")])
        s.compact_index()


def _fields(entry: Entry) -> dict[str, object]:
    return {name: getattr(entry, name) for name in ("tags", "ccg_missing", "conditions", "edges")}


def _check(entries: dict[str, Entry]) -> None:
    assert {i: _fields(e) for i, e in entries.items()} == EXPECTED
    for e in entries.values():
        assert type(e.tags) is tuple and type(e.ccg_missing) is tuple and type(e.conditions) is tuple
        assert type(e.edges) is tuple and all(type(edge) is tuple for edge in e.edges)


def test_a_fresh_write_gives_tuples(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root, auto_compact=None) as s:
        s.add(Node(id="kp_b", body="plain fact about quicksort"))
        s.add(_procedure())
        _check({i: s.entry(i) for i in ("kp_a", "kp_b")})


@pytest.mark.parametrize("source", ["snapshot", "files"])
def test_an_open_gives_the_same_tuples(tmp_path: Path, source: str) -> None:
    root = tmp_path / "m"
    _store(root)
    if source == "files":
        (root / paths.meta(paths.SNAPSHOT)).unlink()
    with MdCG(root, auto_compact=None) as s:
        assert s.loaded_from == source
        _check({i: s.entry(i) for i in ("kp_a", "kp_b")})


@pytest.mark.parametrize("field", ["tags", "edges"])
def test_a_crafted_row_whose_sequence_is_not_an_array_is_named(tmp_path: Path, field: str) -> None:
    root = tmp_path / "m"
    _store(root)
    snap = snapshot.decode((root / paths.meta(paths.SNAPSHOT)).read_bytes())
    assert isinstance(snap, snapshot.Snapshot)
    entries = snap.state.entries
    assert isinstance(entries, Entries)
    table = entries._make.__self__  # type: ignore[union-attr]
    row = entries.raw_row("kp_a")
    assert row is not None
    start, end = table.ptr[row], table.ptr[row + 1]
    values = orjson.loads(bytes(table.blob[start:end]))
    values[snapshot.LAZY.index(field)] = 5
    bad = orjson.dumps(values)
    assert len(bad) <= end - start
    table.blob = memoryview(bytes(table.blob[:start]) + bad.ljust(end - start) + bytes(table.blob[end:]))
    message = f"^snapshot row {row} \\(id 'kp_a'\\) holds a sequence field that is not an array$"
    with pytest.raises(ValueError, match=message):
        entries["kp_a"]
    assert entries["kp_b"].tags == ()


def test_an_entry_the_api_returns_cannot_change_the_index(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _store(root)
    with MdCG(root, auto_compact=None) as s:
        with pytest.raises(AttributeError):
            s.entry("kp_a").tags.append("injected")  # type: ignore[attr-defined]
        assert s.entry("kp_a").tags == ("domain:sorting", "algorithms")
        assert [e.id for e in s.entries() if "injected" in e.tags] == []


@pytest.mark.parametrize("source", ["write", "snapshot"])
def test_the_sequence_fields_are_not_tracked_once_collected(tmp_path: Path, source: str) -> None:
    root = tmp_path / "m"
    _store(root)
    with MdCG(root, auto_compact=None) as s:
        if source == "write":
            s.update("kp_a", body=PROCEDURE + "\n更多")
        entry = s.entry("kp_a")
        gc.collect()
        gc.collect()  # a tuple of tuples is untracked a pass after the tuples inside it
        tracked = [gc.is_tracked(v) for v in (entry.tags, entry.ccg_missing, entry.conditions, entry.edges)]
        assert tracked == [False, False, False, False]
        assert [gc.is_tracked(edge) for edge in entry.edges] == [False, False]
        assert gc.is_tracked(entry)


def _has_instance_dict(node: Node) -> bool:
    # CPython keeps a plain instance's attributes inline until its __dict__ is asked for
    return any(isinstance(r, dict) and "body" in r for r in gc.get_referents(node))


def test_a_write_leaves_the_callers_nodes_without_an_instance_dict(tmp_path: Path) -> None:
    probe = Node(id="probe", body="x")
    probe.__dict__  # noqa: B018
    if not _has_instance_dict(probe):  # CPython 3.13 keeps the values inline even then
        pytest.skip("this Python does not show an instance's materialised __dict__ to the collector")
    batch = [Node(id=f"kp_{i}", body=f"fact {i}", tags=["t"]) for i in range(5)]
    one = _procedure()
    assert not any(_has_instance_dict(n) for n in [*batch, one])
    with MdCG(tmp_path / "m", auto_compact=None) as s:
        s.add_many(batch, stamp=False)
        s.add(one)
        assert sorted(e.id for e in s.entries()) == ["kp_0", "kp_1", "kp_2", "kp_3", "kp_4", "kp_a"]
    assert [n.id for n in [*batch, one] if _has_instance_dict(n)] == []
    one.__dict__  # noqa: B018 - the check itself can see a dict
    assert _has_instance_dict(one)
