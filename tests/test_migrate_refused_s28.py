"""Session 28 review: a refused store folder costs only its rows (migrate, import); a stale
journal whose files are gone; messages of BLOB cells, doubled census prefixes, invalid
UTF-8 in JSON lines, a duplicate of a rejected row."""

from __future__ import annotations

import io
import json
import os
import sqlite3
from pathlib import Path

import pytest

from md_cg import MdCG, import_nodes
from md_cg.census import records_from_sqlite
from md_cg.layout import rel_path
from md_cg.migrate import journal_path, migrate
from md_cg.node import Node
from md_cg.sqlite_source import SCHEMA_SQL, iter_storable_rows, open_readonly
from md_cg.transfer import read_records

SYMLINK_WHY = "is a symlink (md-cg never follows symlinks below the store root)"


def _source(path: Path, n: int = 6) -> Path:
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA_SQL)
    with conn:
        for i in range(n):
            domain = "ops" if i % 2 else "dev"
            conn.execute(
                "INSERT INTO nodes (id, layer, content, tags, created_at) VALUES (?, ?, ?, ?, ?)",
                (f"n{i}", "knowledge", f"text {i}", json.dumps([f"domain:{domain}"]), 1.7e9),
            )
    conn.close()
    return path


def _ops_folder() -> str:
    return rel_path(Node(id="n1", layer="knowledge", body="x", tags=["domain:ops"])).rpartition("/")[0]


def _symlinked_store(tmp_path: Path) -> tuple[Path, Path]:
    """A store whose ops bucket folder is a symlink to an outside folder (returned)."""
    store, outside = tmp_path / "st", tmp_path / "outside"
    MdCG(store).close()
    outside.mkdir()
    (store / "knowledge").mkdir(exist_ok=True)
    os.symlink(outside, store / _ops_folder())
    return store, outside


def test_a_symlinked_bucket_folder_refuses_its_rows_and_the_rest_migrates(tmp_path: Path) -> None:
    src = _source(tmp_path / "s.sqlite")
    store, outside = _symlinked_store(tmp_path)
    folder = _ops_folder()
    refused = [(i, folder, SYMLINK_WHY) for i in ("n1", "n3", "n5")]

    dry = migrate(src, store, dry_run=True, batch=2)
    assert dry.refused == refused and dry.created == 3 and not dry.ok
    assert "would refuse 3 good row(s)" in dry.render()

    report = migrate(src, store, batch=2)
    assert report.refused == refused
    assert (report.created, report.mismatches, report.verified) == (3, [], 3)
    assert not report.ok  # the refused rows are not migrated
    assert report.to_dict()["refused"][0] == {"id": "n1", "folder": folder, "why": SYMLINK_WHY}
    assert f"  n1: {folder}: {SYMLINK_WHY}" in report.render()
    assert os.listdir(outside) == []  # nothing written through the symlink
    with MdCG(store, read_only=True) as s:
        assert s.ids() == ["n0", "n2", "n4"]

    # the symlink gone, a run migrates the refused rows
    os.unlink(store / folder)
    again = migrate(src, store, batch=2)
    assert again.ok and again.refused == [] and (again.created, again.unchanged) == (3, 3)


@pytest.mark.parametrize("kind", ["symlink", "file"])
def test_import_keeps_the_records_of_a_symlinked_folder_and_writes_the_rest(
    tmp_path: Path, kind: str
) -> None:
    """... or of a file where the folder belongs (its dry run said "new" for them: rev4)."""
    store, outside = _symlinked_store(tmp_path)
    if kind == "file":
        os.unlink(store / _ops_folder())
        (store / _ops_folder()).write_text("not a folder\n")
    lines = [
        json.dumps({"id": f"n{i}", "body": f"text {i}", "tags": ["domain:" + ("ops" if i % 2 else "dev")]})
        for i in range(6)
    ]
    data = ("\n".join(lines) + "\n").encode()
    reason = SYMLINK_WHY if kind == "symlink" else "is a file where md-cg keeps a folder; remove it"
    why = f"{_ops_folder()} {reason}: nothing is written through it -- fix it, then import again"
    expected = [(f"line {i + 1}", f"n{i}", why) for i in (1, 3, 5)]
    with MdCG(store) as s:
        dry = import_nodes(s, io.BytesIO(data), dry_run=True, batch=2)
        assert [tuple(k) for k in dry.kept] == expected and dry.created == 3
        report = import_nodes(s, io.BytesIO(data), batch=2)
        assert [tuple(k) for k in report.kept] == expected
        assert report.created == 3 and report.ids == ["n0", "n2", "n4"]
        assert "3 kept (the store's file or folder cannot be used)" in report.summary()
        assert s.ids() == ["n0", "n2", "n4"]
    assert os.listdir(outside) == []


def test_a_stale_journal_whose_files_are_gone_writes_them_again(tmp_path: Path) -> None:
    src = _source(tmp_path / "s.sqlite", n=4)
    store = tmp_path / "st"
    assert migrate(src, store).ok
    path = journal_path(src, store)
    record = json.loads(path.read_bytes())
    path.write_text(json.dumps({**record, "complete": False}))
    for md in (store / "knowledge").rglob("*.md"):
        md.unlink()
    report = migrate(src, store)
    assert report.ok and report.mismatches == []
    assert (report.resumed_from, report.skipped, report.rewritten, report.created) == (4, 0, 4, 4)
    assert "wrote again 4 row(s) the interrupted run had written whose file is gone" in report.render()
    with MdCG(store, read_only=True) as s:
        assert s.ids() == ["n0", "n1", "n2", "n3"]


def _rows(path: Path, rows: list[tuple[object, ...]]) -> Path:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE nodes (id, layer, content, tags)")
        conn.executemany("INSERT INTO nodes VALUES (?, ?, ?, ?)", rows)
        conn.execute("CREATE TABLE edges (source, target, type)")
        conn.execute("INSERT INTO edges VALUES ('ok', 'x', 'bogus')")
    conn.close()
    return path


def test_blob_cells_and_ids_are_named_in_words(tmp_path: Path) -> None:
    src = _rows(
        tmp_path / "b.sqlite",
        [
            ("pic", "knowledge", b"\x89PNG", None),
            (b"blobid", "knowledge", "text", None),
            ("ok", "knowledge", "fine", None),
        ],
    )
    report = migrate(src, tmp_path / "st")
    assert [(r.rowid, r.reason) for r in report.bad_rows] == [
        (1, "column 'content' holds a BLOB, which a node cannot carry"),
        (2, "column 'id' holds a BLOB, expected text"),
        (
            1,
            "the edge 'ok' -> 'x' is left out: field 'edges' has an edge type outside part_of, causal, "
            "sequential, spatial, hierarchical, similar, supersedes (got 'bogus')",
        ),
    ]
    text = report.render()
    assert "nodes rowid 2 (id: a BLOB of 6 bytes): column 'id' holds a BLOB, expected text" in text
    assert "b'blobid'" not in text


def test_census_names_each_bad_row_once(tmp_path: Path) -> None:
    src = _rows(tmp_path / "c.sqlite", [("a", "knowledge", "x", "[bad"), ("ok", "knowledge", "fine", None)])
    seen: list[tuple[str, str]] = []
    nodes = list(records_from_sqlite(src, lambda where, why: seen.append((where, why))))
    assert [n.id for n in nodes] == ["ok"]  # its edge is left out, the node counted
    assert seen == [
        (f"{src}: nodes rowid 1 (id 'a')", "invalid JSON in column 'tags' (Expecting value at char 1)"),
        (
            f"{src}: edges rowid 1",
            "the edge 'ok' -> 'x' is left out: field 'edges' has an edge type outside part_of, causal, "
            "sequential, spatial, hierarchical, similar, supersedes (got 'bogus')",
        ),
    ]


def test_json_lines_that_are_not_utf8_say_so() -> None:
    data = b'{"id": "a", "body": "ok"}\n{"id": "b", "body": "caf\xe9"}\n'
    records = list(read_records(data))
    assert records[0] == ("line 1", {"id": "a", "body": "ok"})
    where, error = records[1]
    assert (where, str(error)) == (
        "line 2",
        "not valid UTF-8 at byte 24 of the line (b'\\xe9'); save the file as UTF-8",
    )
    where, error = next(iter(read_records(b'[{"a": 1},\n {"b": "\xff"}]')))
    assert (where, str(error)) == (
        "line 2",
        "not valid UTF-8 at byte 8 of the line (b'\\xff'); save the file as UTF-8",
    )


def test_a_duplicate_of_a_row_rejected_for_storage_says_so(tmp_path: Path) -> None:
    src = _rows(
        tmp_path / "d.sqlite",
        [
            ("a", "knowledge", "<<<<<<< ours\nx\n=======\ny\n>>>>>>> theirs\n", None),
            ("a", "knowledge", "second", None),
            ("A", "knowledge", "twin", None),
        ],
    )
    conn = open_readonly(src)
    try:
        rows = [r for r in iter_storable_rows(conn) if r.table == "nodes"]
    finally:
        conn.close()
    assert rows[1].reason.startswith(
        "duplicate id: nodes rowid 1 holds it first, and was rejected (the body holds git conflict markers"
    )
    assert rows[1].reason.endswith("); neither row is stored")
    assert rows[2].reason.startswith("the id differs from 'a' (nodes rowid 1, which was rejected (the body")
