"""The read-only sqlite reader: bad rows by rowid, NULL mapping, round trips, no writes."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from md_cg.errors import InvalidNodeError, MdcgError
from md_cg.node import Edge, Node
from md_cg.nodefile import dumps, loads
from md_cg.sample import bundled_sample_path
from md_cg.sqlite_source import (
    EDGE_COLUMNS,
    NODE_COLUMNS,
    SCHEMA_SQL,
    count_rows,
    dangling_edges,
    inspect_source,
    iter_rows,
    node_edge_rows,
    node_to_row,
    open_readonly,
    row_to_node,
    write_nodes,
)

# A user database: no primary key on id, so duplicates can exist.
_LOOSE_SCHEMA = """
CREATE TABLE nodes (id TEXT, layer TEXT, content TEXT, importance REAL, tags TEXT,
                    condition_space TEXT, verification_basis TEXT, temporal TEXT);
CREATE TABLE edges (source TEXT, target TEXT, type TEXT, confidence REAL, verified INTEGER);
"""


def _make_db(path: Path, rows: list[tuple], edges: list[tuple] = (), schema: str = _LOOSE_SCHEMA):
    conn = sqlite3.connect(path)
    conn.executescript(schema)
    with conn:
        for row in rows:
            conn.execute(f"INSERT INTO nodes VALUES ({', '.join('?' * len(row))})", row)
        for edge in edges:
            conn.execute("INSERT INTO edges VALUES (?, ?, ?, ?, ?)", edge)
    conn.close()
    return path


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def bad_db(tmp_path: Path) -> Path:
    rows = [
        (
            "kp_good",
            "knowledge",
            "body one",
            0.5,
            '["a"]',
            '{"observation_position": "数学"}',
            "test",
            None,
        ),
        ("kp_json", "knowledge", "x", None, '["a",', None, None, None),
        ("kp_layer", "episodic", "x", None, None, None, None, None),
        ("kp_good", "knowledge", "again", None, None, None, None, None),
        ("../escape", "knowledge", "x", None, None, None, None, None),
        ("kp_basis", "knowledge", "x", None, None, None, "proof", None),
        ("kp_null", "knowledge", None, None, None, None, None, None),
        (None, "knowledge", "x", None, None, None, None, None),
        ("kp_two", "self", "", None, "[]", "{}", None, "1788612000.5"),
        ("kp_cs", "knowledge", "y", None, '["a"', '{"observation_position": 5', None, "oops"),
    ]
    edges = [
        ("kp_good", "kp_two", "part_of", 0.7, 0),
        ("kp_good", "kp_absent", "similar", None, None),
        ("ghost", "kp_good", "causal", 0.5, 1),
    ]
    return _make_db(tmp_path / "bad.sqlite", rows, edges)


def test_every_bad_row_kind_is_reported_by_rowid_while_good_rows_come_through(bad_db: Path):
    conn = open_readonly(bad_db)
    results = list(iter_rows(conn))
    conn.close()
    good = [(r.rowid, r.node.id) for r in results if r.ok]
    assert good == [(1, "kp_good"), (9, "kp_two")]
    errors = {(r.table, r.rowid): r.error for r in results if not r.ok}
    assert set(errors) == {("nodes", n) for n in (2, 3, 4, 5, 6, 7, 8, 10)} | {("edges", 3)}
    expected = {
        ("nodes", 2): ["nodes rowid 2 (id 'kp_json')", "invalid JSON in column 'tags'"],
        ("nodes", 3): ["nodes rowid 3", "unknown layer 'episodic'"],
        ("nodes", 4): ["nodes rowid 4 (id 'kp_good')", "duplicate id, first seen at nodes rowid 1"],
        ("nodes", 5): ["nodes rowid 5 (id '../escape')", "unsafe node id", "'..'"],
        ("nodes", 6): ["nodes rowid 6", "verification_basis", "'proof'"],
        ("nodes", 7): ["nodes rowid 7 (id 'kp_null')", "column 'content' is NULL"],
        ("nodes", 8): ["nodes rowid 8 (id None)", "column 'id' is NULL"],
        ("nodes", 10): ["invalid JSON in column 'tags'", "invalid JSON in column 'condition_space'"],
        ("edges", 3): ["edges rowid 3", "source 'ghost'", "is not a node"],
    }
    for key, parts in expected.items():
        for part in parts:
            assert part in errors[key], (key, part, errors[key])
    # Plain text in a free-value column (temporal "oops") is text, not a problem.
    assert "temporal" not in errors[("nodes", 10)]


def test_good_rows_carry_fields_edges_and_absent_nulls(bad_db: Path):
    conn = open_readonly(bad_db)
    nodes = {r.node.id: r.node for r in iter_rows(conn) if r.ok}
    conn.close()
    first = nodes["kp_good"]
    assert first.body == "body one"
    assert first.importance == 0.5
    assert first.tags == ["a"]
    assert first.condition_space == {"observation_position": "数学"}
    assert first.verification_basis == "test"
    assert first.edges == [
        Edge("kp_two", "part_of", 0.7, 0),
        Edge("kp_absent", "similar", None, None),
    ]
    # NULL, '[]' and '{}' are absent fields; a number in a JSON column is kept.
    second = nodes["kp_two"]
    assert second == Node(id="kp_two", layer="self", body="", temporal=1788612000.5)


def test_duplicate_ids_keep_the_first_row_even_when_it_is_bad(tmp_path: Path):
    db = _make_db(
        tmp_path / "dup.sqlite",
        [("a", "nowhere", "x", None, None, None, None, None)] * 3,
    )
    conn = open_readonly(db)
    results = list(iter_rows(conn))
    conn.close()
    assert [r.rowid for r in results] == [1, 2, 3]
    assert "unknown layer" in results[0].error
    # the first row owns the id though it is bad: the later ones say it was rejected
    rejected = (
        "duplicate id: nodes rowid 1 holds it first, and was rejected (unknown layer 'nowhere'; "
        "expected one of: anchor, structural, knowledge, contextual, self, rejected, unresolved); "
        "neither row is stored"
    )
    assert [r.error for r in results[1:]] == [
        f"nodes rowid 2 (id 'a'): {rejected}",
        f"nodes rowid 3 (id 'a'): {rejected}",
    ]


def test_reading_leaves_the_source_bytes_and_folder_unchanged(tmp_path: Path):
    db = tmp_path / "sample.sqlite"
    db.write_bytes(bundled_sample_path().read_bytes())
    before, mtime, listing = _sha(db), db.stat().st_mtime_ns, sorted(os.listdir(tmp_path))
    conn = open_readonly(db)
    assert sum(1 for r in iter_rows(conn) if r.ok) == count_rows(conn) == 226
    assert len(dangling_edges(conn)) == 2
    inspect_source(conn, db)
    with pytest.raises(sqlite3.OperationalError):
        conn.execute("DELETE FROM nodes")
    conn.close()
    assert _sha(db) == before
    assert db.stat().st_mtime_ns == mtime
    assert sorted(os.listdir(tmp_path)) == listing


def test_open_readonly_refuses_missing_and_foreign_files(tmp_path: Path):
    missing = tmp_path / "nope.sqlite"
    with pytest.raises(MdcgError, match=re.escape(f"{missing}: no such sqlite database file")):
        open_readonly(missing)
    assert not missing.exists()
    text = tmp_path / "notes.sqlite"
    text.write_text("not a database at all, just text " * 200)
    with pytest.raises(MdcgError, match=re.escape(f"{text}: not a readable sqlite database")):
        open_readonly(text)
    empty = _make_db(tmp_path / "other.sqlite", [], schema="CREATE TABLE t (x);")
    with pytest.raises(MdcgError, match="no 'nodes' table"):
        open_readonly(empty)
    lacking = _make_db(tmp_path / "lack.sqlite", [], schema="CREATE TABLE nodes (id, layer);")
    with pytest.raises(MdcgError, match="lacks the required column"):
        open_readonly(lacking)


def test_minimal_table_unknown_columns_and_integer_ids(tmp_path: Path):
    db = _make_db(
        tmp_path / "min.sqlite",
        [(7, "knowledge", "text", "lecture", None), (8, "self", "t", None, b"\x00blob")],
        schema="CREATE TABLE nodes (id INTEGER, layer TEXT, content TEXT, source TEXT, pic BLOB);",
    )
    conn = open_readonly(db)
    results = list(iter_rows(conn))
    info = inspect_source(conn, db)
    conn.close()
    assert results[0].node == Node(id="7", layer="knowledge", body="text", extra={"source": "lecture"})
    assert results[0].node_id == 7
    assert "column 'pic' holds a BLOB" in results[1].error
    assert info.unknown_columns == ("source", "pic")
    assert info.has_edges_table is False and info.edge_rows == 0
    assert set(info.missing_columns) == set(NODE_COLUMNS) - {"id", "layer", "content"}


def test_without_rowid_table_numbers_rows_by_position(tmp_path: Path):
    db = _make_db(
        tmp_path / "wr.sqlite",
        [("b", "knowledge", "x"), ("a", "nowhere", "y")],
        schema="CREATE TABLE nodes (id TEXT PRIMARY KEY, layer TEXT, content TEXT) WITHOUT ROWID;",
    )
    conn = open_readonly(db)
    results = list(iter_rows(conn))
    conn.close()
    assert [(r.rowid, r.node_id, r.ok) for r in results] == [(1, "a", False), (2, "b", True)]
    assert results[0].error.startswith("nodes rowid 1 (id 'a'): ")


def _full_node() -> Node:
    return Node(
        id="kp_all",
        layer="knowledge",
        body="\n# 功能名：全字段\n---\n正文 with trailing space  \n",
        modality="text",
        importance=0.1 + 0.2,
        confidence=1.0,
        condition_space={"observation_position": "数学·知识点（x）", "time_window": [1, 2]},
        tags=["domain:数学", "t"],
        spatial={"bbox": [1, 2, 3, 4]},
        temporal="durable",
        created_at=1788612000.123456,
        updated_at=1788612001.5,
        semantic_coordinates=[0.1, -0.2],
        state_attributes={"ccg": {"applies_when": "总是"}, "n": None},
        entity_id="ent_1",
        verification_basis="formal_proof",
        non_applicable_conditions=["数组未排序"],
        edges=[
            Edge("kp_b", "part_of", 0.7, 0),
            Edge("kp_c", "similar", None, True, extra={"note": "手工"}),
        ],
        verification_history=[{"verdict": "confirmed", "at": 1.5}],
        access_count=3,
        last_access=1788612002.25,
        extra={"origin": ["a", {"b": 1}]},
    )


def test_node_to_row_and_back_is_lossless():
    node = _full_node()
    row = node_to_row(node)
    assert list(row) == list(NODE_COLUMNS)
    assert row["content"] == node.body
    assert json.loads(row["extra"]) == {"origin": ["a", {"b": 1}]}
    edges = node_edge_rows(node)
    assert [list(e) for e in edges] == [list(EDGE_COLUMNS)] * 2
    assert edges[1]["verified"] == 1
    assert row_to_node(row, edges) == node


def test_round_trip_through_a_database_and_through_markdown(tmp_path: Path):
    nodes = [_full_node(), Node(id="kp_b", layer="anchor"), Node(id="kp_c", body="")]
    db = tmp_path / "rt.sqlite"
    conn = sqlite3.connect(db)
    assert write_nodes(conn, nodes) == (3, 2)
    conn.close()
    conn = open_readonly(db)
    back = [r.node for r in iter_rows(conn)]
    conn.close()
    assert back == nodes
    for node in back:
        assert loads(dumps(node)) == node


def test_every_bundled_sample_node_round_trips():
    conn = open_readonly(bundled_sample_path())
    nodes = [r.node for r in iter_rows(conn)]
    conn.close()
    assert all(n is not None for n in nodes)
    for node in nodes:
        assert row_to_node(node_to_row(node), node_edge_rows(node)) == node
        assert loads(dumps(node)) == node


def test_row_to_node_raises_with_the_field_named():
    with pytest.raises(InvalidNodeError, match="'importance'"):
        row_to_node({"id": "a", "layer": "knowledge", "content": "", "importance": "high"})
    with pytest.raises(InvalidNodeError, match=r"invalid JSON in column 'edges\.extra'"):
        row_to_node({"id": "a", "layer": "knowledge", "content": ""}, [{"target": "b", "extra": "{"}])


def test_text_that_is_not_utf8_is_a_bad_row_not_a_failed_read(tmp_path) -> None:
    import sqlite3

    from md_cg import sqlite_source

    db = tmp_path / "bad.sqlite"
    conn = sqlite3.connect(db)
    conn.executescript(sqlite_source.SCHEMA_SQL)
    conn.execute("INSERT INTO nodes (id, layer, content) VALUES ('good1', 'self', 'fine')")
    conn.execute("INSERT INTO nodes (id, layer, content) VALUES ('broken', 'self', CAST(X'61FF62' AS TEXT))")
    conn.execute("INSERT INTO nodes (id, layer, content) VALUES ('good2', 'self', 'also fine')")
    conn.commit()
    conn.close()
    with sqlite_source.open_readonly(db) as ro:
        results = list(sqlite_source.iter_rows(ro))
    assert [(r.rowid, r.node.id if r.node else None) for r in results] == [
        (1, "good1"),
        (2, None),
        (3, "good2"),
    ]
    assert results[1].error == "nodes rowid 2 (id 'broken'): column 'content' is not valid UTF-8 at byte 1"


# -- plain-text values, as seed-shaped databases store them ----------------------------


def _seed_shaped_db(path: Path) -> tuple[Path, dict[str, tuple[object, object]]]:
    """The reference schema, ``temporal`` and ``entity_id`` as plain TEXT and as JSON, mixed.

    Returns the database and, by id, the expected (temporal, entity_id).
    """
    temporal_cells = [
        ("durable", "durable"),
        ("one_off", "one_off"),
        ("recurring", "recurring"),
        ("unknown", "unknown"),
        ("", ""),
        ('"durable"', "durable"),
        ('"one_off"', "one_off"),
        (None, None),
        ("1788612000.5", 1788612000.5),
    ]
    entity_cells = [("ent_1", "ent_1"), ('"ent_2"', "ent_2"), (None, None), ("ent 3: x", "ent 3: x")]
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA_SQL)
    expected = {}
    with conn:
        for i in range(len(temporal_cells) * len(entity_cells)):
            (t_cell, t_value), (e_cell, e_value) = temporal_cells[i % 9], entity_cells[i // 9]
            node_id = f"n{i:02d}"
            conn.execute(
                "INSERT INTO nodes (id, layer, content, temporal, entity_id) VALUES (?, 'self', ?, ?, ?)",
                (node_id, f"memory {i}", t_cell, e_cell),
            )
            expected[node_id] = (t_value, e_value)
    conn.close()
    return path, expected


def test_plain_text_temporal_and_entity_id_are_read_as_text_and_json_still_works(tmp_path: Path):
    db, expected = _seed_shaped_db(tmp_path / "seed.sqlite")
    with open_readonly(db) as conn:
        results = list(iter_rows(conn))
    assert [r.error for r in results if not r.ok] == []
    got = {r.node.id: (r.node.temporal, r.node.entity_id) for r in results}
    assert got == expected
    # Round trip: node -> row (JSON text) -> node, and node -> file -> node, exactly.
    nodes = [r.node for r in results]
    again = tmp_path / "again.sqlite"
    conn = sqlite3.connect(again)
    write_nodes(conn, nodes)
    conn.close()
    with open_readonly(again) as conn:
        assert [r.node for r in iter_rows(conn)] == nodes
    for node in nodes:
        assert loads(dumps(node)) == node
    by_id = {n.id: n for n in nodes}
    assert 'temporal: "one_off"\nentity_id: "ent_1"\n' in dumps(by_id["n01"])
    assert 'temporal: ""\nentity_id: "ent_1"\n' in dumps(by_id["n04"])


def test_structured_columns_still_need_json(tmp_path: Path):
    with pytest.raises(InvalidNodeError, match=r"invalid JSON in column 'tags'"):
        row_to_node({"id": "a", "layer": "self", "content": "", "tags": "python"})
    with pytest.raises(InvalidNodeError, match=r"invalid JSON in column 'condition_space'"):
        row_to_node({"id": "a", "layer": "self", "content": "", "condition_space": "math"})


def test_hostile_cells_are_bad_rows_never_crashes(tmp_path: Path):
    deep = "[" * 100_000 + "]" * 100_000
    db = tmp_path / "hostile.sqlite"
    conn = sqlite3.connect(db)
    conn.executescript(SCHEMA_SQL)
    rows = [
        ("ok1", None, None, None),
        ("deep_tags", deep, None, None),
        ("deep_temporal", None, deep, None),
        ("huge", None, None, '"' + "x" * 300_000 + '"'),
        ("digits", None, "1" * 5000, None),
        ("deep_string_ok", '["' + "[" * 1000 + '"]', None, None),
        ("ok2", None, None, None),
    ]
    with conn:
        for node_id, tags, temporal, spatial in rows:
            conn.execute(
                "INSERT INTO nodes (id, layer, content, tags, temporal, spatial) "
                "VALUES (?, 'self', 'b', ?, ?, ?)",
                (node_id, tags, temporal, spatial),
            )
    conn.close()
    with open_readonly(db) as conn:
        results = {r.node_id: r for r in iter_rows(conn)}
    assert {i for i, r in results.items() if r.ok} == {"ok1", "deep_string_ok", "ok2"}
    assert results["deep_string_ok"].node.tags == ["[" * 1000]
    assert results["deep_tags"].error == (
        "nodes rowid 2 (id 'deep_tags'): column 'tags' nests deeper than 64 levels of lists and objects"
    )
    assert results["deep_temporal"].error == (
        "nodes rowid 3 (id 'deep_temporal'): column 'temporal' nests deeper than 64 levels "
        "of lists and objects"
    )
    assert results["huge"].error == (
        "nodes rowid 4 (id 'huge'): column 'spatial' holds 300,002 characters, "
        "more than a node's frontmatter can hold (256 KiB)"
    )
    assert results["digits"].error.startswith(
        "nodes rowid 5 (id 'digits'): column 'temporal' cannot be read as JSON (Exceeds the limit"
    )


@pytest.mark.parametrize(
    ("text", "too_deep"),
    [
        ("[" * 64 + "]" * 64, False),
        ("[" * 65 + "]" * 65, True),
        ('{"a": ' * 65 + "1" + "}" * 65, True),
        ('["' + "[" * 200 + '"]', False),
        ('["\\\\", ' + "[" * 70 + "]" * 70 + "]", True),  # an escaped backslash ends no string
        ('["\\"' + "[" * 100 + '"]', False),  # an escaped quote does not end the string
    ],
)
def test_nesting_is_measured_outside_strings(text: str, too_deep: bool):
    from md_cg.sqlite_source import nests_too_deep

    assert nests_too_deep(text) is too_deep


def test_edge_extra_keys_named_as_columns_plain_text_and_out_of_range_confidence(tmp_path: Path) -> None:
    """edges.extra keys target/type/confidence that differ from the set columns were
    dropped silently: now the edges row is bad, named. The same value, or a NULL column,
    is fine. A confidence of 2.0 and plain text in temporal/entity_id are kept as the
    docs now say (they said: bad rows)."""
    src = tmp_path / "s.sqlite"
    conn = sqlite3.connect(src)
    with conn:
        conn.execute("CREATE TABLE nodes (id, layer, content, temporal, entity_id)")
        conn.execute("CREATE TABLE edges (source, target, type, confidence, verified, extra)")
        conn.executemany(
            "INSERT INTO nodes VALUES (?, 'knowledge', ?, ?, ?)",
            [("a", "x", "durable", "ent 1"), ("b", "y", None, None)],
        )
        conn.executemany(
            "INSERT INTO edges VALUES (?, ?, ?, ?, NULL, ?)",
            [
                ("a", "b", "causal", 2.0, None),
                ("b", "a", "causal", 0.5, '{"target": "elsewhere", "note": "n"}'),
                ("b", "a", "causal", 0.5, '{"confidence": 0.1}'),
                ("b", "a", "Causal", 0.5, '{"type": "causal", "confidence": 0.5, "note": "same"}'),
                ("b", "a", None, None, '{"type": "part_of", "confidence": 0.25}'),
            ],
        )
    conn.close()
    conn = open_readonly(src)
    rows = list(iter_rows(conn))
    conn.close()
    a, b = (r.node for r in rows if r.table == "nodes")
    assert a is not None and b is not None
    assert (a.temporal, a.entity_id) == ("durable", "ent 1")
    assert [e.to_dict() for e in a.edges] == [{"target": "b", "type": "causal", "confidence": 2.0}]
    assert [e.to_dict() for e in b.edges] == [
        {"target": "a", "type": "causal", "confidence": 0.5, "note": "same"},
        {"target": "a", "type": "part_of", "confidence": 0.25},
    ]
    assert [(r.rowid, r.error) for r in rows if r.table == "edges"] == [
        (
            2,
            "edges rowid 2: the edge 'b' -> 'a' is left out: column 'edges.extra' holds 'target': "
            "'elsewhere', which differs from column 'target' ('a'); an edge has one target",
        ),
        (
            3,
            "edges rowid 3: the edge 'b' -> 'a' is left out: column 'edges.extra' holds 'confidence': "
            "0.1, which differs from column 'confidence' (0.5); an edge has one confidence",
        ),
    ]


def test_edge_extra_agrees_with_sqlite_booleans_and_fills_a_null_target(tmp_path: Path) -> None:
    """A `verified` column of 1 or 0 (sqlite's booleans) with extra {"verified": true} or
    false is one value, and a NULL `target` takes extra's target: those edges were bad rows
    and dropped. 1 with false, and 2 with true, still differ; no target anywhere is refused."""
    edges = [
        ("n1", 1, '{"verified": true}'),
        ("n2", 0, '{"verified": false}'),
        (None, None, '{"target": "n3"}'),
        ("n4", 1, '{"verified": false}'),
        ("n4", 2, '{"verified": true}'),
        (None, None, None),
    ]
    src = tmp_path / "s.sqlite"
    with closing(sqlite3.connect(src)) as conn, conn:
        conn.execute("CREATE TABLE nodes (id, layer, content)")
        conn.execute("CREATE TABLE edges (source, target, type, confidence, verified, extra)")
        conn.executemany("INSERT INTO nodes VALUES (?, 'knowledge', 'x')", [(f"n{i}",) for i in range(5)])
        conn.executemany("INSERT INTO edges VALUES ('n0', ?, 'causal', NULL, ?, ?)", edges)
    with closing(open_readonly(src)) as conn:
        rows = list(iter_rows(conn))
    n0 = next(r.node for r in rows if r.table == "nodes" and r.node_id == "n0")
    assert n0 is not None
    assert [e.to_dict() for e in n0.edges] == [
        {"target": "n1", "type": "causal", "verified": 1},
        {"target": "n2", "type": "causal", "verified": 0},
        {"target": "n3", "type": "causal"},
    ]
    assert [(r.rowid, r.error) for r in rows if r.table == "edges"] == [
        (
            4,
            "edges rowid 4: the edge 'n0' -> 'n4' is left out: column 'edges.extra' holds 'verified': "
            "False, which differs from column 'verified' (1); an edge has one verified",
        ),
        (
            5,
            "edges rowid 5: the edge 'n0' -> 'n4' is left out: column 'edges.extra' holds 'verified': "
            "True, which differs from column 'verified' (2); an edge has one verified",
        ),
        (
            6,
            "edges rowid 6: the edge 'n0' -> None is left out: field 'edges' has an unsafe target: "
            "edge target must be a string, got NoneType None (got None)",
        ),
    ]
