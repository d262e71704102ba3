"""sqlite -> md migration: bad rows, full verification, dry run, idempotence, resume, the CLI."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import no_writes, node_tree, python_env, run_and_kill, tree_listing

from md_cg import MdCG
from md_cg.fsops import FileLock
from md_cg.layout import bucket_of, rel_path
from md_cg.migrate import (
    BadRow,
    MigrationError,
    diff_nodes,
    expected_after_retention,
    journal_path,
    migrate,
    read_journal,
    source_identity,
    verify_migration,
)
from md_cg.node import Edge, Node
from md_cg.nodefile import read_node
from md_cg.sample import bundled_sample_path, generate
from md_cg.sqlite_source import SCHEMA_SQL, dangling_edges, iter_rows, open_readonly
from migrate import main

SLICE_ROWS = 226


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _source_nodes(path: Path) -> list[Node]:
    conn = open_readonly(path)
    try:
        return [r.node for r in iter_rows(conn) if r.node is not None]
    finally:
        conn.close()


def _file_bytes(root: Path) -> dict[str, tuple[str, int]]:
    """Every node file under root (not .mdcg/): relative path -> (sha256, mtime_ns)."""
    out = {}
    for rel in node_tree(root):
        path = root / rel
        if path.is_file():
            out[rel] = (_sha256(path), path.stat().st_mtime_ns)
    return out


def _copy_slice(tmp_path: Path) -> Path:
    src = tmp_path / "slice.sqlite"
    src.write_bytes(bundled_sample_path().read_bytes())
    return src


def _execute(path: Path, sql: str, *params: object) -> None:
    conn = sqlite3.connect(path)
    try:
        with conn:
            conn.execute(sql, params)
    finally:
        conn.close()


# -- a hand-made source with one bad row of each kind ----------------------------------


def _bad_source(path: Path) -> None:
    schema = SCHEMA_SQL.replace("id TEXT NOT NULL PRIMARY KEY", "id TEXT").replace(
        "content TEXT NOT NULL", "content TEXT"
    )
    conn = sqlite3.connect(path)
    conn.executescript(schema)

    def row(**cols: object) -> None:
        cols.setdefault("layer", "knowledge")
        cols.setdefault("content", "body")
        names = ", ".join(cols)
        marks = ", ".join("?" for _ in cols)
        conn.execute(f"INSERT INTO nodes ({names}) VALUES ({marks})", list(cols.values()))

    row(id="good_1", tags='["domain:数学", "algebra"]', importance=0.5, created_at=1.5)
    row(id="bad_json", tags='["a",')
    row(id="bad_layer", layer="episodic")
    row(id="good_1", content="a second row with the same id")
    row(id="../escape")
    row(id="bad_basis", verification_basis="proof")
    row(id="null_content", content=None)
    row(id="good_2", layer="self", content="", extra='{"mood": "calm"}')
    row(id=b"\x00id")
    row(id="lone_surrogate", tags='["\\ud800"]')
    row(id="huge_int", extra='{"big": 99999999999999999999}')
    edges = "INSERT INTO edges (source, target, type, confidence, verified) VALUES (?, ?, ?, ?, ?)"
    conn.execute(edges, ("good_1", "good_2", "part_of", 0.7, 1))
    conn.execute(edges, ("good_2", "nowhere", "similar", None, 0))
    conn.execute(edges, ("ghost", "good_1", "causal", None, None))
    conn.commit()
    conn.close()


EXPECTED_BAD = [
    BadRow(2, "bad_json", "invalid JSON in column 'tags' (Expecting value at char 5)"),
    BadRow(
        3,
        "bad_layer",
        "node 'bad_layer': unknown layer 'episodic'; expected one of: anchor, structural, "
        "knowledge, contextual, self, rejected, unresolved",
    ),
    BadRow(4, "good_1", "duplicate id, first seen at nodes rowid 1"),
    BadRow(
        5,
        "../escape",
        "unsafe node id '../escape': it contains '..'; ids must be safe file-name stems",
    ),
    BadRow(
        6,
        "bad_basis",
        "node 'bad_basis': field 'verification_basis' must be one of compiler, test, "
        "measurement, formal_proof, data, other (or absent) (got 'proof')",
    ),
    BadRow(7, "null_content", "column 'content' is NULL (use '' for an empty body)"),
    BadRow(9, b"\x00id", "column 'id' holds a BLOB, expected text"),
    BadRow(
        10,
        "lone_surrogate",
        "cannot be written to a node file: field 'tags': string '\\ud800'... contains a lone "
        "surrogate and cannot be stored as UTF-8",
    ),
    BadRow(
        11,
        "huge_int",
        "node 'huge_int': field 'big' holds the integer 99999999999999999999, outside the range a "
        "node file stores (-2**63 to 2**64 - 1) (got 99999999999999999999)",
    ),
    BadRow(3, "ghost", "source 'ghost' (target 'good_1') is not a node in 'nodes'", "edges"),
]


def test_bad_rows_are_reported_by_rowid_and_the_good_rows_migrate(tmp_path: Path, capsys):
    src, dest = tmp_path / "bad.sqlite", tmp_path / "store"
    _bad_source(src)
    report = migrate(src, dest)
    assert report.bad_rows == EXPECTED_BAD
    assert (report.rows, report.migrated, report.created, report.verified) == (11, 2, 2, 2)
    assert report.mismatches == [] and report.extras == []
    assert report.ok  # bad rows are reported, they do not fail the migration
    assert report.dangling_edges == [("good_2", "nowhere")]
    assert report.layers == {"knowledge": 1, "self": 1}
    with MdCG(dest, read_only=True, create=False) as store:
        assert store.ids() == ["good_1", "good_2"]
        one = store.get("good_1")
        assert (one.body, one.tags, one.importance, one.created_at) == (
            "body",
            ["domain:数学", "algebra"],
            0.5,
            1.5,
        )
        assert one.edges == [Edge("good_2", "part_of", 0.7, 1)]
        two = store.get("good_2")
        assert (two.body, two.extra) == ("", {"mood": "calm"})
        assert two.edges == [Edge("nowhere", "similar", None, 0)]
    text = report.render()
    assert "  node rows 11: 2 good, 9 bad; edge rows: 1 bad (left out)\n" in text
    assert "nodes rowid 4 (id 'good_1'): duplicate id, first seen at nodes rowid 1" in text
    assert "edges rowid 3 (source 'ghost'): source 'ghost' (target 'good_1')" in text
    # The command line: bad rows alone exit 0, --strict makes them exit 1.
    assert main([str(src), str(dest), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "bad node rows (9):" in out and "bad edge rows (1):" in out and "unchanged 2" in out
    assert main([str(src), str(dest), "--no-progress", "--strict", "--json"]) == 1
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert [(r["table"], r["rowid"]) for r in data["bad_rows"]] == [
        ("nodes", 2),
        ("nodes", 3),
        ("nodes", 4),
        ("nodes", 5),
        ("nodes", 6),
        ("nodes", 7),
        ("nodes", 9),
        ("nodes", 10),
        ("nodes", 11),
        ("edges", 3),
    ]
    assert data["bad_rows"][6]["node_id"] == "b'\\x00id'"
    assert "--strict: 9 bad node row(s) and 1 bad edge row(s) in the source" in captured.err


# -- verification --------------------------------------------------------------------------


def test_diff_nodes_names_each_differing_field_with_strict_types():
    a = Node(
        id="x",
        importance=1.0,
        tags=["t"],
        extra={"k": 1, "same": "s"},
        edges=[Edge("y", "similar", 0.5, 1), Edge("z", "causal")],
    )
    assert diff_nodes(a, a.copy()) == ([], "")
    b = a.copy()
    b.importance = 1  # an int is not the float 1.0
    b.extra = {"k": True, "same": "s", "new": 0}  # True is not 1
    b.edges[0].verified = True
    b.edges[1].target = "w"
    names, detail = diff_nodes(a, b)
    assert names == ["importance", "edges[0].verified", "edges[1].target", "extra.k", "extra.new"]
    assert detail == "importance: source 1.0, file 1"
    c = a.copy()
    c.edges.append(Edge("v", "part_of"))
    c.body = "changed"
    assert diff_nodes(a, c) == (["body", "edges.count"], "body: source '', file 'changed'")


def _replace_once(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new), encoding="utf-8")


def test_verification_catches_hand_edited_files(tmp_path: Path, capsys):
    src, dest = bundled_sample_path(), tmp_path / "store"
    assert migrate(src, dest).ok
    assert verify_migration(src, dest).mismatches == []
    with MdCG(dest, read_only=True, create=False) as store:
        tagged = store.path_of("kp_90d68a59")
        edged = store.path_of("kp_1b0d53f7")
        second_edge = store.path_of("kp_c263a2b3")
    _replace_once(tagged, 'tags: ["note", "overview", "en"]', 'tags: ["note", "overview", "fr"]')
    _replace_once(edged, '"type": "part_of"', '"type": "causal"')
    _replace_once(second_edge, '"confidence": 0.75', '"confidence": 0.7')
    report = verify_migration(src, dest)
    assert not report.ok
    assert {m.node_id: m.fields for m in report.mismatches} == {
        "kp_1b0d53f7": ("edges[0].type",),
        "kp_90d68a59": ("tags",),
        "kp_c263a2b3": ("edges[1].confidence",),
    }
    assert [m.node_id for m in report.mismatches] == ["kp_90d68a59", "kp_1b0d53f7", "kp_c263a2b3"]
    assert report.mismatches[0].detail == (
        "tags: source ['note', 'overview', 'en'], file ['note', 'overview', 'fr']"
    )
    assert (report.verified, report.migrated, report.extras) == (SLICE_ROWS, SLICE_ROWS, [])
    # health() sees the three edits; the slice's own two dangling edges are kept.
    assert report.dest_findings == {"changed_file": 3, "dangling_edge": 2}
    assert report.dangling_edges == [
        ("kp_e45a0a29", "kp_gone_ca2cf1"),
        ("kp_44e1c882", "kp_gone_bb2123"),
    ]
    assert main([str(src), str(dest), "--verify-only", "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert "verification" in out and "FAILED" in out
    assert "kp_90d68a59: tags  tags: source" in out
    # Migrating again repairs exactly those three files.
    again = migrate(src, dest)
    assert again.ok and (again.updated, again.unchanged) == (3, SLICE_ROWS - 3)
    assert sorted(again.changed_ids) == ["kp_1b0d53f7", "kp_90d68a59", "kp_c263a2b3"]


def test_verification_reports_missing_unreadable_and_extra_nodes(tmp_path: Path):
    src, dest = bundled_sample_path(), tmp_path / "store"
    assert migrate(src, dest).ok
    with MdCG(dest) as store:
        gone = store.path_of("kp_52a33e03")
        broken = store.path_of("kp_5396eaba")
        store.add(id="extra_1", layer="self", body="not from the source")
    gone.unlink()
    broken.write_text("---\nid: [\n---\n", encoding="utf-8")
    report = verify_migration(src, dest)
    assert {m.node_id: m.fields for m in report.mismatches} == {"kp_52a33e03": ("<missing>",)}
    missing = next(m for m in report.mismatches if m.node_id == "kp_52a33e03")
    assert missing.detail == f"no node file for this id (expected {rel_path_of(src, 'kp_52a33e03')})"
    # the file broken by hand is kept, as a run lists it (it is not written over)
    broken_rel = rel_path_of(src, "kp_5396eaba")
    assert report.kept == [
        (
            "kp_5396eaba",
            f"its file {broken_rel} is unusable: the YAML frontmatter does not parse: did not find "
            "expected node content (column 1), while parsing a flow node; fix it, then run again "
            "(it is not written over)",
        )
    ]
    assert report.extras == ["extra_1"]
    assert report.verified == SLICE_ROWS - 2
    assert main([str(src), str(dest), "--verify-only", "--no-progress", "--json"]) == 1


def test_verify_only_agrees_with_the_run_on_a_file_broken_by_hand(tmp_path: Path, capsys):
    """A run lists a memory whose file was broken by hand as kept and is ok; a
    verification on its own after it says the same (it was a mismatch, exit 1)."""
    src, dest = bundled_sample_path(), tmp_path / "store"
    assert migrate(src, dest).ok
    with MdCG(dest) as store:
        broken = store.path_of("kp_5396eaba")
    broken.write_text("---\nid: kp_5396eaba\ntags: [\n---\nbroken\n", encoding="utf-8")
    run = migrate(src, dest)
    assert run.ok and [i for i, _ in run.kept] == ["kp_5396eaba"]
    report = verify_migration(src, dest)
    assert (report.ok, report.mismatches, report.kept) == (True, [], run.kept)
    assert report.verified == SLICE_ROWS - 1
    capsys.readouterr()
    assert main([str(src), str(dest), "--verify-only", "--no-progress", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    kept = [{"id": i, "why": w} for i, w in run.kept]
    assert (out["ok"], out["mismatches"], out["kept"]) == (True, [], kept)


def rel_path_of(src: Path, node_id: str) -> str:
    return next(rel_path(n) for n in _source_nodes(src) if n.id == node_id)


# -- dry run, idempotence, moves ----------------------------------------------------------


def test_dry_run_writes_nothing_and_predicts_the_migration(tmp_path: Path):
    src, dest = _copy_slice(tmp_path), tmp_path / "new" / "store"
    nodes = _source_nodes(src)
    with no_writes() as attempts:
        dry = migrate(src, dest, dry_run=True)
    assert attempts == []
    assert not dest.exists() and not dest.parent.exists()
    assert (dry.mode, dry.created, dry.updated, dry.unchanged, dry.verified) == (
        "dry-run",
        SLICE_ROWS,
        0,
        0,
        0,
    )
    expected_buckets = Counter(bucket_of(n) for n in nodes if n.layer == "knowledge")
    assert dry.buckets == dict(expected_buckets)
    assert sum(dry.buckets.values()) == 200
    assert dry.layers == dict(Counter(n.layer for n in nodes))
    real = migrate(src, dest)
    assert (real.created, real.buckets, real.layers) == (SLICE_ROWS, dry.buckets, dry.layers)
    # the time line says what each run did (session 38: a dry run said "... s writing")
    timing = [[line for line in r.render().splitlines() if " s verifying), " in line] for r in (dry, real)]
    assert [len(t) for t in timing] == [1, 1]
    assert " s checking, " in timing[0][0] and " s writing" not in timing[0][0]
    assert " s writing, " in timing[1][0]

    # Change one row's body and move another to a different layer.
    moved = next(n for n in nodes if n.layer == "knowledge" and n.updated_at is None)
    changed = next(n for n in nodes if n.layer == "knowledge" and n.id != moved.id)
    _execute(src, "UPDATE nodes SET content = content || ' (edited)' WHERE id = ?", changed.id)
    _execute(src, "UPDATE nodes SET layer = 'contextual' WHERE id = ?", moved.id)
    before = tree_listing(dest)
    with no_writes() as attempts:
        dry = migrate(src, dest, dry_run=True)
    assert attempts == []
    assert tree_listing(dest) == before
    assert (dry.created, dry.updated, dry.moved, dry.unchanged) == (0, 2, 1, SLICE_ROWS - 2)
    assert sorted(dry.changed_ids) == sorted([changed.id, moved.id])
    assert "would create 0, change 2 (1 moving), leave unchanged 224; nothing written" in dry.render()

    real = migrate(src, dest)
    assert real.ok and (real.updated, real.moved, real.unchanged) == (2, 1, SLICE_ROWS - 2)
    with MdCG(dest, read_only=True, create=False) as store:
        assert store.path_of(moved.id) == dest / "contextual" / f"{moved.id}.md"
        # The engine stamps updated_at on a move; the migration restores the source's value.
        assert store.get(moved.id).updated_at is None
        assert store.get(changed.id).body.endswith(" (edited)")
    assert not (dest / rel_path(moved)).exists()


def test_second_run_leaves_every_node_file_byte_identical(tmp_path: Path):
    src, dest = bundled_sample_path(), tmp_path / "store"
    first = migrate(src, dest, batch=64)
    assert (first.created, first.ok) == (SLICE_ROWS, True)
    files = _file_bytes(dest)
    assert len([p for p in files if p.endswith(".md")]) == SLICE_ROWS
    time.sleep(0.01)  # a rewrite would get a later mtime
    second = migrate(src, dest, batch=64)
    assert (second.created, second.updated, second.unchanged) == (0, 0, SLICE_ROWS)
    assert second.ok and second.verified == SLICE_ROWS
    assert _file_bytes(dest) == files


def test_progress_counts_rows_written_then_verified(tmp_path: Path):
    calls: list[tuple[int, int]] = []
    migrate(bundled_sample_path(), tmp_path / "s", batch=100, progress=lambda d, t: calls.append((d, t)))
    # Writing: after each batch of 100 rows and at the end; then verifying, the same.
    assert calls == [(100, 452), (200, 452), (226, 452), (326, 452), (426, 452), (452, 452)]
    calls.clear()
    migrate(
        bundled_sample_path(),
        tmp_path / "d",
        batch=100,
        dry_run=True,
        progress=lambda d, t: calls.append((d, t)),
    )
    assert calls == [(100, 226), (200, 226), (226, 226)]


# -- resume -------------------------------------------------------------------------------


class _Stop(Exception):
    pass


def _interrupt_after(first: int):
    def progress(done: int, total: int) -> None:
        if done >= first:
            raise _Stop

    return progress


def test_resume_after_an_interruption_skips_committed_batches(tmp_path: Path):
    src, dest = _copy_slice(tmp_path), tmp_path / "store"
    with pytest.raises(_Stop):
        migrate(src, dest, batch=50, progress=_interrupt_after(100))
    journal = read_journal(src, dest)
    assert journal is not None
    assert (journal["rowid"], journal["rows_done"], journal["complete"]) == (100, 100, False)
    assert journal["identity"] == source_identity(src)
    with MdCG(dest, read_only=True, create=False) as store:
        assert len(store) == 100

    report = migrate(src, dest, batch=50)
    assert report.ok
    assert (report.resumed_from, report.skipped, report.created) == (100, 100, SLICE_ROWS - 100)
    assert report.verified == SLICE_ROWS and report.restarted is None
    journal = read_journal(src, dest)
    assert journal is not None and journal["complete"] is True and journal["rowid"] == SLICE_ROWS
    assert journal["ok"] is True
    # A finished journal is not resumed: the next run reads everything again.
    again = migrate(src, dest, batch=50)
    assert (again.resumed_from, again.skipped, again.unchanged) == (None, 0, SLICE_ROWS)


def test_a_changed_source_or_no_resume_starts_from_the_first_row(tmp_path: Path):
    src, dest = _copy_slice(tmp_path), tmp_path / "store"
    with pytest.raises(_Stop):
        migrate(src, dest, batch=50, progress=_interrupt_after(50))
    _execute(src, "UPDATE nodes SET content = 'edited' WHERE rowid = 200")
    report = migrate(src, dest, batch=50)
    assert report.resumed_from is None
    assert report.restarted == ("the source changed since the interrupted run (size, mtime or sha256 differ)")
    assert (report.skipped, report.unchanged, report.created) == (0, 50, SLICE_ROWS - 50)
    assert report.ok

    dest2 = tmp_path / "store2"
    with pytest.raises(_Stop):
        migrate(src, dest2, batch=50, progress=_interrupt_after(50))
    report = migrate(src, dest2, batch=50, resume=False)
    assert report.resumed_from is None
    assert report.restarted == "an interrupted run was found, but resume was turned off"
    assert (report.unchanged, report.created) == (50, SLICE_ROWS - 50)


def test_a_second_migration_of_the_same_source_into_the_store_is_refused(tmp_path: Path):
    src, dest = bundled_sample_path(), tmp_path / "store"
    dest.mkdir()
    lock = FileLock(str(dest), f".mdcg/migrate/{journal_path(src, dest).with_suffix('.lock').name}")
    with lock.hold(), pytest.raises(MigrationError, match=r"another migration of .* is running"):
        migrate(src, dest)
    assert migrate(src, dest).ok


def test_destination_must_be_a_store_or_a_new_folder(tmp_path: Path):
    src = bundled_sample_path()
    busy = tmp_path / "project"
    busy.mkdir()
    (busy / "README.md").write_text("mine")
    with pytest.raises(MigrationError, match="not empty and is not an md-cg store"):
        migrate(src, busy)
    with pytest.raises(MigrationError, match="not empty and is not an md-cg store"):
        migrate(src, busy, dry_run=True)
    assert sorted(os.listdir(busy)) == ["README.md"]
    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(MigrationError, match="exists and is not a folder"):
        migrate(src, afile)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert migrate(src, empty).created == SLICE_ROWS
    with pytest.raises(ValueError, match="batch must be a positive integer"):
        migrate(src, tmp_path / "x", batch=0)


def test_report_to_dict_is_json_ready(tmp_path: Path):
    src, dest = tmp_path / "bad.sqlite", tmp_path / "store"
    _bad_source(src)
    data = json.loads(json.dumps(migrate(src, dest).to_dict(), ensure_ascii=False))
    assert data["ok"] is True and data["mode"] == "migrate"
    assert (data["rows"], data["migrated"], data["created"], data["verified"]) == (11, 2, 2, 2)
    assert data["bad_rows"][0] == {
        "rowid": 2,
        "node_id": "bad_json",
        "reason": "invalid JSON in column 'tags' (Expecting value at char 5)",
        "table": "nodes",
    }
    assert data["dangling_edges"] == [["good_2", "nowhere"]]
    assert data["source_sha256"] == _sha256(src)
    assert data["dest_findings"] == {"dangling_edge": 1}
    assert data["nodes_per_s"] > 0


# -- the command line ----------------------------------------------------------------------


def _run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "migrate", *args],
        cwd=cwd,
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_exit_codes_and_one_line_errors(tmp_path: Path):
    missing = _run_cli("missing.sqlite", "out", cwd=tmp_path)
    assert missing.returncode == 2
    assert missing.stderr == "error: missing.sqlite: no such sqlite database file\n"
    (tmp_path / "notes.sqlite").write_text("just text, not a database\n")
    junk = _run_cli("notes.sqlite", "out", cwd=tmp_path)
    assert junk.returncode == 2
    assert junk.stderr == ("error: notes.sqlite: not a readable sqlite database (file is not a database)\n")
    assert not (tmp_path / "out").exists()
    ok = _run_cli(str(bundled_sample_path()), "out", "--json", "--no-progress", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert ok.stderr == ""
    data = json.loads(ok.stdout)
    assert (data["ok"], data["created"], data["verified"]) == (True, SLICE_ROWS, SLICE_ROWS)
    (tmp_path / "afile").write_text("x")
    onfile = _run_cli(str(bundled_sample_path()), "afile", cwd=tmp_path)
    assert onfile.returncode == 2
    assert onfile.stderr == "error: afile: the destination exists and is not a folder\n"
    usage = _run_cli(str(bundled_sample_path()), "out", "--batch", "0", cwd=tmp_path)
    assert usage.returncode == 2 and "--batch: must be at least 1, got 0" in usage.stderr
    for result in (missing, junk, onfile, usage):
        assert "Traceback" not in result.stderr


def _good_row_and(src: Path, sql: str, *params: object) -> Path:
    """A source with the good row ``a`` (self, 'fine'), then the row ``sql`` inserts."""
    conn = sqlite3.connect(src)
    conn.executescript(SCHEMA_SQL)
    with conn:
        conn.execute("INSERT INTO nodes (id, layer, content) VALUES ('a', 'self', 'fine')")
        conn.execute(sql, params)
    conn.close()
    return src


def test_text_that_is_not_utf8_is_a_bad_row(tmp_path: Path, capsys):
    src = _good_row_and(
        tmp_path / "utf.sqlite",
        "INSERT INTO nodes (id, layer, content) VALUES ('b', 'self', CAST(X'FF61' AS TEXT))",
    )
    assert main([str(src), str(tmp_path / "store"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "nodes rowid 2 (id 'b'): column 'content' is not valid UTF-8 at byte 0" in out
    assert (tmp_path / "store" / "self" / "a.md").exists()
    assert main([str(src), str(tmp_path / "strict"), "--no-progress", "--strict"]) == 1


# -- temporal data as it is really stored, and hostile cells -----------------------------------


def _seed_shaped_source(path: Path) -> dict[str, tuple[object, object]]:
    """606 rows shaped like the seed's database: 369 with plain TEXT in ``temporal`` or
    ``entity_id`` (``durable``, ``ent_1``), the rest JSON-encoded or NULL, then 3 hostile
    rows. Returns the expected (temporal, entity_id) of each good id."""
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA_SQL)
    kinds = ["durable", "one_off", "recurring", "unknown", ""]
    expected: dict[str, tuple[object, object]] = {}
    with conn:
        for i in range(606):
            kind, entity = kinds[i % 5], f"ent_{i % 7}"
            if i < 369:  # plain text in one or both columns
                cells = (kind, entity if i % 2 else None) if i % 3 else (json.dumps(kind), entity)
                want = (kind, entity if (i % 3 == 0 or i % 2) else None)
            else:  # JSON-encoded, as the reference schema writes them, or NULL
                cells = (json.dumps(kind), json.dumps(entity)) if i % 4 else (None, None)
                want = (kind, entity) if i % 4 else (None, None)
            conn.execute(
                "INSERT INTO nodes (id, layer, content, temporal, entity_id, created_at, tags) "
                "VALUES (?, 'contextual', ?, ?, ?, ?, ?)",
                (f"m{i:03d}", f"memory {i}", *cells, 1788612000.0 + i / 7, '["seed"]'),
            )
            expected[f"m{i:03d}"] = want
        hostile = [
            ("deep_tags", "tags", "[" * 100_000 + "]" * 100_000),
            ("deep_extra", "extra", '{"x": ' * 70 + "1" + "}" * 70),
            ("huge_state", "state_attributes", '{"x": "' + "y" * 300_000 + '"}'),
        ]
        for node_id, column, cell in hostile:
            conn.execute(
                f"INSERT INTO nodes (id, layer, content, {column}) VALUES (?, 'self', 'x', ?)",
                (node_id, cell),
            )
    conn.close()
    return expected


def test_seed_shaped_plain_text_migrates_every_row_and_hostile_cells_are_bad_rows(tmp_path: Path):
    src, dest = tmp_path / "seed.sqlite", tmp_path / "store"
    expected = _seed_shaped_source(src)
    report = migrate(src, dest)
    assert report.ok, report.render()
    assert (report.rows, report.migrated, report.verified) == (609, 606, 606)
    assert report.bad_rows == [
        BadRow(607, "deep_tags", "column 'tags' nests deeper than 64 levels of lists and objects"),
        BadRow(608, "deep_extra", "column 'extra' nests deeper than 64 levels of lists and objects"),
        BadRow(
            609,
            "huge_state",
            "column 'state_attributes' holds 300,009 characters, more than a node's frontmatter "
            "can hold (256 KiB)",
        ),
    ]
    with MdCG(dest, read_only=True) as store:
        got = {i: (store.get(i).temporal, store.get(i).entity_id) for i in expected}
        assert got == expected
        assert store.get("m001").created_at == 1788612000.142857  # the instant, to the microsecond
    text = (dest / "contextual" / "m001.md").read_text(encoding="utf-8")
    assert 'temporal: "one_off"\n' in text and 'entity_id: "ent_1"\n' in text
    assert 'created_at: "2026-09-05T12:40:00.142857Z"\n' in text
    again = verify_migration(src, dest)
    assert again.ok and again.mismatches == [] and again.verified == 606
    second = migrate(src, dest)
    assert second.ok and second.unchanged == 606


def test_cli_migrate_survives_a_deeply_nested_cell(tmp_path: Path, capsys):
    src = _good_row_and(
        tmp_path / "deep.sqlite",
        "INSERT INTO nodes (id, layer, content, tags) VALUES ('deep', 'self', 'x', ?)",
        "[" * 100_000 + "]" * 100_000,
    )
    assert main([str(src), str(tmp_path / "store"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "nodes rowid 2 (id 'deep'): column 'tags' nests deeper than 64 levels" in out
    assert (tmp_path / "store" / "self" / "a.md").exists()


# -- the full sample (slow) ----------------------------------------------------------------


@pytest.fixture(scope="module")
def full_sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("migrate") / "full.sqlite"
    generate(path)
    return path


@pytest.mark.slow
def test_full_sample_migrates_with_zero_mismatches_and_every_edge(tmp_path: Path, full_sample: Path):
    src, dest = full_sample, tmp_path / "store"
    digest, mtime = _sha256(src), src.stat().st_mtime_ns
    nodes = _source_nodes(src)
    assert len(nodes) == 3228
    report = migrate(src, dest)
    assert report.ok and report.mismatches == [] and report.bad_rows == []
    assert (report.rows, report.migrated, report.created, report.verified) == (3228,) * 4
    assert report.layers == {
        "knowledge": 3048,
        "unresolved": 30,
        "rejected": 26,
        "self": 28,
        "contextual": 42,
        "structural": 30,
        "anchor": 24,
    }
    assert (len(report.buckets), max(report.buckets.values())) == (91, 163)
    assert (_sha256(src), src.stat().st_mtime_ns) == (digest, mtime)

    with MdCG(dest, read_only=True, create=False) as store:
        assert store.ids() == sorted(n.id for n in nodes)
        assert store.ids("knowledge") == sorted(n.id for n in nodes if n.layer == "knowledge")
        health = store.health()
    # Every edge of the source, read straight from the node files (not through the index).
    conn = open_readonly(src)
    source_edges = conn.execute("SELECT source, target, type, confidence, verified FROM edges").fetchall()
    source_dangling = dangling_edges(conn)
    conn.close()
    file_edges = []
    with MdCG(dest, read_only=True) as store:
        for node in nodes:
            on_disk = read_node(dest / rel_path(node))
            assert on_disk == expected_after_retention(store, node, on_disk)
            file_edges += [(node.id, e.target, e.type, e.confidence, e.verified) for e in on_disk.edges]
    decided = [n for n in nodes if n.temporal in ("one_off", "durable", "recurring")]
    assert decided and all(read_node(dest / rel_path(n)).retention_tier for n in decided)
    assert len(file_edges) == 2447
    assert sorted(file_edges, key=repr) == sorted(source_edges, key=repr)
    assert len(source_dangling) == 9
    assert sorted((f.node_id, f.detail.split("'")[1]) for f in health.findings) == sorted(source_dangling)
    assert {f.kind for f in health.findings} == {"dangling_edge"}

    files = _file_bytes(dest)
    second = migrate(src, dest)
    assert second.ok and (second.created, second.updated, second.unchanged) == (0, 0, 3228)
    assert _file_bytes(dest) == files
    assert (_sha256(src), src.stat().st_mtime_ns) == (digest, mtime)


def _migrate_and_kill(src: Path, dest: Path, *, past_rowid: int, delay: float) -> dict:
    """Run ``python -m migrate`` and SIGKILL it ``delay`` s after the journal passes a rowid."""

    def past() -> bool:
        state = read_journal(src, dest)
        return state is not None and (state["rowid"] or 0) > past_rowid

    args = ["-m", "migrate", str(src), str(dest), "--batch", "25", "--no-progress"]
    run_and_kill(args, past, delay=delay, what="migration")
    killed_at = read_journal(src, dest)
    assert killed_at is not None and killed_at["complete"] is False
    assert past_rowid < killed_at["rowid"] < 3228
    return killed_at


@pytest.mark.slow
def test_kill_during_migration_then_resume(tmp_path: Path, full_sample: Path):
    src, dest = full_sample, tmp_path / "store"
    digest = _sha256(src)
    first = _migrate_and_kill(src, dest, past_rowid=400, delay=0.0)
    # Killed again while resuming: the checkpoint moves on.
    second = _migrate_and_kill(src, dest, past_rowid=first["rowid"] + 300, delay=0.012)
    assert second["started_at"] == first["started_at"]
    with MdCG(dest, read_only=True, create=False) as store:
        findings = store.health().findings
        present = len(store)
    # Before the final resume: nothing but leftovers of the interrupted commit (temp files;
    # an open commit when the kill came after it was logged) and edges to nodes not
    # migrated yet; every node up to the checkpoint is there.
    assert {f.kind for f in findings} <= {"temp_file", "open_commit", "dangling_edge"}
    # The migration's own checkpoint temp (.mdcg/migrate/) is left out on both sides: a kill
    # can land while it exists, and the resume's report lists only the store's temp files.
    temps = sorted(
        f.path for f in findings if f.kind == "temp_file" and not f.path.startswith(".mdcg/migrate")
    )
    assert present >= second["rowid"]

    result = subprocess.run(
        [sys.executable, "-m", "migrate", str(src), str(dest), "--batch", "25", "--json", "--no-progress"],
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["resumed_from"] == second["rowid"]
    # rowids 1..3228, every row good: the rows up to the checkpoint, and those of the batch
    # the kill cut short that the killed run had put in place (session 39: they were
    # counted unchanged, as if the store had held them before)
    assert second["rowid"] <= report["skipped"] <= second["rowid"] + 25
    assert report["mismatches"] == [] and report["ok"] is True
    assert (report["migrated"], report["verified"]) == (3228, 3228)
    assert report["unchanged"] == 0  # a fresh store: nothing was there before the migration
    assert report["created"] + report["updated"] + report["skipped"] == 3228
    # The resume ran sync() first: a batch the killed writer had logged was finished (its
    # temp files renamed into place), the other temp files removed; none is left, and the
    # only findings left are the source's own 9 dangling edges.
    removed = sorted(p for p in report["temp_removed"] if not p.startswith(".mdcg/migrate"))
    assert report["recovered"] in (0, 1)
    assert set(removed) <= set(temps) and (report["recovered"] or removed == temps)
    assert not [p for p in dest.rglob(".*.tmp")]
    assert report["dest_findings"] == {"dangling_edge": 9}
    with MdCG(dest, read_only=True, create=False) as store:
        assert store.ids() == sorted(n.id for n in _source_nodes(src))
        assert Counter(f.kind for f in store.health().findings) == {"dangling_edge": 9}
    finished = read_journal(src, dest)
    assert finished is not None and finished["complete"] is True
    assert verify_migration(src, dest).mismatches == []
    assert _sha256(src) == digest


def test_migration_decides_retention_like_every_write_path(tmp_path: Path) -> None:
    from md_cg.sqlite_source import SCHEMA_SQL

    src, dest = tmp_path / "src.sqlite", tmp_path / "store"
    conn = sqlite3.connect(src)
    conn.executescript(SCHEMA_SQL)
    rows = [
        ("alarm", "Set an alarm for 7 tomorrow morning", '"one_off"', None),
        ("home", "The user lives in Lisbon", '"durable"', None),
        ("plain", "binary search halves the range", None, None),
        ("kept", "Set an alarm for 7 tomorrow morning", '"one_off"', '{"retention_tier": "long"}'),
    ]
    with conn:
        for node_id, body, kind, extra in rows:
            conn.execute(
                "INSERT INTO nodes (id, layer, content, temporal, extra) VALUES (?, 'contextual', ?, ?, ?)",
                (node_id, body, kind, extra),
            )
    conn.close()
    before = time.time()
    report = migrate(src, dest)
    assert report.ok and report.mismatches == [], report.render()
    with MdCG(dest, read_only=True) as store:
        got = {i: store.get(i) for i in ("alarm", "home", "plain", "kept")}
        rules = [(r["id"], r["rule"]) for r in store.log("retention").read()]
    assert got["alarm"].retention_tier == "temp"
    assert before + 7 * 86400 <= got["alarm"].expires_at <= time.time() + 7 * 86400
    assert (got["home"].retention_tier, got["home"].expires_at) == ("long", None)
    assert (got["plain"].retention_tier, got["plain"].retention_reason) == (None, None)  # absent = long
    assert (got["kept"].retention_tier, got["kept"].expires_at) == ("long", None)  # the row's tier wins
    assert sorted(rules) == sorted(
        [
            ("alarm", "temporal_one_off"),
            ("home", "temporal_durable"),
            ("plain", "default_long"),
            ("kept", "explicit_tier"),
        ]
    )
    files = {p: p.read_bytes() for p in dest.rglob("*.md")}
    again = migrate(src, dest)  # a re-run keeps the first run's expiry: nothing changes
    assert again.ok and (again.created, again.updated, again.unchanged) == (0, 0, 4)
    assert {p: p.read_bytes() for p in dest.rglob("*.md")} == files
    assert verify_migration(src, dest).mismatches == []
