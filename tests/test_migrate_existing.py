"""Migrating into a store that already has a life of its own, and odd source shapes.

A re-run (or a migration into a store the agent already uses) must never undo
what happened to a memory in the store since: an archived memory, one edited
or falsified there, one forgotten there. Found by a reviewer: each was
silently replaced (the archived file deleted, an anchor memory overwritten,
a forgotten one brought back) and the report said OK.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from md_cg import MdCG, Scope
from md_cg.cli import app
from md_cg.errors import DuplicateIdError
from md_cg.migrate import migrate, verify_migration
from md_cg.node import Node


def _source(path: Path, rows: list[tuple[object, ...]], *, columns: str = "id, layer, content") -> Path:
    conn = sqlite3.connect(path)
    with conn:
        names = [c.strip() for c in columns.split(",")]
        decl = ", ".join(f"{n} {'INTEGER PRIMARY KEY' if n == 'rid' else ''}" for n in names)
        conn.execute(f"CREATE TABLE nodes ({decl})")
        marks = ", ".join("?" for _ in names)
        conn.executemany(f"INSERT INTO nodes ({columns}) VALUES ({marks})", rows)
    conn.close()
    return path


def _two(tmp_path: Path) -> Path:
    return _source(
        tmp_path / "src.sqlite",
        [("a1", "knowledge", "hello world"), ("a2", "knowledge", "the sky is blue")],
    )


def test_a_rerun_keeps_what_the_store_did_with_its_memories(tmp_path: Path) -> None:
    src, dest = _two(tmp_path), tmp_path / "m"
    first = migrate(src, dest)
    assert first.ok and first.created == 2 and first.kept == []
    with MdCG(dest) as s:
        s.update("a1", body="agent learned: tea")
        s.verify("a2", "x", "falsified")  # moves it to rejected/
        falsified = (dest / s.entry("a2").path).read_bytes()
    again = migrate(src, dest)
    assert again.ok and again.mismatches == []
    assert [i for i, _ in again.kept] == ["a1", "a2"]
    assert again.kept[0][1].startswith("changed in this store (") and "body" in again.kept[0][1]
    with MdCG(dest) as s:
        assert s.get("a1").body == "agent learned: tea"
        assert s.entry("a2").layer == "rejected" and (dest / s.entry("a2").path).read_bytes() == falsified
    # overwrite takes the source's version back
    forced = migrate(src, dest, overwrite=True)
    assert forced.ok and forced.kept == [] and forced.updated == 2
    with MdCG(dest) as s:
        assert s.get("a1").body == "hello world" and s.entry("a2").layer == "knowledge"


def test_an_archived_or_forgotten_memory_is_never_replaced_or_brought_back(tmp_path: Path) -> None:
    src, dest = _two(tmp_path), tmp_path / "m"
    migrate(src, dest)
    with MdCG(dest) as s:
        s.update("a1", body="EDITED")
        s.archive(["a1"])
        archived = s.entry("a1", include_archived=True).path
        s.forget("a2", "user asked to delete")
    again = migrate(src, dest)
    assert again.ok and again.created == 0
    assert [(i, why.split(" (")[0]) for i, why in again.kept] == [
        ("a1", "archived in this store"),
        ("a2", "forgotten in this store"),
    ]
    assert (dest / archived).read_text(encoding="utf-8").endswith("EDITED\n")
    with MdCG(dest) as s:
        assert s.ids() == [] and s.ids(include_archived=True) == ["a1"]
    dry = migrate(src, dest, dry_run=True)
    assert [i for i, _ in dry.kept] == ["a1", "a2"] and (dry.created, dry.updated) == (0, 0)
    assert [i for i, _ in verify_migration(src, dest).kept] == ["a1", "a2"]
    forced = migrate(src, dest, overwrite=True)  # brings a2 back, never replaces the archived a1
    assert [i for i, _ in forced.kept] == ["a1"] and forced.created == 1
    with MdCG(dest) as s:
        assert s.ids() == ["a2"]


def test_a_renamed_memory_is_not_brought_back_under_its_old_id(tmp_path: Path) -> None:
    """A re-run after ``rename`` kept the old id out: before, the source's row brought
    it back beside the renamed memory (two copies of one memory)."""
    src, dest = _two(tmp_path), tmp_path / "m"
    migrate(src, dest)
    with MdCG(dest) as s:
        s.rename("a1", "tea-note")
        s.rename("tea-note", "tea-note-2")  # a chain: the old id's record names the first hop
    again = migrate(src, dest)
    assert again.ok and (again.created, again.updated) == (0, 0)
    kept = [(i, why.split(" (")[0]) for i, why in again.kept]
    assert kept == [("a1", "renamed to 'tea-note' in this store")]
    assert again.kept[0][1].endswith("; its old id is not brought back")
    with MdCG(dest) as s:
        assert s.ids() == ["a2", "tea-note-2"] and s.get("tea-note-2").body == "hello world"
        assert s.tombstones() == []  # a rename is no forget
        assert s.health().by_kind("forgotten_returned") == []
    assert [i for i, _ in migrate(src, dest, dry_run=True).kept] == ["a1"]
    forced = migrate(src, dest, overwrite=True)  # the source wins: the old id is written again
    assert forced.kept == [] and forced.created == 1
    with MdCG(dest) as s:
        assert s.ids() == ["a1", "a2", "tea-note-2"]
        s.forget("a1", "a copy")
        s.add(Node(id="a1", layer="knowledge", body="a new memory under the old id"))
    third = migrate(src, dest)  # the id is held again: the usual rules, not the rename
    assert [(i, why.split(" (")[0]) for i, why in third.kept] == [("a1", "changed in this store")]


def test_the_agents_own_memory_under_a_source_id_is_kept(tmp_path: Path) -> None:
    """The store's own memory, created before the migration under an id the source also has
    (later than the row's version, which has no updated_at), stands; the CLI lists it."""
    src, dest = _two(tmp_path), tmp_path / "m"
    with MdCG(dest) as s:
        s.add(id="a1", layer="anchor", body="I am Nova; never change this")
    result = CliRunner(env={"MDCG_ROOT": None}).invoke(app, ["-q", "migrate", str(src), str(dest)])
    assert result.exit_code == 0, result.output
    assert "  kept 1 memory(ies) the store changed since: not replaced" in result.stdout
    assert "kept (the store's version stands) (1):" in result.stdout
    with MdCG(dest) as s:
        assert s.get("a1").body == "I am Nova; never change this" and s.entry("a1").layer == "anchor"
        assert s.ids() == ["a1", "a2"]


def test_add_many_never_replaces_an_archived_node(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as s:
        s.add(id="x", layer="knowledge", body="old text")
        s.archive(["x"])
        with pytest.raises(DuplicateIdError) as err:
            s.add_many([Node(id="x", layer="knowledge", body="new text")], overwrite=True)
        assert err.value.archived
        assert s.get("x", include_archived=True).body == "old text"


def test_an_expired_migrated_memory_does_not_break_a_rerun(tmp_path: Path) -> None:
    src = _source(
        tmp_path / "src.sqlite",
        [("o1", "knowledge", "call the dentist", "2020-01-01T00:00:00Z")],
        columns="id, layer, content, expires_at",
    )
    dest = tmp_path / "m"
    first = migrate(src, dest)
    assert first.ok and first.mismatches == []
    with MdCG(dest) as s:
        node = s.get("o1", include_expired=True)
        assert (node.retention_tier, node.expires_at) == ("temp", 1577836800.0)  # the row's expiry kept
    assert migrate(src, dest).ok and verify_migration(src, dest).ok


def test_odd_sources_rowids_views_twins_times_and_blob_edges(tmp_path: Path) -> None:
    neg = _source(
        tmp_path / "neg.sqlite",
        [
            (-2, "n-2", "knowledge", "minus two"),
            (0, "n0", "knowledge", "zero"),
            (2, "n2", "knowledge", "two"),
        ],
        columns="rid, id, layer, content",
    )
    report = migrate(neg, tmp_path / "neg")
    assert report.ok and report.created == 3 and report.skipped == 0
    with MdCG(tmp_path / "neg") as s:
        assert s.ids() == ["n-2", "n0", "n2"]

    view = tmp_path / "view.sqlite"
    conn = sqlite3.connect(view)
    with conn:
        conn.execute("CREATE TABLE mem (k, layer, txt)")
        conn.executemany(
            "INSERT INTO mem VALUES (?, ?, ?)", [("v1", "knowledge", "one"), ("v2", "self", "two")]
        )
        conn.execute("CREATE VIEW nodes AS SELECT k AS id, layer, txt AS content FROM mem")
    conn.close()
    assert migrate(view, tmp_path / "view").ok
    with MdCG(tmp_path / "view") as s:
        assert s.ids() == ["v1", "v2"]

    twins = _source(
        tmp_path / "twins.sqlite",
        [("Note", "knowledge", "upper"), ("note", "knowledge", "lower"), ("caf\u00e9", "self", "a"),
         ("cafe\u0301", "self", "b"), ("ms", "self", "created in ms")],
    )  # fmt: skip
    _exec(twins, "ALTER TABLE nodes ADD COLUMN created_at")
    _exec(twins, "UPDATE nodes SET created_at = 1700000000000 WHERE id = 'ms'")
    report = migrate(twins, tmp_path / "twins")
    assert report.ok and report.created == 2
    assert [(r.node_id, r.reason) for r in report.bad_rows] == [
        ("note", "the id differs from 'Note' (nodes rowid 1) only by letter case or Unicode "
         "normalisation: one file on macOS and Windows"),
        ("cafe\u0301", "the id 'cafe\\u0301' differs from 'caf\\u00e9' (nodes rowid 3) only by letter "
         "case or Unicode normalisation: one file on macOS and Windows"),
        ("ms", "field 'created_at' is 1700000000000.0 seconds since the epoch, outside the "
         "years 1-9999; milliseconds since the epoch? md-cg reads seconds"),
    ]  # fmt: skip

    blob = _source(tmp_path / "blob.sqlite", [("a", "knowledge", "x")])
    _exec(blob, "CREATE TABLE edges (source, target, type)")
    _exec(blob, "INSERT INTO edges VALUES ('a', X'0102', 'causal')")
    data = json.loads(json.dumps(migrate(blob, tmp_path / "blob").to_dict()))  # --json printed it
    assert data["dangling_edges"] == []  # the BLOB edge was left out, not kept
    assert [(r["table"], r["rowid"], r["node_id"]) for r in data["bad_rows"]] == [("edges", 1, "a")]


def test_a_source_whose_every_row_is_bad_is_not_ok(tmp_path: Path) -> None:
    src = _source(tmp_path / "bad.sqlite", [("a", "episodic", "x"), ("b", "episodic", "y")])
    report = migrate(src, tmp_path / "m")
    assert not report.ok and report.nothing_good and len(report.bad_rows) == 2
    assert "  no row of the source is good: nothing migrated (see the bad rows)" in report.render()
    empty = _source(tmp_path / "empty.sqlite", [])
    assert migrate(empty, tmp_path / "e").ok  # no rows at all is not a failure


def _exec(path: Path, sql: str) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(sql)
    conn.close()


def test_kept_reason_ignores_a_stamp_the_run_itself_left(tmp_path: Path) -> None:
    """A run killed between moving a node (which stamps updated_at) and writing the
    source's updated_at back leaves a later updated_at and nothing else changed: that
    is not the store's own change, so the node is not listed as kept."""
    from md_cg.migrate import kept_reason
    from md_cg.sqlite_source import iter_rows, open_readonly

    src = _source(
        tmp_path / "src.sqlite",
        [("a1", "knowledge", "hello world", "2024-01-01T00:00:00Z")],
        columns="id, layer, content, updated_at",
    )
    dest = tmp_path / "m"
    migrate(src, dest)
    conn = open_readonly(src)
    (row,) = [r.node for r in iter_rows(conn)]
    conn.close()
    assert row is not None
    with MdCG(dest) as s:
        path = dest / s.entry("a1").path
        path.write_text(
            path.read_text(encoding="utf-8").replace(
                "2024-01-01T00:00:00.000000Z", "2030-01-01T00:00:00.000000Z"
            ),
            encoding="utf-8",
        )
        s.sync()
        assert s.get("a1").updated_at == 1893456000.0
        assert kept_reason(s, row, {}, False) is None
        s.update("a1", body="the agent's own words")
        why = kept_reason(s, row, {}, False)
        assert why is not None and why.endswith("after the source's version (body, updated_at)")


def test_one_unusual_edge_leaves_the_edge_out_not_the_memory(tmp_path: Path) -> None:
    """A node with one edge of type 'related' (or a BLOB column in edges) was a bad row:
    the whole memory was dropped. 'Causal' is causal."""
    src = _source(tmp_path / "src.sqlite", [("a", "knowledge", "alpha"), ("b", "knowledge", "beta")])
    _exec(src, "CREATE TABLE edges (source, target, type)")
    _exec(src, "INSERT INTO edges VALUES ('a', 'b', 'Causal'), ('a', 'b', 'related'), ('b', 'a', 'part_of')")
    report = migrate(src, tmp_path / "m")
    assert report.ok and report.migrated == 2
    assert [(r.table, r.rowid, r.reason) for r in report.bad_rows] == [
        ("edges", 2, "the edge 'a' -> 'b' is left out: field 'edges' has an edge type outside "
         "part_of, causal, sequential, spatial, hierarchical, similar, supersedes (got 'related')"),
    ]  # fmt: skip
    with MdCG(tmp_path / "m") as s:
        assert [(e.target, e.type) for e in s.get("a").edges] == [("b", "causal")]
        assert [(e.target, e.type) for e in s.get("b").edges] == [("a", "part_of")]
    assert "  node rows 2: 2 good, 0 bad; edge rows: 1 bad (left out)\n" in report.render()


def test_round_two_store_twins_markers_restores_and_the_last_instant(tmp_path: Path) -> None:
    """A source id differing from a store id only by case aborted the whole run; a body
    with conflict markers was stored and flagged a merge conflict for ever; overwrite's
    deliberate return of a forgotten memory was reported as git bringing it back; a time
    of 9999-12-31T23:59:59.99999 became year 10000."""
    dest = tmp_path / "m"
    with MdCG(dest) as s:
        s.add(id="Note", layer="knowledge", body="the store's own note")
    src = _source(
        tmp_path / "src.sqlite",
        [
            ("note", "knowledge", "lower case"),
            ("ok", "knowledge", "fine"),
            ("diff", "knowledge", "How it looks:\n<<<<<<< ours\na\n=======\nb\n>>>>>>> theirs\n"),
            ("late", "knowledge", "late"),
        ],
    )
    _exec(src, "ALTER TABLE nodes ADD COLUMN created_at")
    _exec(src, "UPDATE nodes SET created_at = 253402300799.99999 WHERE id = 'late'")
    report = migrate(src, dest)
    assert report.ok and report.created == 1
    assert [(i, why.split(",")[0]) for i, why in report.kept] == [
        ("note", "the store holds 'Note'"),
    ]
    assert sorted((r.node_id, r.reason.split(":")[0]) for r in report.bad_rows) == [
        ("diff", "the body holds git conflict markers (<<<<<<<, =======, >>>>>>>) outside a code block"),
        ("late", "field 'created_at' is 253402300800.0 seconds since the epoch, outside the years "
         "1-9999; milliseconds since the epoch? md-cg reads seconds"),
    ]  # fmt: skip
    with MdCG(dest) as s:
        assert s.ids() == ["Note", "ok"]
        s.forget("ok", "wrong")
    back = migrate(src, dest, overwrite=True)
    assert back.ok and back.created == 1
    with MdCG(dest) as s:
        assert s.ids() == ["Note", "ok"] and s.health().findings == ()
        assert [t.get("event") for t in s.tombstones()] == ["forget", "restored"]


def test_a_node_file_in_archive_outside_its_layer_folders_is_named(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="s1", layer="knowledge", body="x")
        rel = s.entry("s1").path
    (root / "archive" / "misc").mkdir(parents=True)
    (root / rel).rename(root / "archive" / "misc" / "s1.md")
    with MdCG(root) as s:
        s.sync()
        assert [(f.kind, f.path) for f in s.health().findings] == [("stray_file", "archive/misc/s1.md")]


def test_numbers_where_text_is_expected_are_read_as_a_source_means_them(tmp_path: Path) -> None:
    """An INTEGER content was a bad row ('holds a int, expected text'); epoch seconds
    stored as TEXT were rejected with an ISO 8601 message."""
    src = _source(
        tmp_path / "src.sqlite",
        [("n1", "knowledge", 42, "1700000000"), ("n2", "knowledge", "text", "1700000000.5")],
        columns="id, layer, content, created_at",
    )
    report = migrate(src, tmp_path / "m")
    assert report.ok and report.created == 2 and report.bad_rows == []
    with MdCG(tmp_path / "m") as s:
        assert (s.get("n1").body, s.get("n1").created_at) == ("42", 1700000000.0)
        assert s.get("n2").created_at == 1700000000.5


def test_round_three_rowid_columns_bad_first_rows_kept_edges_and_archived_exports(tmp_path: Path) -> None:
    # a user column named _rowid_ hid the real rowid: resume and order came from user data
    conn = sqlite3.connect(tmp_path / "c.sqlite")
    with conn:
        conn.execute('CREATE TABLE nodes (id, layer, content, "_rowid_" INTEGER)')
        conn.executemany(
            "INSERT INTO nodes VALUES (?, ?, ?, 1)", [(f"c{i}", "knowledge", f"t{i}") for i in range(10)]
        )
    conn.close()
    calls = []

    def stop(done: int, total: int) -> None:
        calls.append(done)
        if len(calls) == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        migrate(tmp_path / "c.sqlite", tmp_path / "c", batch=3, progress=stop)
    again = migrate(tmp_path / "c.sqlite", tmp_path / "c", batch=3)
    assert again.ok and again.resumed_from == 3 and again.skipped == 3
    with MdCG(tmp_path / "c") as s:
        assert s.ids() == sorted(f"c{i}" for i in range(10))
    # the first row carrying an id owns it, even when it is bad (undecodable text)
    conn = sqlite3.connect(tmp_path / "b.sqlite")
    with conn:
        conn.execute("CREATE TABLE nodes (id, layer, content)")
        conn.execute("INSERT INTO nodes VALUES ('a', 'knowledge', CAST(X'ff41' AS TEXT))")
        conn.execute("INSERT INTO nodes VALUES ('a', 'knowledge', 'second row with id a')")
    conn.close()
    report = migrate(tmp_path / "b.sqlite", tmp_path / "b")
    assert [r.reason for r in report.bad_rows][1] == (
        "duplicate id: nodes rowid 1 holds it first, and was rejected (column 'content' is not "
        "valid UTF-8 at byte 0); neither row is stored"
    )
    # an edge of a kept row was never written: it is not counted as a kept dangling edge
    src = _source(tmp_path / "k.sqlite", [("k1", "knowledge", "source version")])
    _exec(src, "CREATE TABLE edges (source, target, type)")
    _exec(src, "INSERT INTO edges VALUES ('k1', 'ghost', 'causal')")
    with MdCG(tmp_path / "k") as s:
        s.add(id="k1", layer="knowledge", body="the agent's own k1")
    report = migrate(src, tmp_path / "k")
    assert [i for i, _ in report.kept] == ["k1"] and report.dangling_edges == []


def test_an_archived_memory_goes_back_to_archive_through_export_and_import(tmp_path: Path) -> None:
    from md_cg.transfer import export_nodes, import_nodes

    with MdCG(tmp_path / "a") as s:
        s.add(id="live", layer="knowledge", body="still true")
        s.add(id="old", layer="knowledge", body="put away")
        s.archive(["old"])
        export_nodes(s, tmp_path / "all.jsonl", include_archived=True)
    lines = [json.loads(x) for x in (tmp_path / "all.jsonl").read_text().splitlines()]
    assert [(r["id"], r.get("archived")) for r in lines] == [("live", None), ("old", True)]
    with MdCG(tmp_path / "b") as t:
        report = import_nodes(t, str(tmp_path / "all.jsonl"))
        assert report.archived == ["old"]
        assert t.ids() == ["live"] and t.ids(include_archived=True) == ["live", "old"]
        assert "archived" not in t.get("old", include_archived=True).extra


def test_round_four_a_newer_broken_file_is_kept_and_an_archived_import_repeats(tmp_path: Path) -> None:
    from md_cg.transfer import export_nodes, import_nodes

    src = _source(
        tmp_path / "s.sqlite",
        [("r1", "knowledge", "row text", "2024-01-01T00:00:00Z")],
        columns="id, layer, content, updated_at",
    )
    dest = tmp_path / "m"
    migrate(src, dest)
    with MdCG(dest) as s:
        s.update("r1", body="the agent's newer text")
        path = dest / s.entry("r1").path
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("---\n", "---\n<<<<<<< HEAD\n=======\n>>>>>>> b\n", 1), encoding="utf-8")
    report = migrate(src, dest)
    assert [i for i, _ in report.kept] == ["r1"] and report.kept[0][1].startswith(
        "its file knowledge/orphan/r1.md was changed outside md-cg and is unusable: "
        "a git merge left conflict markers"
    )
    assert report.kept[0][1].endswith("; fix it, then run again (it is not written over)")
    assert "the agent's newer text" in path.read_text(encoding="utf-8")
    # the same export of an archived memory imported twice: unchanged the second time
    with MdCG(tmp_path / "a") as s:
        s.add(id="old1", layer="knowledge", body="put away")
        s.archive(["old1"])
        export_nodes(s, tmp_path / "x.jsonl", include_archived=True)
    with MdCG(tmp_path / "b") as t:
        assert import_nodes(t, str(tmp_path / "x.jsonl")).created == 1
        again = import_nodes(t, str(tmp_path / "x.jsonl"))
        assert (again.created, again.unchanged) == (0, 1)
        assert t.ids(include_archived=True) == ["old1"] and t.ids() == []


def _agent_at_work(dest: str, n: int, stop: Any, out: Any) -> None:
    """Forget every fifth id it picks and update the others, until told to stop."""
    rng = random.Random(7)
    last: dict[str, str] = {}
    forgot: set[str] = set()
    with MdCG(dest, refresh_interval=0) as s:
        k = 0
        while not stop.is_set() or k < 40:
            k += 1
            node_id = f"m{rng.randrange(n):04d}"
            if node_id in forgot:
                continue
            if k % 5 == 0:
                s.forget(node_id, "the user asked")
                forgot.add(node_id)
                last.pop(node_id, None)
            else:
                s.update(node_id, body=f"the agent's text {k}")
                last[node_id] = f"the agent's text {k}"
    out.put((last, sorted(forgot)))


def test_a_rerun_beside_a_working_agent_undoes_none_of_its_forgets_and_updates(tmp_path: Path) -> None:
    """The look at a memory (forgotten? changed since?) and its write happen under its lock:
    an agent forgetting and updating while migrations re-run keeps every acknowledged change
    (by id: no forgotten id is back, every updated memory holds the agent's last text)."""
    from md_cg.sqlite_source import write_nodes

    n, t0 = 400, 1_700_000_000.0
    src, dest = tmp_path / "src.sqlite", tmp_path / "store"
    conn = sqlite3.connect(src)
    write_nodes(
        conn,
        [
            Node(id=f"m{i:04d}", layer="knowledge", body=f"memory {i}", created_at=t0, updated_at=t0)
            for i in range(n)
        ],
    )
    conn.close()
    assert migrate(src, dest, batch=50).ok
    ctx = multiprocessing.get_context("fork")
    stop, out = ctx.Event(), ctx.Queue()
    agent = ctx.Process(target=_agent_at_work, args=(str(dest), n, stop, out))
    agent.start()
    for _ in range(3):
        migrate(src, dest, batch=20)
    stop.set()
    last, forgot = out.get(timeout=120)
    agent.join(timeout=60)
    assert agent.exitcode == 0 and forgot and last
    with MdCG(dest, read_only=True) as s:
        ids = set(s.ids())
        assert ids == {f"m{i:04d}" for i in range(n)} - set(forgot)
        assert {i: s.get(i).body for i in last} == last
        kinds = {f.kind for f in s.health().findings}
        assert kinds <= {"bucket_degraded"}, kinds  # (400 memories in one bucket)


def test_a_file_edited_to_hold_another_id_is_kept_by_a_rerun_and_left_out_of_an_import(
    tmp_path: Path,
) -> None:
    """The file at a1's path holds memory b (a hand edit, then a sync): a re-run keeps a1
    (it used to abort every time), an import leaves the record out and imports the rest."""
    from md_cg.sqlite_source import write_nodes
    from md_cg.transfer import import_nodes

    t0 = 1_700_000_000.0
    src, dest = tmp_path / "src.sqlite", tmp_path / "store"
    conn = sqlite3.connect(src)
    write_nodes(
        conn, [Node(id=i, layer="self", body=f"{i} text", created_at=t0, updated_at=t0) for i in ("a1", "o1")]
    )
    conn.close()
    assert migrate(src, dest).ok
    path = dest / "self" / "a1.md"
    path.write_text(path.read_text().replace('id: "a1"', 'id: "b"'))
    with MdCG(dest) as s:
        s.sync()
    report = migrate(src, dest)
    assert [(i, "holds memory 'b'" in why) for i, why in report.kept] == [("a1", True)]
    records = tmp_path / "r.jsonl"
    records.write_text('{"id":"a1","layer":"self","body":"x"}\n{"id":"n1","layer":"self","body":"new"}\n')
    with MdCG(dest) as s:
        done = import_nodes(s, records, skip_bad=True, overwrite=True)
        assert [b.node_id for b in done.bad] == ["a1"] and "holds memory 'b'" in done.bad[0].reason
        assert sorted(s.ids()) == ["b", "n1", "o1"]
    assert 'id: "b"' in path.read_text()


def test_a_restored_record_is_listed_only_to_the_memorys_scope(tmp_path: Path) -> None:
    """migrate(overwrite) of a forgotten private memory left a `restored` record without
    scope fields: every scoped handle's tombstones() listed its id (reviewer's find)."""
    src = _source(
        tmp_path / "src.sqlite",
        [("alice-note", "knowledge", "alice's private note", "alice", "private")],
        columns="id, layer, content, agent_scope, sensitivity",
    )
    dest = tmp_path / "m"
    migrate(src, dest)
    with MdCG(dest) as s:
        assert s.entry("alice-note").agent_scope == "alice"
        s.forget("alice-note", "tidy")
    assert migrate(src, dest, overwrite=True).created == 1
    with MdCG(dest, scope=Scope(agent="bob", max_sensitivity="private")) as bob:
        assert bob.tombstones() == []
    with MdCG(dest, scope=Scope(agent="alice", max_sensitivity="private")) as alice:
        assert [(r.get("event"), r["id"]) for r in alice.tombstones()] == [
            ("forget", "alice-note"),
            ("restored", "alice-note"),
        ]


def test_a_source_change_to_updated_at_alone_is_written(tmp_path: Path) -> None:
    """A row whose only change is a new updated_at (none before, or a later one) was
    reported unchanged and never written, so every re-run failed verification
    ("updated_at: source ..., file None"). Unstamped, updated_at is data."""
    src = _source(
        tmp_path / "src.sqlite",
        [("a1", "knowledge", "hello world", None), ("a2", "knowledge", "blue sky", "2024-01-01T00:00:00Z")],
        columns="id, layer, content, updated_at",
    )
    dest = tmp_path / "m"
    assert migrate(src, dest).ok
    _exec(src, "UPDATE nodes SET updated_at = 1790000000.25 WHERE id = 'a1'")
    assert migrate(src, dest, dry_run=True).updated == 1
    report = migrate(src, dest)
    assert (report.ok, report.updated, report.unchanged, report.mismatches) == (True, 1, 1, [])
    _exec(src, "UPDATE nodes SET updated_at = 1790086400.5 WHERE id = 'a2'")
    report = migrate(src, dest)
    assert (report.ok, report.updated, report.unchanged, report.mismatches) == (True, 1, 1, [])
    with MdCG(dest) as s:
        assert [s.get(i).updated_at for i in ("a1", "a2")] == [1790000000.25, 1790086400.5]
    again = migrate(src, dest)
    assert (again.ok, again.updated, again.unchanged) == (True, 0, 2)
    # the same through add_many(stamp=False); a stamped add still ignores the time alone
    with MdCG(tmp_path / "b") as s:
        s.add_many([Node(id="x", layer="self", body="b", created_at=50.0, updated_at=100.0)], stamp=False)
        s.add_many(
            [Node(id="x", layer="self", body="b", created_at=50.0, updated_at=200.0)],
            stamp=False,
            overwrite=True,
        )
        assert s.get("x").updated_at == 200.0
        s.add_many([Node(id="x", layer="self", body="b", created_at=50.0, updated_at=300.0)], overwrite=True)
        assert s.get("x").updated_at == 200.0


def test_a_hand_broken_file_not_yet_synced_is_kept_and_the_rest_migrates(tmp_path: Path) -> None:
    """One file broken by hand (YAML as a bad merge leaves it) or edited to hold another
    id, with no sync since: the re-run aborted as a whole (exit 2, "fix or move it first")
    and the dry run said "change 1". Both now list it under kept and migrate the rest."""
    from conftest import no_writes, tree_listing

    rows = [(f"k{i}", "knowledge", f"text {i}", "2024-01-01T00:00:00Z") for i in range(4)]
    src = _source(tmp_path / "src.sqlite", rows, columns="id, layer, content, updated_at")
    dest = tmp_path / "m"
    assert migrate(src, dest).created == 4
    (dest / "knowledge/orphan/k0.md").unlink()
    (dest / "knowledge/orphan/k1.md").write_text("---\nid: [unclosed\n---\nbody\n", encoding="utf-8")
    k2 = dest / "knowledge/orphan/k2.md"
    k2.write_text(k2.read_text(encoding="utf-8").replace('id: "k2"', 'id: "other"'), encoding="utf-8")
    before = tree_listing(dest)
    with no_writes() as attempts:
        dry = migrate(src, dest, dry_run=True)
    assert attempts == [] and tree_listing(dest) == before
    report = migrate(src, dest)
    for r in (dry, report):
        assert (r.created, r.updated, r.unchanged) == (1, 0, 1)
        assert [i for i, _ in r.kept] == ["k1", "k2"]
        assert r.kept[0][1].startswith("its file knowledge/orphan/k1.md is unusable: the YAML frontmatter")
        assert "holds memory 'other'" in r.kept[1][1]
    assert report.ok and report.mismatches == [] and report.extras == ["other"]
    assert (dest / "knowledge/orphan/k1.md").read_text(encoding="utf-8") == "---\nid: [unclosed\n---\nbody\n"
    assert 'id: "other"' in k2.read_text(encoding="utf-8")
    result = CliRunner().invoke(app, ["migrate", str(src), str(dest)])
    assert result.exit_code == 0, result.output
