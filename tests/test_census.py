"""Bucket-key census: exact figures on a hand-made set, the verdicts on the full sample, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import no_writes, tree_listing

import md_cg.census as census_module
from census import census_of, main, records_from_folder
from md_cg.census import (
    MISSING,
    census,
    key_a,
    key_d,
    render_markdown,
    split_oversized,
)
from md_cg.index import Entry
from md_cg.layout import rel_path
from md_cg.migrate import migrate
from md_cg.node import Node
from md_cg.nodefile import dumps
from md_cg.sample import bundled_sample_path, generate
from md_cg.sqlite_source import iter_rows, open_readonly


def _node(n: int, position=None, tool="文本", window=(1, 2), constraint="无", tags=(), **kw):
    space = {
        "observation_position": position,
        "observation_tool": tool,
        "time_window": list(window),
        "existence_constraint": constraint,
    }
    return Node(id=f"r{n}", condition_space=space, tags=list(tags), **kw)


def _tiny() -> list[object]:
    r5 = _node(5, "Physics · topic (Ohm's law)")
    r5.condition_space["observer"] = "me"
    return [
        _node(1, "数学·知识点（勾股定理）"),
        _node(2, "数学·知识点(导数)"),
        _node(3, "数学·内容（按骨架填充）"),
        _node(4, "数学·内容（按骨架填充）"),
        r5,
        _node(6, "Physics · topic（Doppler effect）", tool="图像", window=(3, 4)),
        _node(
            7,
            "物理学·知识点（胡克定律）",
            window=(3, 4),
            constraint="联网",
            tags=["domain:PHYSICS"],
        ),
        _node(8, "数学·知识点（x）", tool="图像", tags=["domain:化学"]),
        Node(id="r9"),
        {"tags": [], "condition_space": None},  # a mapping record without a layer
        _node(11, "数学·知识点（y）", layer="self"),  # not knowledge: skipped by default
    ]


def _figures(report, name):
    h = report.scheme(name).health
    return (h.buckets, h.largest_share, h.singleton_rate, h.expected_scan, h.degraded)


def test_scheme_figures_on_a_hand_made_set_are_exact():
    report = census(_tiny())
    assert report.records == 10
    assert [s.name for s in report.schemes] == ["A", "B", "C", "D", "E"]
    assert _figures(report, "A") == (8, 0.2, 0.75, 0.14, True)
    assert _figures(report, "B") == (3, 0.6, 0.0, 0.44, True)
    assert _figures(report, "C") == (3, 0.7, 1 / 3, 0.54, True)
    # D: 数学 4, physics 3, 化学 1, orphan 2. Σv²/n² = 0.30 exactly: at the
    # threshold, so only the 40% largest bucket makes it degraded.
    assert _figures(report, "D") == (4, 0.4, 0.25, 0.3, True)
    assert report.scheme("D").health.largest_bucket == "数学"
    assert report.scheme("D").verdict == (
        "degraded: largest bucket '数学' holds 40.00% of nodes (4/10; limit 30%)"
    )
    # No D bucket exceeds twice the mean (2.5), so E equals D.
    assert _figures(report, "E") == _figures(report, "D")
    assert report.degraded == ("A", "B", "C", "D", "E")


def test_field_figures_on_a_hand_made_set_are_exact():
    fields = {f.field: f.to_dict() for f in census(_tiny()).fields}
    assert list(fields) == [
        "observation_position",
        "observation_tool",
        "time_window",
        "existence_constraint",
        "observer",
    ]
    assert fields["observation_position"] == {
        "field": "observation_position",
        "present": 8,
        "distinct": 7,
        "top_value": "数学·内容（按骨架填充）",
        "top_count": 2,
        "top_share": 0.2,
    }
    assert (fields["observation_tool"]["distinct"], fields["observation_tool"]["top_share"]) == (
        2,
        0.6,
    )
    assert fields["time_window"]["top_value"] == [1, 2]
    assert (fields["time_window"]["distinct"], fields["time_window"]["top_share"]) == (2, 0.6)
    assert fields["existence_constraint"]["top_share"] == 0.7
    assert fields["observer"] == {
        "field": "observer",
        "present": 1,
        "distinct": 1,
        "top_value": "me",
        "top_count": 1,
        "top_share": 0.1,
    }


def test_keys_and_layer_filter():
    records = _tiny()
    assert key_a(records[8]) == "[null, null, null, null]"
    assert key_d(records[6]) == "physics"
    assert key_d(records[7]) == "化学"
    assert key_d(records[9]) == "orphan"
    everything = census(records, layer=None)
    assert everything.records == 11
    assert everything.scheme("D").health.largest_share == 5 / 11
    assert census(records, layer="self").records == 2  # r11 + the layer-less mapping


def test_split_oversized_splits_only_buckets_above_twice_the_mean():
    joint = {("a", "w1"): 6, ("a", "w2"): 4, ("b", "w1"): 1, ("c", MISSING): 1}
    assert split_oversized(joint) == {"a @ w1": 6, "a @ w2": 4, "b": 1, "c": 1}
    assert split_oversized(joint, factor=3) == {"a": 10, "b": 1, "c": 1}
    assert split_oversized({}) == {}


def test_report_is_json_ready_and_renders_markdown():
    report = census(_tiny())
    data = json.loads(json.dumps(report.to_dict(), ensure_ascii=False))
    assert data["degraded"] == ["A", "B", "C", "D", "E"]
    assert data["schemes"][3]["buckets"] == 4
    text = render_markdown(report)
    assert "10 records (layer `knowledge`)." in text
    assert (
        "| D | domain tag, else normalised observation_position (route_key) | 4 | 40.0% "
        "| 25.0% | 30.0% | **degraded** |"
    ) in text
    assert "| observation_tool | 8 | 2 | 文本 | 60.0% |" in text
    assert "- A: singleton buckets are 75.00% of buckets (6/8; limit 50%)" in text


@pytest.fixture(scope="module")
def full_sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("census") / "full.sqlite"
    generate(path)
    return path


def test_full_sample_flags_a_degraded_and_d_healthy(full_sample: Path):
    report = census_of(full_sample)
    assert report.records == 3048
    a, d, e = report.scheme("A").health, report.scheme("D").health, report.scheme("E").health
    assert a.degraded and a.buckets == 3044 and a.singleton_rate > 0.99
    assert any("singleton buckets" in r for r in a.reasons)
    assert report.scheme("B").health.degraded and report.scheme("C").health.degraded
    assert not d.degraded
    assert (d.buckets, d.singleton_rate) == (91, 0.0)
    assert d.largest_share == 163 / 3048
    assert d.expected_scan < 0.10
    assert round(d.expected_scan, 3) == 0.020
    assert not e.degraded and e.expected_scan < d.expected_scan
    assert report.degraded == ("A", "B", "C")


def _store_from(nodes: list[Node], root: Path) -> None:
    for node in nodes:
        path = root / rel_path(node)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dumps(node), encoding="utf-8")


def test_folder_and_sqlite_give_the_same_census(tmp_path: Path, capsys):
    conn = open_readonly(bundled_sample_path())
    nodes = [r.node for r in iter_rows(conn)]
    conn.close()
    root = tmp_path / "store"
    _store_from(nodes, root)
    bad = root / "knowledge" / "orphan" / "broken.md"
    bad.write_text('---\nid: "x"\nlayer: knowledge: no\n', encoding="utf-8")
    (root / ".mdcg" / "log").mkdir(parents=True)
    (root / ".mdcg" / "log" / "shard.md").write_text("not a node")
    (root / "knowledge" / ".trash").mkdir()
    (root / "knowledge" / ".trash" / "old.md").write_text("not a node")

    seen: list[str] = []
    folder_nodes = list(records_from_folder(root, lambda where, reason: seen.append(where)))
    assert seen == [str(bad)]
    assert sorted(n.id for n in folder_nodes) == sorted(n.id for n in nodes)
    assert census_of(root).to_dict() == census_of(bundled_sample_path()).to_dict()
    assert str(bad) in capsys.readouterr().err


def test_folder_census_goes_through_the_engine_read_only(tmp_path: Path):
    root = tmp_path / "store"
    report = migrate(bundled_sample_path(), root)
    assert report.ok and report.migrated == 226
    # Damage one node file: the engine reports it and the census leaves it out.
    victim = root / "knowledge" / "orphan" / "broken.md"
    victim.write_text('---\nid: "broken"\nlayer: [\n---\n', encoding="utf-8")
    before = tree_listing(root)
    seen: list[tuple[str, str]] = []
    with no_writes() as attempts:
        records = records_from_folder(root, lambda where, reason: seen.append((where, reason)))
    assert attempts == []
    assert tree_listing(root) == before
    assert all(isinstance(r, Entry) for r in records)
    assert [r.id for r in records] == sorted(r.id for r in records)
    assert len(records) == 226
    assert [where for where, _ in seen] == [str(victim)]
    # The census of the migrated store equals the census of its source database.
    assert census_of(root).to_dict() == census_of(bundled_sample_path()).to_dict()
    everything = census_of(root, layer=None)
    assert everything.records == 226


def test_command_line(tmp_path: Path, capsys):
    assert main([str(bundled_sample_path()), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["records"] == 200
    assert data["degraded"] == ["A", "B", "C"]
    assert main([str(bundled_sample_path()), "--all-layers"]) == 0
    assert "226 records (all layers)." in capsys.readouterr().out
    assert main([str(tmp_path)]) == 2
    assert "not an md-cg store" in capsys.readouterr().err
    assert main([str(tmp_path / "missing.sqlite")]) == 2
    assert "no such sqlite database file" in capsys.readouterr().err


def test_folder_census_reads_the_files_as_they_are_now_and_writes_nothing(tmp_path: Path):
    """After a migration, one file broken by hand, one deleted and three hand notes
    added: the census still counted the stale index (200 records, nothing on stderr)
    until `mdcg sync`. It now reads the files as they are, writing nothing."""
    root = tmp_path / "store"
    assert migrate(bundled_sample_path(), root).ok
    with_ids = {r.id for r in records_from_folder(root, lambda where, reason: None)}
    files = sorted((root / "knowledge").rglob("*.md"))
    broken, gone = files[0], files[1]
    broken.write_text("---\nid: [unclosed\n---\nbody\n", encoding="utf-8")
    gone.unlink()
    for i in (1, 2, 3):
        (root / "knowledge" / f"hand-{i}.md").write_text(
            f'---\ntags: ["domain:handnotes"]\n---\nhand note {i}\n', encoding="utf-8"
        )
    before = tree_listing(root)
    seen: list[str] = []
    with no_writes() as attempts:
        records = records_from_folder(root, lambda where, reason: seen.append(where))
    assert attempts == [] and tree_listing(root) == before
    assert seen == [str(broken)]
    expected = (with_ids - {broken.stem, gone.stem}) | {"hand-1", "hand-2", "hand-3"}
    assert {r.id for r in records} == expected and len(records) == 227
    report = census_of(root)
    assert report.records == 201
    assert [e.id for e in records if e.id.startswith("hand-")] == ["hand-1", "hand-2", "hand-3"]
    assert {tuple(e.tags) for e in records if e.id.startswith("hand-")} == {("domain:handnotes",)}


def test_sqlite_census_store_census_and_migration_count_the_same_rows(tmp_path: Path):
    """The sqlite census counted a row with git conflict markers that the migration
    rejects as bad (36 / 35 / 34 knowledge records): it now reads the rows a migration
    stores, and the store census counts an expired temporary memory (a file until swept)."""
    import sqlite3

    src = tmp_path / "src.sqlite"
    conn = sqlite3.connect(src)
    with conn:
        conn.execute("CREATE TABLE nodes (id, layer, content, extra)")
        conn.executemany(
            "INSERT INTO nodes VALUES (?, 'knowledge', ?, ?)",
            [
                ("plain", "plain text", None),
                ("conflict", "<<<<<<< HEAD\na\n=======\nb\n>>>>>>> x\n", None),
                ("fenced", "```\n<<<<<<< HEAD\na\n=======\nb\n>>>>>>> x\n```\n", None),
                ("expires", "gone soon", '{"expires_at": "2020-01-01T00:00:00Z"}'),
            ],
        )
    conn.close()
    seen: list[str] = []
    rows = list(census_module.records_from_sqlite(src, lambda where, reason: seen.append(where)))
    assert [n.id for n in rows] == ["plain", "fenced", "expires"]
    assert seen == [f"{src}: nodes rowid 2 (id 'conflict')"]
    report = migrate(src, tmp_path / "m")
    assert report.migrated == 3 and [b.rowid for b in report.bad_rows] == [2]
    assert sorted(e.id for e in records_from_folder(tmp_path / "m", lambda w, r: None)) == [
        "expires",
        "fenced",
        "plain",
    ]
    assert census_of(src).records == census_of(tmp_path / "m").records == 3
