"""JSON-lines export and import: round trips byte for byte, idempotent re-runs, named errors, races."""

from __future__ import annotations

import io
import json
import multiprocessing
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import build_small_store, node_tree, run_and_kill, tree_listing
from typer.testing import CliRunner

from md_cg import (
    ImportSourceError,
    MdCG,
    Node,
    Scope,
    UnsafePathError,
    content_id,
    export_nodes,
    fsops,
    import_nodes,
)
from md_cg.cli import app


def md_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.md"))}


def exported(store: MdCG, **kw: Any) -> list[dict[str, Any]]:
    out = io.BytesIO()
    export_nodes(store, out, **kw)
    return [orjson.loads(line) for line in out.getvalue().splitlines()]


@pytest.fixture
def varied(tmp_path: Path) -> Path:
    """A store of many kinds of node: layers, buckets, CJK, edges, conditions, custom keys."""
    root = build_small_store(tmp_path / "a")
    with MdCG(root) as store:
        store.add(
            body="周五禁止部署，运维团队决定\n第二行", id="zh", tags=["ops", "domain:运维"], importance=0.9
        )
        store.add(
            body="José likes the café on Rue Cler", id="jose", layer="self", extra={"source": "chat 12"}
        )
        store.add(body="Context: the deploy freeze", id="ctx", layer="contextual", confidence=0.25)
        store.add(body="to archive", id="old")
        store.archive("old")
    return root


# -- export ------------------------------------------------------------------------------------


def test_export_writes_every_field_and_the_body_in_id_order(varied: Path) -> None:
    with MdCG(varied, read_only=True) as store:
        records = exported(store)
        want = {i: store.get(i) for i in store.ids()}
    assert [r["id"] for r in records] == sorted(want)
    assert {"anc_rule", "ctx", "jose", "kp_bsearch", "kp_sorting", "zh"} < set(want) and "old" not in want
    for record in records:
        node = want[record["id"]]
        assert record == {**node.to_dict(iso_times=True), "body": node.body}
    jose = next(r for r in records if r["id"] == "jose")
    assert jose["source"] == "chat 12" and jose["layer"] == "self"
    assert jose["created_at"].endswith("Z")


def test_export_filters_as_list_does(varied: Path) -> None:
    with MdCG(varied, read_only=True) as store:
        assert [r["id"] for r in exported(store, tag="ops")] == ["zh"]
        assert [r["id"] for r in exported(store, layer="self")] == ["jose"]
        assert "old" not in {r["id"] for r in exported(store)}
        assert "old" in {r["id"] for r in exported(store, include_archived=True)}
        assert exported(store, since=time.time() + 3600) == []


def test_export_to_a_file_replaces_it_whole_and_leaves_no_temp(varied: Path, tmp_path: Path) -> None:
    target = tmp_path / "out" / "all.jsonl"
    target.parent.mkdir()
    target.write_text("stale\n")
    with MdCG(varied, read_only=True) as store:
        report = export_nodes(store, target)
        ids = store.ids()
    assert report.count == len(ids) and report.ids == ids and report.target == str(target)
    assert [orjson.loads(x)["id"] for x in target.read_bytes().splitlines()] == ids
    assert sorted(p.name for p in target.parent.iterdir()) == ["all.jsonl"]


# -- round trip --------------------------------------------------------------------------------


def test_export_then_import_gives_the_same_files_byte_for_byte(varied: Path, tmp_path: Path) -> None:
    dump = tmp_path / "dump.jsonl"
    with MdCG(varied, read_only=True) as store:
        export_nodes(store, dump)
    n = len(dump.read_bytes().splitlines())
    assert n == 7  # the small store's four, zh, jose, ctx; not the archived one
    with MdCG(tmp_path / "b") as target:
        report = import_nodes(target, dump)
        assert (report.records, report.created, report.unchanged, report.updated) == (n, n, 0, 0)
    before = md_files(varied)
    del before["archive/knowledge/orphan/old.md"]  # not exported
    assert md_files(tmp_path / "b") == before
    # a second run writes nothing at all: every file keeps its mtime
    tree = node_tree(tmp_path / "b")
    with MdCG(tmp_path / "b") as target:
        again = import_nodes(target, dump)
        assert (again.created, again.unchanged, again.updated) == (0, n, 0)
        assert target.search("café", record=False)[0][0].id == "jose"
    assert node_tree(tmp_path / "b") == tree


def test_records_of_other_tools_become_memories(tmp_path: Path) -> None:
    source = tmp_path / "mem0.json"
    source.write_bytes(
        orjson.dumps(
            {
                "results": [
                    {
                        "id": "7f3c2a1e-1b2c-4d5e-8f90-123456789abc",
                        "memory": "Likes window seats",
                        "user_id": "alice",
                        "created_at": "2024-07-20T01:23:45.5-07:00",
                        "categories": ["travel"],
                    },
                    {"text": "Prefers tea over coffee"},
                    {"content": "Lives in Zürich", "tags": ["home"], "layer": "self"},
                ]
            }
        )
    )
    t0 = time.time()
    with MdCG(tmp_path / "m") as store:
        report = import_nodes(store, source, tags=["imported"])
        t1 = time.time()
        assert report.ids == ["7f3c2a1e-1b2c-4d5e-8f90-123456789abc", content_id("Prefers tea over coffee"),
                              content_id("Lives in Zürich")]  # fmt: skip
        first = store.get(report.ids[0])
        assert first.body == "Likes window seats"
        assert first.created_at == 1721463825.5
        assert first.extra == {"user_id": "alice", "categories": ["travel"]}
        assert first.tags == ["user:alice", "imported"]  # mem0's label, as its aliases filter on it
        tea = store.get(report.ids[1])
        assert tea.layer == "knowledge" and t0 <= tea.created_at <= t1
        zurich = store.get(report.ids[2])
        assert (zurich.layer, zurich.tags) == ("self", ["home", "imported"])
        assert [h.id for h in store.search("zurich", record=False)[0] if not h.filler] == [zurich.id]


def test_content_ids_make_a_re_run_store_each_memory_once(tmp_path: Path) -> None:
    lines = b'{"text": "alpha note"}\n\n{"text": "beta note"}\n{"text": "alpha note"}\n'
    assert content_id("alpha note") == content_id("alpha note") != content_id("beta note")
    assert content_id("alpha note").startswith("alpha-note-")
    with MdCG(tmp_path / "m") as store:
        first = import_nodes(store, io.BytesIO(lines))
        assert (first.records, first.created, first.repeated) == (3, 2, 1)
        second = import_nodes(store, io.BytesIO(lines + b'{"text": "gamma note"}\n'))
        assert (second.records, second.created, second.unchanged, second.repeated) == (4, 1, 2, 1)
        assert sorted(store.ids()) == sorted(content_id(t) for t in ("alpha note", "beta note", "gamma note"))


# -- errors --------------------------------------------------------------------------------------


BAD = (
    b'{"text": "good one"}\n'
    b'{"text": 3}\n'
    b"not json\n"
    b"[1]\n"
    b'{"body": "x", "importance": "high"}\n'
    b'{"layer": "knowledge"}\n'
    b'{"id": "dup", "body": "a"}\n'
    b'{"id": "dup", "body": "b"}\n'
    b'{"id": "../escape", "body": "c"}\n'
)
BAD_LINES = [
    "line 2: field 'text' must be text (got int)",
    "line 3: not JSON: invalid literal, expected 'null' (column 1)",
    "line 4: expected a JSON object, got list",
    "line 5: field 'importance' must be a number between 0 and 1 (got 'high')",
    "line 6: no text: give it as 'body', 'text', 'content', 'memory'",
    "line 8: id 'dup' is also on line 7, with other content",
]


def test_bad_records_are_named_and_nothing_is_written(tmp_path: Path) -> None:
    source = tmp_path / "bad.jsonl"
    source.write_bytes(BAD)
    with MdCG(tmp_path / "m") as store:
        before = tree_listing(tmp_path / "m")
        with pytest.raises(ImportSourceError) as err:
            import_nodes(store, source)
        assert tree_listing(tmp_path / "m") == before
    lines = str(err.value).splitlines()
    assert lines[0] == f"{source}: 7 bad record(s); nothing was imported"
    assert lines[1:7] == [f"  {source}: {x}" for x in BAD_LINES]
    assert lines[7].startswith(f"  {source}: line 9: ") and "escape" in lines[7]
    assert [p.where for p in err.value.problems] == [f"line {n}" for n in (2, 3, 4, 5, 6, 8, 9)]


def test_skip_bad_imports_the_good_records_and_lists_the_rest(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as store:
        report = import_nodes(store, io.BytesIO(BAD), skip_bad=True)
        assert (report.records, report.created, len(report.bad)) == (9, 2, 7)
        assert [str(b) for b in report.bad[:6]] == BAD_LINES
        assert sorted(store.ids()) == sorted([content_id("good one"), "dup"])
        assert store.get("dup").body == "a"


def test_a_broken_json_document_is_one_error_where_it_breaks(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as store, pytest.raises(ImportSourceError) as err:
        import_nodes(store, io.BytesIO(b'[\n {"text": "a"},\n {"text": "b",}\n]\n'))
    assert [str(p) for p in err.value.problems] == [
        "line 3: not JSON: trailing comma is not allowed (column 14)"
    ]


def test_an_id_held_with_other_content_is_refused_unless_overwrite(varied: Path, tmp_path: Path) -> None:
    source = tmp_path / "x.jsonl"
    source.write_bytes(
        b'{"id": "new1", "body": "fresh"}\n{"id": "zh", "body": "other text"}\n{"id": "old", "body": "z"}\n'
    )
    with MdCG(varied) as store:
        before = node_tree(varied)
        with pytest.raises(ImportSourceError) as err:
            import_nodes(store, source)
        assert node_tree(varied) == before
        assert [str(p) for p in err.value.problems] == [
            f"line 2: id 'zh' is in the store with other content ({store.entry('zh').path})",
            "line 3: id 'old' is held by an archived or expired memory (archive/knowledge/orphan/old.md)",
        ]
        source.write_bytes(b'{"id": "new1", "body": "fresh"}\n{"id": "zh", "body": "other text"}\n')
        report = import_nodes(store, source, overwrite=True)
        assert (report.created, report.updated, report.moved) == (1, 1, 1)  # zh left the 运维 bucket
        assert store.get("zh").body == "other text"


def test_a_dry_run_writes_nothing_and_counts_what_would_change(varied: Path, tmp_path: Path) -> None:
    source = tmp_path / "x.jsonl"
    source.write_bytes(b'{"id": "new1", "body": "fresh"}\n{"id": "zh", "body": "other text"}\n')
    before = tree_listing(varied)
    with MdCG(varied, read_only=True) as store:
        report = import_nodes(store, source, overwrite=True, dry_run=True)
    assert (report.created, report.updated, report.unchanged, report.dry_run) == (1, 1, 0, True)
    assert tree_listing(varied) == before


# -- the command line ---------------------------------------------------------------------------


def cli(*args: Any, input: bytes | None = None) -> Any:
    runner = CliRunner(env={"MDCG_ROOT": None})
    return runner.invoke(app, [str(a) for a in args], input=input, catch_exceptions=False)


def test_cli_export_pipes_into_import(varied: Path, tmp_path: Path) -> None:
    out = cli("export", "--root", varied, "--tag", "ops")
    assert out.exit_code == 0
    assert [orjson.loads(x)["id"] for x in out.stdout_bytes.splitlines()] == ["zh"]
    dest = tmp_path / "b"  # no `mdcg init` first: import creates the store (it said "no such store folder")
    got = cli("import", "-", "--root", dest, "--tag", "moved", input=out.stdout_bytes)
    assert got.exit_code == 0
    assert got.stdout.startswith("<stdin>: 1 record(s): 1 new, 0 changed, 0 unchanged (")
    with MdCG(dest, read_only=True) as store:
        assert store.get("zh").tags == ["ops", "domain:运维", "moved"]
    as_json = cli("import", "-", "--root", dest, "--tag", "moved", "--json", input=out.stdout_bytes)
    data = orjson.loads(as_json.stdout)
    assert {k: data[k] for k in ("records", "created", "unchanged", "bad")} == {
        "records": 1, "created": 0, "unchanged": 1, "bad": []
    }  # fmt: skip


def test_cli_import_lists_bad_records_on_stderr_and_exits_2(tmp_path: Path) -> None:
    source = tmp_path / "bad.jsonl"
    source.write_bytes(BAD)
    cli("init", "--root", tmp_path / "m")
    result = CliRunner(env={"MDCG_ROOT": None}).invoke(
        app, ["import", str(source), "--root", str(tmp_path / "m")]
    )
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[0] == f"error: {source}: 7 bad record(s); nothing was imported"
    assert lines[1:7] == [f"  {source}: {x}" for x in BAD_LINES]


# -- processes -------------------------------------------------------------------------------------


def _import_in_process(root: str, source: str, queue: Any) -> None:
    with MdCG(root) as store:
        report = import_nodes(store, source, batch=50)
    queue.put((report.created, report.unchanged))


def test_two_processes_importing_one_file_store_every_memory_once(tmp_path: Path) -> None:
    source = tmp_path / "many.jsonl"
    texts = [f"memory number {i}: {'独特' if i % 3 else 'plain'} words {i * 7}" for i in range(600)]
    source.write_bytes(b"".join(orjson.dumps({"text": t}) + b"\n" for t in texts))
    root = tmp_path / "m"
    MdCG(root).close()
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_import_in_process, args=(str(root), str(source), queue)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    results = [queue.get(timeout=5) for _ in procs]
    assert sum(created for created, _ in results) == 600
    assert all(created + unchanged == 600 for created, unchanged in results)
    with MdCG(root, read_only=True) as store:
        assert set(store.ids()) == {content_id(t) for t in texts}
        assert all(store.get(content_id(t)).body == t for t in texts[::37])


def test_cli_import_creates_a_new_store_but_a_dry_run_does_not(tmp_path: Path) -> None:
    """As migrate does its DEST and add its store (export | import into a new folder failed);
    a dry run writes nothing, so it refuses a folder that is not there."""
    source = tmp_path / "n.jsonl"
    source.write_bytes(b'{"text": "from a file"}\n')
    runner = CliRunner(env={"MDCG_ROOT": None})
    dry = runner.invoke(app, ["import", str(source), "--dry-run", "--root", str(tmp_path / "m")])
    assert dry.exit_code == 2
    assert dry.stderr.startswith(f"error: {tmp_path / 'm'}: no such store folder")
    assert not (tmp_path / "m").exists()
    done = runner.invoke(app, ["import", str(source), "--root", str(tmp_path / "m")])
    assert done.exit_code == 0, done.output
    with MdCG(tmp_path / "m", read_only=True) as store:
        assert [store.get(i).body for i in store.ids()] == ["from a file"]


def test_a_failed_export_leaves_the_old_file_and_no_temp(
    varied: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    target = tmp_path / "out" / "all.jsonl"
    target.parent.mkdir()
    target.write_text("stale\n")
    with MdCG(varied, read_only=True) as store:
        real_get, calls = store.get, []

        def failing_get(node_id: str, **kw: Any) -> Any:
            calls.append(node_id)
            if len(calls) == 3:
                raise OSError(5, "Input/output error", node_id)
            return real_get(node_id, **kw)

        monkeypatch.setattr(store, "get", failing_get)
        with pytest.raises(OSError, match="Input/output error"):
            export_nodes(store, target)
    assert target.read_text() == "stale\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["all.jsonl"]


def _racing(store: MdCG, other_root: Path, lines: bytes) -> None:
    """Make the first add_many of ``store`` meet what another handle stored just before."""
    real = store.add_many
    state = {"first": True}

    def add_many(nodes: Any, **kw: Any) -> Any:
        if state["first"]:
            state["first"] = False
            with MdCG(other_root) as other:
                import_nodes(other, io.BytesIO(lines))
        return real(nodes, **kw)

    store.add_many = add_many  # type: ignore[method-assign]


def test_ids_another_writer_stored_the_same_meanwhile_count_as_unchanged(tmp_path: Path) -> None:
    root = tmp_path / "m"
    lines = b'{"text": "one"}\n{"text": "two"}\n{"id": "three", "body": "three", "created_at": 5}\n'
    with MdCG(root) as store:
        _racing(store, root, lines)
        report = import_nodes(store, io.BytesIO(lines))
        assert (report.created, report.unchanged, report.updated) == (0, 3, 0)
        assert sorted(store.ids()) == sorted([content_id("one"), content_id("two"), "three"])


def test_an_id_another_writer_took_with_other_content_stops_the_import_named(tmp_path: Path) -> None:
    root = tmp_path / "m"
    lines = b'{"id": "a", "body": "mine"}\n{"id": "b", "body": "mine too"}\n{"id": "c", "body": "third"}\n'
    with MdCG(root) as store:
        _racing(store, root, b'{"id": "b", "body": "theirs"}\n')
        with pytest.raises(ImportSourceError) as err:
            import_nodes(store, io.BytesIO(lines), batch=2)
        assert str(err.value).splitlines() == [
            "<stream>: 1 record(s) whose id another writer took during the import; "
            "this batch was not written, the 0 record(s) before it were",
            f"  <stream>: line 2: id 'b' is in the store with other content ({store.entry('b').path})",
        ]
        assert store.ids() == ["b"] and store.get("b").body == "theirs"


def test_json_lines_with_a_bad_first_line_still_read_the_others(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as store:
        report = import_nodes(store, io.BytesIO(b'{"text": "broken"\n{"text": "fine"}\r\n'), skip_bad=True)
        assert [str(b) for b in report.bad] == ["line 1: not JSON: unexpected end of data (column 18)"]
        assert store.ids() == [content_id("fine")]


def test_an_id_no_clone_could_hold_is_a_bad_record_named_in_source_order(tmp_path: Path) -> None:
    lines = b'{"id": "CON", "text": "a"}\n{"text": 3}\n{"id": "fine", "text": "b"}\n'
    with MdCG(tmp_path / "m") as store:
        with pytest.raises(ImportSourceError) as err:
            import_nodes(store, io.BytesIO(lines))
        assert [p.where for p in err.value.problems] == ["line 1", "line 2"]
        assert err.value.problems[0].reason.startswith("unsafe node id 'CON': Windows reserves the name CON")
        assert store.ids() == []
        report = import_nodes(store, io.BytesIO(lines), skip_bad=True)
        assert (report.created, len(report.bad), store.ids()) == (1, 2, ["fine"])


def test_write_outcome_says_what_an_overwrite_would_do_and_writes_nothing(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as store:
        stored = store.add(id="n1", body="first", created_at=1e9, updated_at=1e9, stamp=False)
        before = tree_listing(tmp_path / "m")
        same = store.get("n1")
        assert store.write_outcome(same) == "unchanged"
        same.body = "second"
        assert store.write_outcome(same) == "updated"
        same.tags = ["domain:physics"]
        assert store.write_outcome(same) == "moved"
        assert store.write_outcome(Node(id="n2", body="new")) == "created"
        assert same.body == "second" and stored.body == "first"
        assert tree_listing(tmp_path / "m") == before


def test_write_outcome_never_reads_through_a_symlink(tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("not the store's")
    with MdCG(tmp_path / "m") as store:
        node = store.add(id="n1", body="first")
        path = store.path_of("n1")
        path.unlink()
        path.symlink_to(outside)
        with pytest.raises(UnsafePathError):
            store.write_outcome(node)
    assert fsops.holds(str(tmp_path), "secret.txt", b"not the store's") is True
    assert fsops.holds(str(tmp_path), "secret.txt", b"other") is False
    assert fsops.holds(str(tmp_path), "absent.txt", b"") is None


def test_a_record_is_named_by_its_own_field_names_and_one_string_is_a_list_of_one(tmp_path: Path) -> None:
    lines = (
        orjson.dumps({"text": "x" * 5_000_000})
        + b"\n"
        + orjson.dumps({"content": "one tag", "tags": "solo", "non_applicable_conditions": "when offline"})
    )
    with MdCG(tmp_path / "m") as store:
        report = import_nodes(store, io.BytesIO(lines), skip_bad=True)
        [bad] = [str(b) for b in report.bad]
        assert bad.startswith("line 1: field 'text' is larger than the file limit of 4 MiB (got 'xxx")
        assert bad.endswith("xxx')") and len(bad) < 300
        node = store.get(report.ids[0])
        assert (node.tags, node.non_applicable_conditions) == (["solo"], ["when offline"])


def _import_and_kill(source: Path, root: Path, *, past: int, delay: float) -> int:
    """Run ``mdcg import`` in a process and SIGKILL it ``delay`` s after ``past`` node files exist."""
    args = ["-m", "md_cg.cli", "-q", "import", str(source), "--root", str(root), "--batch", "50"]
    run_and_kill(
        args, lambda: len(list((root / "knowledge").rglob("*.md"))) > past, delay=delay, what="import"
    )
    return len(list((root / "knowledge").rglob("*.md")))


@pytest.mark.parametrize("delay", [0.0, 0.013])
def test_an_import_killed_mid_way_goes_on_when_run_again(tmp_path: Path, delay: float) -> None:
    texts = [f"imported memory {i}: {'部署' if i % 2 else 'deploy'} note {i * 13}" for i in range(3000)]
    source = tmp_path / "many.jsonl"
    source.write_bytes(b"".join(orjson.dumps({"text": t, "tags": ["bulk"]}) + b"\n" for t in texts))
    root = tmp_path / "m"
    MdCG(root).close()
    files = _import_and_kill(source, root, past=300, delay=delay)
    assert 300 < files < 3000
    again = cli("import", str(source), "--root", root, "--json")
    assert again.exit_code == 0, again.output
    report = orjson.loads(again.stdout)
    assert report["records"] == 3000 and report["bad"] == []
    assert report["created"] + report["unchanged"] == 3000 and report["unchanged"] >= 300
    with MdCG(root) as store:
        store.sync()
        assert set(store.ids()) == {content_id(t) for t in texts}
        assert [store.get(content_id(t)).body for t in texts[::97]] == texts[::97]
        # nothing left of the killed commit; all 3,000 share the orphan bucket (no domain tag)
        assert [f.kind for f in store.health().findings] == ["bucket_degraded"]


def test_export_names_the_memories_it_could_not_read(tmp_path: Path) -> None:
    """A node whose frontmatter broke was silently missing from an export (exit 0): a
    backup without it. The report names every such file, and a file broken after the
    index last saw it is named by its id; the rest is exported."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        for i in ("a", "b", "c"):
            s.add(id=i, body=f"memory {i}")
        broken = s.path_of("b")
        later = s.path_of("c")
    broken.write_text(broken.read_text(encoding="utf-8").replace('layer: "knowledge"', "layer: [x"), "utf-8")
    with MdCG(root) as s:
        s.sync()
        later.write_text("---\nid: [\n---\nbody\n", encoding="utf-8")  # after the index saw it
        out = io.BytesIO()
        report = export_nodes(s, out)
        assert [r["id"] for r in map(orjson.loads, out.getvalue().splitlines())] == ["a"]
        assert report.ids == ["a"] and [u[0] for u in report.unreadable] == ["knowledge/orphan/b.md", "c"]
        assert report.unreadable[1][1].startswith("knowledge/orphan/c.md:3: the YAML frontmatter")
        assert export_nodes(s, io.BytesIO(), layer="self").unreadable == []


@pytest.mark.parametrize("before", ["compact", "sync", "health"])
def test_export_names_a_broken_file_an_earlier_process_found(tmp_path: Path, before: str) -> None:
    """Export named a broken file only in the process that had found it (an open without
    snapshot, its own sync): after `compact`, `sync` or `health` in an earlier process
    it left the memory out of the backup without a word (exit 0)."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="a1", body="first memory")
        s.compact_index()
    (root / "knowledge" / "b1.md").write_text("---\nid: b1\ntags: [x\n---\nbroken\n", "utf-8")
    (root / "self" / "c1.md").write_text("---\nid: c1\n---\nhand written\n", "utf-8")
    with MdCG(root) as s:
        getattr(s, {"compact": "compact_index"}.get(before, before))()
    with MdCG(root) as s:
        assert s.unreadable_files() == []  # the index of this process has not seen it
        report = export_nodes(s, io.BytesIO())
        assert report.ids == ["a1"] if before != "sync" else ["a1", "c1"]
        assert [rel for rel, _why in report.unreadable] == (
            ["knowledge/b1.md", "self/c1.md"] if before != "sync" else ["knowledge/b1.md"]
        )
        assert report.unreadable[0][1].startswith("the YAML frontmatter does not parse: did not find")
        if before != "sync":
            assert report.unreadable[1][1] == "a memory file ('c1') the index does not know; run sync"
        assert [rel for rel, _w in export_nodes(s, io.BytesIO(), layer="self").unreadable] == (
            ["self/c1.md"] if before != "sync" else []
        )
        assert export_nodes(s, io.BytesIO(), layer="anchor").unreadable == []
    with MdCG(root, scope=Scope(agent="x")) as scoped:
        assert export_nodes(scoped, io.BytesIO()).unreadable == []
    result = CliRunner().invoke(app, ["export", "--root", str(root)])
    assert result.exit_code == 1
    assert result.stderr.startswith("not exported: knowledge/b1.md: the YAML frontmatter does not parse")


def test_export_names_only_memory_files_and_under_a_filter_says_may_be_left_out(tmp_path: Path) -> None:
    """Export named every refused entry of the layer folders as "not exported" and
    exited 1: a symlink to a picture holds no memory. And with --tag or --since a broken
    file (whose tags and times are unknown) made a filtered export exit 1 though its
    memory may lie outside the selection: it is named as "may be left out", exit 0."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="a", body="memory a", tags=["x"])
        s.add(id="c", body="memory c")
    outside = tmp_path / "hostname"
    outside.write_text("host\n")
    (root / "knowledge" / "logo.png").symlink_to(outside)  # no memory: not named
    (root / "knowledge" / "evil.md").symlink_to(outside)  # a memory file refused: named
    deep = root / "knowledge" / "/".join("d" * 8)
    deep.mkdir(parents=True)
    (deep / "far.md").write_text("---\nid: far\n---\nfar\n", "utf-8")  # the folder: named
    (root / "knowledge" / "b.md").write_text("---\nid: b\ntags: [x\n---\nbroken\n", "utf-8")
    named = ["knowledge/b.md", "knowledge/d/d/d/d/d/d/d", "knowledge/evil.md"]
    with MdCG(root) as s:
        report = export_nodes(s, io.BytesIO())
        assert report.ids == ["a", "c"]
        assert [rel for rel, _why in report.unreadable] == named
        assert report.maybe_left_out == []
        assert report.unreadable[1][1] == "a folder deeper than 8 levels (not scanned)"
        assert report.unreadable[2][1] == "a symlink (md-cg never follows symlinks below the store root)"
        for window in ({"tag": "x"}, {"since": 0.0}, {"until": time.time() + 60}):
            filtered = export_nodes(s, io.BytesIO(), **window)  # type: ignore[arg-type]
            assert filtered.unreadable == [] and filtered.maybe_left_out == report.unreadable
        assert export_nodes(s, io.BytesIO(), tag="x").ids == ["a"]
    runner = CliRunner()
    whole = runner.invoke(app, ["export", "--root", str(root)])
    assert whole.exit_code == 1
    assert [line.split(": ")[0:2] for line in whole.stderr.splitlines()] == [
        ["not exported", r] for r in named
    ]
    for window in (["--tag", "x"], ["--since", "30d"]):
        part = runner.invoke(app, ["export", *window, "--root", str(root)])
        assert part.exit_code == 0, part.output
        assert [json.loads(line)["id"] for line in part.stdout.splitlines()] == (
            ["a"] if window[0] == "--tag" else ["a", "c"]
        )
        lines = part.stderr.splitlines()
        assert [line.split(": ")[0:2] for line in lines] == [["may be left out", r] for r in named]
        assert lines[0].startswith("may be left out: knowledge/b.md: the YAML frontmatter does not parse")
    # a memory of the selection whose file broke since the index saw it is not exported: exit 1
    with MdCG(root) as s:
        s.sync()
        s.path_of("a").write_text("---\nid: [\n---\nbody\n", encoding="utf-8")
    part = runner.invoke(app, ["export", "--tag", "x", "--root", str(root)])
    assert part.exit_code == 1
    assert part.stderr.splitlines()[-1].startswith("not exported: a: knowledge/")


def test_twin_ids_within_the_source_are_bad_records_not_a_failed_batch(tmp_path: Path) -> None:
    source = tmp_path / "tw.jsonl"
    source.write_text(
        '{"id":"Abc","layer":"self","body":"one"}\n'
        '{"id":"abc","layer":"self","body":"two"}\n'
        '{"id":"ok1","layer":"self","body":"three"}\n'
    )
    with MdCG(tmp_path / "t") as store:
        with pytest.raises(ImportSourceError, match="line 2: id 'abc' differs only by letter case"):
            import_nodes(store, source)
        assert store.ids() == []
        report = import_nodes(store, source, skip_bad=True)
        assert [(b.where, b.node_id) for b in report.bad] == [("line 2", "abc")]
        assert sorted(store.ids()) == ["Abc", "ok1"]
        again = import_nodes(store, source, skip_bad=True)  # running it again goes on
        assert (again.unchanged, again.created) == (2, 0)


def test_custom_keys_named_body_or_archived_round_trip_and_a_live_memory_stays_live(tmp_path: Path) -> None:
    """Custom frontmatter keys `body` and `archived` (a source's columns) were lost by
    export -> import, and `archived: true` archived a live memory. A node with such a
    key is exported with all its custom keys under "mdcg:custom" (order kept)."""
    t0 = 1_700_000_000.0
    nodes = [
        Node(
            id="cols",
            layer="knowledge",
            body="real body",
            created_at=t0,
            extra={"a": 1, "body": "old", "z": 2},
        ),
        Node(id="live", layer="knowledge", body="live memory", created_at=t0, extra={"archived": True}),
        Node(id="plain", layer="knowledge", body="plain", created_at=t0, extra={"text": "t", "archived0": 0}),
        Node(id="put", layer="self", body="put away", created_at=t0, extra={"archived": 1}),
    ]
    with MdCG(tmp_path / "a") as s:
        s.add_many(nodes, stamp=False)
        s.archive(["put"])
        records = exported(s, include_archived=True)
        export_nodes(s, tmp_path / "x.jsonl", include_archived=True)
    assert records == [
        {"id": "cols", "layer": "knowledge", "created_at": "2023-11-14T22:13:20.000000Z",
         "mdcg:custom": {"a": 1, "body": "old", "z": 2}, "body": "real body"},
        {"id": "live", "layer": "knowledge", "created_at": "2023-11-14T22:13:20.000000Z",
         "mdcg:custom": {"archived": True}, "body": "live memory"},
        {"id": "plain", "layer": "knowledge", "created_at": "2023-11-14T22:13:20.000000Z",
         "text": "t", "archived0": 0, "body": "plain"},
        {"id": "put", "layer": "self", "created_at": "2023-11-14T22:13:20.000000Z",
         "mdcg:custom": {"archived": 1}, "body": "put away", "archived": True},
    ]  # fmt: skip
    with MdCG(tmp_path / "b") as t:
        report = import_nodes(t, tmp_path / "x.jsonl")
        assert (report.created, report.archived) == (4, ["put"])
        assert t.ids() == ["cols", "live", "plain"] and t.ids(include_archived=True) == [
            "cols",
            "live",
            "plain",
            "put",
        ]
        assert t.get("live").extra == {"archived": True}
        assert t.get("put", include_archived=True).extra == {"archived": 1}
    assert md_files(tmp_path / "b") == md_files(tmp_path / "a")
    with MdCG(tmp_path / "a") as s:  # the same export into its own store: nothing changes
        again = import_nodes(s, tmp_path / "x.jsonl")
        assert (again.created, again.updated, again.unchanged) == (0, 0, 4)
    # an older export's records: `"archived": true` archives; another value is a custom key
    old = tmp_path / "old.jsonl"
    old.write_text('{"id":"o1","body":"one","archived":true}\n{"id":"o2","body":"two","archived":1}\n')
    with MdCG(tmp_path / "c") as c:
        assert import_nodes(c, old).archived == ["o1"]
        assert c.ids() == ["o2"] and c.get("o2").extra == {"archived": 1}
        bad = tmp_path / "bad.jsonl"
        bad.write_text(
            '{"id":"b1","body":"x","mdcg:custom":5}\n{"id":"b2","body":"x","mdcg:custom":{"layer":"self"}}\n'
            '{"id":"b3","body":"x","k":1,"mdcg:custom":{"k":2}}\n'
        )
        with pytest.raises(ImportSourceError) as err:
            import_nodes(c, bad)
        assert [(b.where, b.node_id, b.reason) for b in err.value.problems] == [
            ("line 1", "b1", "field 'mdcg:custom' must be an object of custom keys (got int)"),
            ("line 2", "b2", "field 'mdcg:custom' holds 'layer', which is a field of the node"),
            ("line 3", "b3", "field 'mdcg:custom' holds 'k', which is given beside it too"),
        ]


def test_a_store_with_empty_bodies_copies_through_export_and_import(tmp_path: Path) -> None:
    """Empty and whitespace-only bodies (a migration stores them) made `export | import`
    fail as a whole: "2 bad record(s); nothing was imported". A record with an id
    carries its body as it is; one without an id still needs text to make its id."""
    import sqlite3

    src = tmp_path / "src.sqlite"
    sqlite3.connect(src).executescript(
        "CREATE TABLE nodes (id, layer, content, created_at);"
        "INSERT INTO nodes VALUES ('ws', 'knowledge', char(32, 32, 32, 10, 9), 1700000000),"
        " ('empty', 'knowledge', '', 1700000000), ('ok', 'knowledge', 'fine', 1700000000);"
    ).connection.close()
    from md_cg.migrate import migrate

    assert migrate(src, tmp_path / "a").ok
    runner = CliRunner()
    out = runner.invoke(app, ["export", "--root", str(tmp_path / "a")])
    assert out.exit_code == 0, out.output
    done = runner.invoke(app, ["import", "-", "--root", str(tmp_path / "b")], input=out.stdout_bytes)
    assert done.exit_code == 0, done.output
    assert md_files(tmp_path / "b") == md_files(tmp_path / "a")
    with MdCG(tmp_path / "b") as t:
        assert {i: t.get(i).body for i in t.ids()} == {"empty": "", "ok": "fine", "ws": "   \n\t"}
        with pytest.raises(ImportSourceError) as err:
            import_nodes(t, io.BytesIO(b'{"body": "  "}\n'))
        assert [(b.where, b.reason) for b in err.value.problems] == [
            ("record 1", "field 'body' is empty and the record has no id: give one or some text")
        ]


def _temp_files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if fsops.is_temp_name(p.name))


def test_an_import_run_again_after_a_kill_removes_the_killed_runs_temp_files(tmp_path: Path) -> None:
    """A SIGKILLed import left its temp files (.<id>.md.<pid>.<token>.tmp) and the import
    run again to completion did not remove them: health reported temp_file for each.
    The import now runs sync first, which removes a dead writer's temp files."""
    texts = [f"kill leftovers note {i}" for i in range(3000)]
    source = tmp_path / "many.jsonl"
    source.write_bytes(b"".join(orjson.dumps({"text": t}) + b"\n" for t in texts))
    for attempt in range(20):
        root = tmp_path / f"m{attempt}"
        MdCG(root).close()
        args = ["-m", "md_cg.cli", "-q", "import", str(source), "--root", str(root), "--batch", "300"]
        run_and_kill(args, lambda r=root: bool(_temp_files(r)), delay=0.0, what="import")  # type: ignore[misc]
        if _temp_files(root):
            break
    else:
        pytest.fail("no kill left a temp file in 20 tries")
    again = cli("import", str(source), "--root", root, "--json")
    assert again.exit_code == 0, again.output
    assert _temp_files(root) == []
    with MdCG(root) as store:
        assert set(store.ids()) == {content_id(t) for t in texts}
        assert [f.kind for f in store.health().findings] == ["bucket_degraded"]


def test_an_integer_beyond_64_bits_is_a_bad_record_naming_line_and_key(tmp_path: Path) -> None:
    """orjson read "k": 123456789012345678901234567890 as the float 1.2345678901234568e+29,
    stored as new. Such an integer is now a bad record naming the line and the key
    (as a migration's bad row); 64-bit integers and long digit runs in text are kept."""
    big = 123456789012345678901234567890
    source = tmp_path / "n.jsonl"
    source.write_bytes(
        b'{"id":"ok","body":"order 12345678901234567890123",'
        + b'"lo":-9223372036854775808,"hi":18446744073709551615}\n'
        + b'{"id":"big","body":"x","k":%d}\n{"id":"deep","body":"y","m":{"a":[1,%d]}}\n' % (big, -big)
    )
    with MdCG(tmp_path / "s") as s:
        with pytest.raises(ImportSourceError) as err:
            import_nodes(s, source)
        assert [(b.where, b.node_id, b.reason.split(" outside")[0]) for b in err.value.problems] == [
            ("line 2", "big", f"field 'k' holds the integer {big},"),
            ("line 3", "deep", f"field 'm.a[1]' holds the integer {-big},"),
        ]
        assert s.ids() == []
        report = import_nodes(s, source, skip_bad=True)
        assert (report.created, [b.node_id for b in report.bad]) == (1, ["big", "deep"])
        node = s.get("ok")
        assert (node.body, node.extra) == ("order 12345678901234567890123", {"lo": -(2**63), "hi": 2**64 - 1})


def test_an_integer_beyond_64_bits_is_refused_anywhere_naming_its_field_path(tmp_path: Path) -> None:
    """created_at of 30 digits was stored as 1.2345678901234568e+29, and one under
    mdcg:custom's body was reported as field 'text': every such integer is now a bad
    record naming the line and the path to it; 2**64 - 1 and -2**63 still import."""
    big = 123456789012345678901234567890
    records = [
        {"id": "a", "text": "t", "created_at": big},
        {"id": "b", "text": "t", "mdcg:custom": {"body": big}},
        {"id": "c", "text": "t", "edges": [{"target": "a", "type": "causal", "confidence": big}]},
        {"id": "d", "text": "t", "importance": big},
        {"id": "e", "text": "t", "k": -(2**63) - 1},
        {"id": "f", "text": "t", "k": {"x": [1, {"y": big}]}},
        {"id": "ok", "text": "t", "k": [2**64 - 1, -(2**63)]},
    ]
    source = tmp_path / "n.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    paths = ["created_at", "mdcg:custom.body", "edges[0].confidence", "importance", "k", "k.x[1].y"]
    values = [big, big, big, big, -(2**63) - 1, big]
    with MdCG(tmp_path / "s") as s:
        report = import_nodes(s, source, skip_bad=True)
        assert [tuple(b) for b in report.bad] == [
            (
                f"line {n}",
                node_id,
                f"field {path!r} holds the integer {value}, outside the range a node file stores "
                "(-2**63 to 2**64 - 1)",
            )
            for n, node_id, path, value in zip(range(1, 7), "abcdef", paths, values, strict=True)
        ]
        assert (s.ids(), s.get("ok").extra) == (["ok"], {"k": [2**64 - 1, -(2**63)]})


# -- files edited by hand in the store ------------------------------------------------------------

FIVE = b"".join(
    orjson.dumps({"id": f"x{i}", "text": f"record {i}", "created_at": "2026-01-01T00:00:00Z"}) + b"\n"
    for i in range(5)
)
BROKEN_X2 = (
    "its file knowledge/orphan/x2.md is unusable: the YAML frontmatter does not parse: did not find "
    "expected ',' or ']' (column 1), while parsing a flow sequence from line 3, column 7; it is not "
    "written over -- fix it, then import again"
)


def _five_edited_by_hand(tmp_path: Path, *, broken: bool) -> tuple[Path, Path]:
    """x0..x4 imported, then x0's file deleted, x1's edited (and x2's frontmatter broken)."""
    source, root = tmp_path / "five.jsonl", tmp_path / "m"
    source.write_bytes(FIVE)
    with MdCG(root) as store:
        import_nodes(store, source)
        files = {i: store.path_of(i) for i in ("x0", "x1", "x2")}
    files["x0"].unlink()
    files["x1"].write_text(files["x1"].read_text().replace("record 1", "record 1 edited by hand"))
    if broken:
        files["x2"].write_text(files["x2"].read_text().replace('id: "x2"', 'id: "x2"\ntags: [\n'))
    return source, root


def _counts(report: Any) -> tuple[int, int, int, list[tuple[str, str | None, str]]]:
    return (report.created, report.updated, report.unchanged, [tuple(k) for k in report.kept])


def test_an_import_dry_run_sees_files_edited_by_hand_as_the_run_does(tmp_path: Path) -> None:
    """The dry run refused x0, deleted by hand ("held by an archived or expired memory");
    the run then created it. Now both pick up the hand edits (the dry run in a read-only
    view: it writes nothing), through a read-only handle (as the CLI) or a writable one."""
    source, root = _five_edited_by_hand(tmp_path, broken=False)
    before = tree_listing(root)
    with MdCG(root, read_only=True) as store:
        dry = import_nodes(store, source, overwrite=True, dry_run=True)
    with MdCG(root) as store:
        dry_writable = import_nodes(store, source, overwrite=True, dry_run=True)
        assert tree_listing(root) == before
        run = import_nodes(store, source, overwrite=True)
        assert store.get("x0").body == "record 0" and store.get("x1").body == "record 1"
    assert _counts(dry) == _counts(dry_writable) == _counts(run) == (1, 1, 3, [])
    assert dry.ids == run.ids == ["x0", "x1", "x2", "x3", "x4"]


def test_a_record_whose_file_was_broken_by_hand_is_kept_and_the_rest_imported(tmp_path: Path) -> None:
    """x2's file broken by hand stopped every import for good, saying a re-run goes on;
    now its record is kept (named, with why), as migrate keeps it, and the rest imported."""
    source, root = _five_edited_by_hand(tmp_path, broken=True)
    broken = (root / "knowledge/orphan/x2.md").read_bytes()
    kept = [("line 3", "x2", BROKEN_X2)]
    dry = cli("import", source, "--root", root, "--overwrite", "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    assert {k: orjson.loads(dry.stdout)[k] for k in ("created", "updated", "unchanged", "kept")} == {
        "created": 1, "updated": 1, "unchanged": 2,
        "kept": [{"where": w, "node_id": i, "reason": r} for w, i, r in kept],
    }  # fmt: skip
    run = cli("import", source, "--root", root, "--overwrite")
    assert run.exit_code == 0, run.output
    first, *rest = run.stdout.splitlines()
    assert first.startswith(
        f"{source}: 5 record(s): 1 new, 1 changed, 2 unchanged, "
        "1 kept (the store's file or folder cannot be used) ("
    )
    assert rest == [f"  kept: line 3: {BROKEN_X2}"]
    with MdCG(root) as store:
        assert _counts(import_nodes(store, source, overwrite=True)) == (0, 0, 4, kept)
        assert [store.get(f"x{i}").body for i in (0, 1, 3, 4)] == [f"record {i}" for i in (0, 1, 3, 4)]
    assert (root / "knowledge/orphan/x2.md").read_bytes() == broken


def test_a_file_broken_by_hand_during_an_import_is_kept(tmp_path: Path) -> None:
    """A file that breaks between the plan and its batch's write: the batch is planned
    again and that record kept (the import stopped, saying a re-run goes on)."""
    source, root = tmp_path / "five.jsonl", tmp_path / "m"
    source.write_bytes(FIVE)
    with MdCG(root) as store:
        import_nodes(store, source)
        x3 = store.path_of("x3")
        source.write_bytes(FIVE.replace(b"record", b"new record"))

        def break_x3(done: int, _total: int) -> None:
            if done == 1:
                x3.write_text(x3.read_text().replace('id: "x3"', 'id: "x3"\ntags: [\n'))

        report = import_nodes(store, source, overwrite=True, batch=1, progress=break_x3)
        assert [store.get(f"x{i}").body for i in (0, 1, 2, 4)] == [f"new record {i}" for i in (0, 1, 2, 4)]
    why = BROKEN_X2.replace("x2", "x3")
    assert _counts(report) == (0, 4, 0, [("line 4", "x3", why)])
    assert report.ids == ["x0", "x1", "x2", "x4"]


def test_a_record_with_an_expiry_and_no_tier_imports_again_unchanged(tmp_path: Path) -> None:
    """Review round 4 (session 24): once add took an expiry without a tier as the temp
    tier, the check of what a write would store did not, so importing the same file again
    refused the record as taken by other content (and with overwrite said "changed")."""
    store = MdCG(tmp_path / "m")
    when = time.time() + 9e5
    src = tmp_path / "src.jsonl"
    src.write_text(
        json.dumps({"id": "e1", "body": "green tea", "expires_at": when})
        + "\n"
        + json.dumps({"body": "black tea for breakfast", "expires_at": when})
        + "\n"
    )
    first = import_nodes(store, src)
    assert first.created == 2
    again = import_nodes(store, src)
    assert (again.created, again.updated, again.unchanged) == (0, 0, 2)
    assert import_nodes(store, src, overwrite=True).unchanged == 2
    assert store.get("e1").retention_tier == "temp"
