"""A migration into a store in use, session 30's review.

1. A memory of the store with no ``updated_at`` (a note written by hand, with or without
   frontmatter, a memory stored with ``add_many(stamp=False)``) was taken as older than
   the row and replaced -- a hand note in ``contextual/`` moved to the row's folder --
   and the text report said only ``updated 4 (2 moved)``.
2. Messages about bad edge rows printed long ids whole: two edge rows with a target of
   1M characters made a 2 MB report, and ``mdcg census`` 2 MB on stderr.
3. The report's layer counts and buckets counted every good row, kept ones included:
   ``layers: knowledge 12`` where the store held 9 knowledge memories.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from typer.testing import CliRunner

from md_cg import MdCG
from md_cg.cli import app
from md_cg.migrate import migrate, verify_migration
from md_cg.node import Node

T = 1704067200.0  # 2024-01-01
OLD = 1577836800.0  # 2020-01-01
TEA = "cond_tea_a9f74d1e"


def _source(path: Path, rows: list[tuple[object, ...]]) -> Path:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(
            "CREATE TABLE nodes (id TEXT, layer TEXT, content TEXT, tags TEXT, "
            "created_at REAL, updated_at REAL)"
        )
        conn.executemany("INSERT INTO nodes VALUES (?, ?, ?, ?, ?, ?)", rows)
    conn.close()
    return path


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*.md"))
        if ".mdcg" not in p.relative_to(root).parts
    }


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner(env={"MDCG_ROOT": None}).invoke(app, ["-q", *args])
    return result.exit_code, result.stdout, result.stderr


P4_NOTE = b"AGENT p4 hand-written note, no frontmatter\n"
P12_NOTE = b'---\nid: "p12"\nlayer: "contextual"\n---\nAGENT p12 hand note in contextual\n'


def _store_in_use(tmp_path: Path) -> tuple[Path, Path]:
    """A store where m1 and m2 came from an earlier migration of rows without updated_at,
    and p2, p3, p4, p12 are the store's own; then the source's new version."""
    dest = tmp_path / "store"
    first = _source(
        tmp_path / "first.sqlite",
        [("m1", "knowledge", "OLD m1", None, T, None), ("m2", "self", "OLD m2", None, T, None)],
    )
    assert migrate(first, dest).created == 2
    with MdCG(dest) as s:
        s.add_many(
            [Node(id="p2", layer="knowledge", body="AGENT p2 (2020)", created_at=OLD, updated_at=OLD)],
            stamp=False,
        )
        s.add_many([Node(id="p3", layer="knowledge", body="AGENT p3 (no updated_at)")], stamp=False)
    (dest / "knowledge" / "p4.md").write_bytes(P4_NOTE)
    (dest / "contextual").mkdir(exist_ok=True)
    (dest / "contextual" / "p12.md").write_bytes(P12_NOTE)
    with MdCG(dest) as s:
        s.sync()
    rows = [(i, "knowledge", f"SOURCE {i}", None, T, T) for i in ("p2", "p3", "p4", "p12")]
    rows += [("m1", "knowledge", "NEW m1", None, T, None), ("m2", "knowledge", "NEW m2", None, T, None)]
    return _source(tmp_path / "src.sqlite", rows), dest


NO_TIME = (
    "{} has no updated_at and not the row's created_at, so it is not known to be older than the "
    "source's version ({} differ); a run with overwrite (--overwrite) replaces it"
)
KEPT = [
    ("p3", NO_TIME.format("knowledge/orphan/p3.md", "body, created_at, updated_at")),
    ("p4", NO_TIME.format("knowledge/p4.md", "body, created_at, updated_at")),
    ("p12", NO_TIME.format("contextual/p12.md", "layer, body, created_at, updated_at")),
]


def test_memories_without_updated_at_are_kept_and_the_replaced_ones_named(tmp_path: Path) -> None:
    src, dest = _store_in_use(tmp_path)
    before = _files(dest)
    assert sorted(before) == [
        "contextual/p12.md",
        "knowledge/orphan/m1.md",
        "knowledge/orphan/p2.md",
        "knowledge/orphan/p3.md",
        "knowledge/p4.md",
        "self/m2.md",
    ]
    dry = migrate(src, dest, dry_run=True)
    assert dry.kept == KEPT  # the code before replaced p3, p4 and p12 (and moved p12)
    assert (dry.changed_ids, dry.moved_ids) == (["p2", "m1", "m2"], ["m2"])
    assert "would change (3):\n  p2\n  m1\n  m2 (moving)\n" in dry.render()
    assert _files(dest) == before

    code, out, _ = _cli("migrate", str(src), str(dest))
    assert code == 0, out
    assert "  created 0, updated 3 (1 moved), unchanged 0, skipped (resumed) 0\n" in out
    assert "updated (the source's version written over the store's) (3):\n  p2\n  m1\n  m2 (moved)\n" in out
    assert "kept (the store's version stands) (3):\n" + "".join(f"  {i}: {w}\n" for i, w in KEPT) in out
    after = _files(dest)
    assert sorted(after) == [
        "contextual/p12.md",
        "knowledge/orphan/m1.md",
        "knowledge/orphan/m2.md",
        "knowledge/orphan/p2.md",
        "knowledge/orphan/p3.md",
        "knowledge/p4.md",
    ]
    # the store's own notes: byte for byte as they were, where they were
    for rel in ("contextual/p12.md", "knowledge/orphan/p3.md", "knowledge/p4.md"):
        assert after[rel] == before[rel]
    assert after["knowledge/p4.md"] == P4_NOTE and after["contextual/p12.md"] == P12_NOTE
    with MdCG(dest, read_only=True) as s:
        assert [s.get(i).body for i in ("p2", "m1", "m2", "p3")] == [
            "SOURCE p2",
            "NEW m1",
            "NEW m2",
            "AGENT p3 (no updated_at)",
        ]
    check = verify_migration(src, dest)
    assert check.ok and check.kept == KEPT and check.mismatches == []

    forced = migrate(src, dest, overwrite=True)
    assert forced.ok and forced.kept == [] and forced.changed_ids == ["p3", "p4", "p12"]
    assert forced.moved_ids == ["p4", "p12"]
    with MdCG(dest, read_only=True) as s:
        assert [s.get(i).body for i in ("p3", "p4", "p12")] == ["SOURCE p3", "SOURCE p4", "SOURCE p12"]
    assert sorted(_files(dest)) == [f"knowledge/orphan/{i}.md" for i in ("m1", "m2", "p12", "p2", "p3", "p4")]


def test_the_updated_ids_are_listed_up_to_twenty(tmp_path: Path) -> None:
    ids = [f"n{i:02d}" for i in range(25)]
    dest = tmp_path / "store"
    migrate(_source(tmp_path / "a.sqlite", [(i, "knowledge", "old", None, T, T) for i in ids]), dest)
    src = _source(tmp_path / "b.sqlite", [(i, "knowledge", "new", None, T, T + 1) for i in ids])
    code, out, _ = _cli("migrate", str(src), str(dest))
    assert code == 0, out
    listed = "".join(f"  {i}\n" for i in ids[:20])
    assert (
        f"updated (the source's version written over the store's) (25):\n{listed}  ... 5 more (see --json)\n"
        in out
    )


def _long_edges(path: Path) -> Path:
    conn = sqlite3.connect(path)
    with conn:
        conn.executescript(
            "CREATE TABLE nodes (id TEXT, layer TEXT, content TEXT);"
            "CREATE TABLE edges (source TEXT, target TEXT, type TEXT, extra TEXT);"
        )
        conn.execute("INSERT INTO nodes VALUES ('a', 'knowledge', 'hello')")
        conn.execute("INSERT INTO nodes VALUES (?, 'knowledge', 'x')", ("n" * 1_000_000,))
        conn.execute("INSERT INTO edges VALUES ('a', ?, 'bogus', NULL)", ("y" * 1_000_000,))
        conn.execute("INSERT INTO edges VALUES ('a', ?, 'causal', 'bad json')", ("z" * 1_000_000,))
        conn.execute("INSERT INTO edges VALUES (?, ?, 'causal', NULL)", ("s" * 1_000_000, "t" * 1_000_000))
    conn.close()
    return path


def _short(c: str) -> str:
    return "'" + c * 77 + "..." + c * 78 + "'"


def test_messages_about_rows_with_long_ids_are_bounded(tmp_path: Path) -> None:
    src = _long_edges(tmp_path / "long.sqlite")
    y, z, s, t, n = (_short(c) for c in "yzstn")
    unsafe = "it is 1000000 characters long (max 128); ids must be safe file-name stems"
    node = f"unsafe node id {n}: {unsafe}"
    edge1 = f"the edge 'a' -> {y} is left out: field 'edges' has an unsafe target: "
    edge1 += f"unsafe edge target {y}: {unsafe} (got {y})"
    edge2 = (
        f"the edge 'a' -> {z} is left out: invalid JSON in column 'edges.extra' (Expecting value at char 0)"
    )
    orphan = f"source {s} (target {t}) is not a node in 'nodes'"
    report = migrate(src, tmp_path / "store")
    assert [r.reason for r in report.bad_rows] == [edge1, edge2, node, orphan]
    labels = ["edges rowid 1", "edges rowid 2", f"nodes rowid 2 (id {n})", "edges rowid 3"]

    code, out, _ = _cli("migrate", str(src), str(tmp_path / "store2"))
    assert code == 0
    assert (
        "bad node rows (1):\n"
        f"  nodes rowid 2 (id {n}): {node}\n"
        "bad edge rows (3):\n"
        f"  edges rowid 1 (source 'a'): {edge1}\n"
        f"  edges rowid 2 (source 'a'): {edge2}\n"
        f"  edges rowid 3 (source {s}): {orphan}\n"
    ) in out
    assert len(out) < 3_000  # it was 4 MB

    code, _, err = _cli("census", str(src))
    # the census reads no edges: the bad edge rows are counted, not listed (test_census_robust_s30)
    assert [line for line in err.splitlines() if line.startswith("skipped ")] == [
        f"skipped {src}: {labels[2]}: {node}"
    ]
    assert (
        err.splitlines()[-1] == "1 node row(s) skipped; 3 bad edge row(s) ignored (the census reads no edges)"
    )
    assert len(err) < 3_000


def _counts_store(tmp_path: Path) -> tuple[Path, Path]:
    dest = tmp_path / "store"
    with MdCG(dest) as st:
        for i in ("k1", "k2", "k3"):
            st.add(Node(id=i, layer="knowledge", body=f"AGENT {i}", tags=["domain:tea"]))
        st.archive("k1")
        st.forget("k2", "a secret")
        st.rename("k3", "k3new")
        st.add(Node(id="k4", layer="self", body="AGENT k4 in self"))
        st.add(Node(id="x", layer="contextual", body="the agent's own"))
    rows = [(f"k{i}", "knowledge", f"SOURCE k{i}", '["domain:tea"]', T, T) for i in range(1, 7)]
    return _source(tmp_path / "src.sqlite", rows), dest


def test_layer_counts_and_buckets_are_the_resulting_stores(tmp_path: Path) -> None:
    src, dest = _counts_store(tmp_path)
    result = ({"knowledge": 3, "contextual": 1, "self": 1}, {TEA: 3})
    dry = migrate(src, dest, dry_run=True)
    assert [i for i, _ in dry.kept] == ["k1", "k2", "k3", "k4"] and dry.created == 2
    assert (dry.layers, dry.buckets) == result
    assert "  layers of the store a run would leave: knowledge 3, contextual 1, self 1\n" in dry.render()

    code, out, _ = _cli("migrate", str(src), str(dest))
    assert code == 0, out
    assert f"  knowledge: 3 node(s) in 1 bucket(s); largest {TEA} 3 (100.0%), orphan 0\n" in out
    assert "  layers of the store after the run: knowledge 3, contextual 1, self 1\n" in out
    with MdCG(dest, read_only=True) as st:
        assert st.ids("knowledge") == ["k3new", "k5", "k6"] and st.ids("self") == ["k4"]
    again = migrate(src, dest)
    assert (again.layers, again.buckets) == result
    check = verify_migration(src, dest)
    assert (check.layers, check.buckets) == result
