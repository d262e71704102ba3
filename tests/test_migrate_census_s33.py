"""Session 33 review r1: a key of the ``extra`` object that an extra column also names was
dropped silently; census schemes B and C and the field table took the string "1" for the
number 1 (and the string "<missing>" for an absent key); a migration with a live writer on
a WAL source reported rows 10,275 but migrated 10,278 (the count and the passes were
different reads)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import md_cg.migrate as migrate_module
from md_cg.census import census, census_of, render_markdown
from md_cg.migrate import BadRow, migrate
from md_cg.sqlite_source import SCHEMA_SQL

# -- 1. extra column vs key of the extra object ------------------------------------------


def _extra_clash_source(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE nodes (id TEXT, layer TEXT, content TEXT, extra TEXT, note TEXT, n REAL)")
    rows = [
        ("e1", '{"note": "from extra"}', "from col", None),  # two values: one would be lost
        ("e2", '{"note": "same", "n": 2.5}', "same", 2.5),  # the same value twice: kept once
        ("e3", '{"note": 1}', "1", None),  # the number 1 is not the text '1'
        ("e4", '{"n": 2}', None, 2.0),  # 2 is not 2.0: strict types, as the check compares
        ("e5", '{"other": "o"}', "col", None),  # no clash
    ]
    with conn:
        for node_id, extra, note, n in rows:
            conn.execute("INSERT INTO nodes VALUES (?, 'knowledge', 'x', ?, ?, ?)", (node_id, extra, note, n))
    conn.close()
    return path


def test_an_extra_column_clashing_with_a_key_of_extra_is_a_bad_row(tmp_path: Path) -> None:
    src = _extra_clash_source(tmp_path / "s.sqlite")
    report = migrate(src, tmp_path / "st")
    assert (report.ok, report.rows, report.migrated, report.created, report.verified) == (True, 5, 2, 2, 2)
    assert report.mismatches == []
    assert report.bad_rows == [
        BadRow(
            1,
            "e1",
            "column 'extra' holds 'note': 'from extra', which differs from column 'note' "
            "('from col'); a node has one extra key 'note': keep one of the two",
        ),
        BadRow(
            3,
            "e3",
            "column 'extra' holds 'note': 1, which differs from column 'note' ('1'); "
            "a node has one extra key 'note': keep one of the two",
        ),
        BadRow(
            4,
            "e4",
            "column 'extra' holds 'n': 2, which differs from column 'n' (2.0); "
            "a node has one extra key 'n': keep one of the two",
        ),
    ]
    orphan = tmp_path / "st" / "knowledge" / "orphan"
    assert sorted(p.name for p in orphan.iterdir()) == ["e2.md", "e5.md"]
    assert (orphan / "e2.md").read_bytes() == (
        b'---\nid: "e2"\nlayer: "knowledge"\nnote: "same"\n"n": 2.5\n---\nx\n'
    )
    assert (orphan / "e5.md").read_bytes() == (
        b'---\nid: "e5"\nlayer: "knowledge"\nother: "o"\nnote: "col"\n---\nx\n'
    )
    text = report.render()
    assert "  node rows 5: 2 good, 3 bad; edge rows: 0 bad\n" in text
    assert (
        "  nodes rowid 1 (id 'e1'): column 'extra' holds 'note': 'from extra', which differs "
        "from column 'note' ('from col'); a node has one extra key 'note': keep one of the two\n"
    ) in text


# -- 2. census keys by type ----------------------------------------------------------------


_TOOLS: list[Any] = [1, "1", 1, "1", [1, 2], "[1, 2]", "<missing>", None, 1.0, True, '"1"', " 1", "plain"]


def _records() -> list[dict[str, Any]]:
    out = []
    for v in _TOOLS:
        space = {} if v is None else {"observation_tool": v, "existence_constraint": v, "time_window": v}
        out.append({"layer": "knowledge", "condition_space": space})
    return out


def test_census_b_c_and_the_field_table_key_values_by_type() -> None:
    report = census(_records())
    # 1 (x2), "1" (x2), [1, 2], "[1, 2]", "<missing>", absent, 1.0, true, '"1"', " 1", "plain"
    for name in ("B", "C"):
        h = report.scheme(name).health
        assert (h.buckets, h.nodes, h.largest_bucket) == (11, 13, '"1"')
        assert h.singleton_rate == 9 / 11
        assert h.expected_scan == (2 * 2 * 2 + 9) / 13**2
    a = report.scheme("A").health
    assert (a.buckets, a.singleton_rate) == (11, 9 / 11)  # A agrees, as it always keyed by type
    fields = {f.field: f.to_dict() for f in report.fields}
    assert fields["observation_tool"] == {
        "field": "observation_tool",
        "present": 12,
        "distinct": 10,
        "top_value": "1",
        "top_count": 2,
        "top_share": 2 / 13,
    }
    markdown = render_markdown(report)
    assert '| observation_tool | 12 | 10 | "1" | 15.4% |' in markdown
    assert "| observation_position | 0 | 0 | — | 0.0% |" in markdown


def test_census_bucket_names_stay_readable_and_distinct() -> None:
    from md_cg.census import key_b

    keys = [key_b({"condition_space": {} if v is None else {"observation_tool": v}}) for v in _TOOLS]
    assert keys == [
        "1",
        '"1"',
        "1",
        '"1"',
        "[1, 2]",
        '"[1, 2]"',
        '"<missing>"',
        "<missing>",
        "1.0",
        "true",
        '"\\"1\\""',
        '" 1"',
        "plain",
    ]
    deep = "[" * 5000 + "]" * 5000  # too deep for the JSON reader: quoted, not taken for a list
    assert key_b({"condition_space": {"observation_tool": deep}}) == json.dumps(deep)
    assert key_b({"condition_space": {"observation_tool": "物理 café"}}) == "物理 café"


def test_census_of_a_sqlite_source_keys_by_type(tmp_path: Path) -> None:
    src = tmp_path / "c.sqlite"
    conn = sqlite3.connect(src)
    conn.executescript(SCHEMA_SQL)
    with conn:
        for i, v in enumerate([1, "1", 1, "1", [1, 2], "[1, 2]", "<missing>", None]):
            space = {} if v is None else {"observation_tool": v}
            conn.execute(
                "INSERT INTO nodes (id, layer, content, condition_space) VALUES (?, 'knowledge', 'x', ?)",
                (f"n{i}", json.dumps(space)),
            )
    conn.close()
    report = census_of(src)
    b = report.scheme("B").health
    assert (b.buckets, b.nodes, b.largest_bucket, b.singleton_rate) == (6, 8, '"1"', 4 / 6)
    tool = next(f for f in report.fields if f.field == "observation_tool")
    assert (tool.present, tool.distinct, tool.top_value, tool.top_count) == (7, 5, "1", 2)


# -- 3. one read of the source ------------------------------------------------------------

_WRITER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], timeout=30)
tag = sys.argv[2]
with conn:
    for i in range(int(sys.argv[3])):
        row = (f"{tag}_{i}", "knowledge", "late")
        conn.execute("INSERT INTO nodes (id, layer, content) VALUES (?, ?, ?)", row)
    conn.execute("UPDATE nodes SET content = 'changed by ' || ? WHERE id = ?", (tag, sys.argv[4]))
print("wrote", tag)
"""


def _write_source(src: Path, tag: str, count: int, changed_id: str) -> None:
    """Another process writes to the source and commits: ``count`` new rows, one changed."""
    done = subprocess.run(
        [sys.executable, "-c", _WRITER, str(src), tag, str(count), changed_id],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, f"wrote {tag}\n", "")


def test_a_live_writer_on_a_wal_source_leaves_the_figures_of_one_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "wal.sqlite"
    conn = sqlite3.connect(src)
    conn.executescript(SCHEMA_SQL)
    assert conn.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
    with conn:
        for i in range(300):
            conn.execute(
                "INSERT INTO nodes (id, layer, content) VALUES (?, 'knowledge', ?)", (f"n{i:03}", f"body {i}")
            )
    conn.close()

    counted = migrate_module.count_rows

    def count_then_write(c: sqlite3.Connection) -> int:
        n = counted(c)
        _write_source(src, "after_count", 3, "n000")  # between the count and the write pass
        return n

    calls: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        calls.append((done, total))
        if len(calls) == 1:
            _write_source(src, "mid_write", 4, "n150")  # during the write pass
        if done == 300 and calls.count((300, 600)) == 1:
            _write_source(src, "before_check", 2, "n299")  # before the check

    monkeypatch.setattr(migrate_module, "count_rows", count_then_write)
    store = tmp_path / "st"
    report = migrate(src, store, batch=100, progress=progress)

    check = sqlite3.connect(src)
    assert check.execute("SELECT COUNT(*) FROM nodes").fetchone() == (309,)  # the writer did write
    check.close()
    assert report.source_changed and not report.ok
    assert (report.rows, report.migrated, report.created, report.verified) == (300, 300, 300, 300)
    assert report.mismatches == [] and report.bad_rows == [] and report.extras == []
    assert calls[-1] == (600, 600)
    orphan = store / "knowledge" / "orphan"
    assert sorted(p.stem for p in orphan.iterdir()) == [f"n{i:03}" for i in range(300)]
    for node_id, body in (("n000", "body 0"), ("n150", "body 150"), ("n299", "body 299")):
        assert (orphan / f"{node_id}.md").read_bytes() == (
            f'---\nid: "{node_id}"\nlayer: "knowledge"\n---\n{body}\n'.encode()
        )
    text = report.render()
    assert "  node rows 300: 300 good, 0 bad; edge rows: 0 bad\n" in text
    assert (
        "  the source database changed while it was read: every figure is of the rows as one "
        "read at the start saw them (later writes are not in this run); run again\n"
    ) in text
