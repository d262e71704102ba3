"""The MdCG facade: add/get/update/delete, moves, refusals, durability, health."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import knowledge, node_tree, python_env

from md_cg import MdCG, Node, NodeHasIncomingEdgesError, fsops, layout, nodefile
from md_cg.errors import (
    DuplicateIdError,
    InvalidArgumentError,
    InvalidNodeError,
    NodeNotFoundError,
    NotAStoreError,
    StoreClosedError,
    UnknownLayerError,
    UnsafeIdError,
)
from md_cg.node import LAYERS


def bucket(domain: str) -> str:
    return layout.bucket_dir(layout.normalize_domain(domain))


def test_init_creates_layers_and_gitignore(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as s:
        assert len(s) == 0
    names = sorted(p.name for p in (tmp_path / "m").iterdir())
    assert names == [
        ".gitattributes",
        ".gitignore",
        ".mdcg",
        "anchor",
        "contextual",
        "knowledge",
        "rejected",
        "self",
        "structural",
        "unresolved",
    ]
    assert ".mdcg/*" in (tmp_path / "m" / ".gitignore").read_text()
    # every new store routes its node files (archived ones too) to the merge driver
    assert (tmp_path / "m" / ".gitattributes").read_text().splitlines() == [
        "# md-cg: merge node files field by field (docs/git.md)",
        *(f"{layer}/**/*.md merge=mdcg" for layer in (*LAYERS, "archive")),
    ]


def test_open_missing_folder_without_create(tmp_path: Path) -> None:
    with pytest.raises(NotAStoreError, match="no such folder"):
        MdCG(tmp_path / "nope", create=False)
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotAStoreError, match="not a folder"):
        MdCG(tmp_path / "file")


def test_add_get_round_trip_and_paths(any_store: MdCG) -> None:
    node = knowledge("kp_1", importance=0.8, confidence=0.6)
    stored = any_store.add(node)
    assert stored.created_at is not None
    path = any_store.root / "knowledge" / bucket("计算机科学") / "kp_1.md"
    assert path.read_text(encoding="utf-8") == nodefile.dumps(stored)
    assert any_store.get("kp_1") == stored
    assert any_store.entry("kp_1").path == f"knowledge/{bucket('计算机科学')}/kp_1.md"
    assert any_store.ids() == ["kp_1"]
    assert "kp_1" in any_store


def test_add_with_keywords_generates_id(store: MdCG) -> None:
    node = store.add(layer="self", body="I prefer tea")
    # a readable id: a slug of the first line plus a short random suffix
    assert re.fullmatch(r"i-prefer-tea-[0-9a-f]{6}", node.id)
    assert store.get(node.id).body == "I prefer tea"
    assert (store.root / "self" / f"{node.id}.md").exists()


def test_layers_go_to_their_folders(store: MdCG) -> None:
    for layer in ("anchor", "structural", "contextual", "self", "rejected", "unresolved"):
        store.add(Node(id=f"x_{layer}", layer=layer, body=f"a note in {layer}"))
        assert (store.root / layer / f"x_{layer}.md").exists()
    store.add(Node(id="k_orphan", layer="knowledge", body="no domain"))
    assert (store.root / "knowledge" / "orphan" / "k_orphan.md").exists()


def test_duplicate_id_refused_and_overwrite(store: MdCG) -> None:
    store.add(knowledge("a"))
    before = (store.root / store.entry("a").path).read_bytes()
    with pytest.raises(DuplicateIdError) as err:
        store.add(knowledge("a", body="other"))
    assert str(err.value).startswith("node id 'a' already exists at knowledge/cond_")
    assert (store.root / store.entry("a").path).read_bytes() == before
    store.add(knowledge("a", body="other"), overwrite=True)
    assert store.get("a").body == "other"


def test_overwrite_with_identical_bytes_leaves_the_file_untouched(store: MdCG) -> None:
    node = knowledge("a", created_at=1.0)
    store.add(node)
    path = store.root / store.entry("a").path
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    store.add(knowledge("a", created_at=1.0), overwrite=True)
    assert path.stat().st_mtime_ns == 1_000_000_000


def test_overwrite_into_another_bucket_moves_the_file(store: MdCG) -> None:
    store.add(knowledge("a", domain="物理学"))
    old = store.root / store.entry("a").path
    store.add(knowledge("a", domain="化学"), overwrite=True)
    assert not old.exists()
    assert store.entry("a").path == f"knowledge/{bucket('化学')}/a.md"
    assert store.get("a").updated_at is not None


@pytest.mark.parametrize(
    ("node", "exc", "message"),
    [
        (Node(id="../x", layer="self"), UnsafeIdError, "unsafe node id '../x': it contains '..'"),
        (Node(id="a/b", layer="self"), UnsafeIdError, "unsafe node id 'a/b': it contains the character '/'"),
        (Node(id="", layer="self"), UnsafeIdError, "unsafe node id '': it is empty"),
        (Node(id="a\x00", layer="self"), UnsafeIdError, "it contains the character '\\x00'"),
        (Node(id="y" * 200, layer="self"), UnsafeIdError, "it is 200 characters long (max 128)"),
        (Node(id="ok", layer="attic"), UnknownLayerError, "node 'ok': unknown layer 'attic'"),
        (
            Node(id="ok", layer="self", verification_basis="gut"),
            InvalidNodeError,
            "node 'ok': field 'verification_basis' must be one of compiler, test, measurement, "
            "formal_proof, data, other (or absent) (got 'gut')",
        ),
    ],
)
def test_refused_input_names_the_value_and_loses_nothing(
    store: MdCG, node: Node, exc: type[Exception], message: str
) -> None:
    store.add(knowledge("keep_1"))
    store.add(Node(id="keep_2", layer="self", body="x"))
    before = node_tree(store.root)
    with pytest.raises(exc) as err:
        store.add(node)
    assert message in str(err.value)
    assert node_tree(store.root) == before
    assert store.ids() == ["keep_1", "keep_2"]
    with MdCG(store.root) as fresh:
        assert fresh.ids() == ["keep_1", "keep_2"]


def test_add_many_is_all_or_nothing_on_bad_input(store: MdCG) -> None:
    with pytest.raises(UnknownLayerError):
        store.add_many([knowledge("a"), Node(id="b", layer="nope"), knowledge("c")])
    assert store.ids() == []
    with pytest.raises(DuplicateIdError) as raised:
        store.add_many([knowledge("a"), knowledge("a")])
    assert str(raised.value) == "node id 'a' appears twice in this batch; give each memory its own id"
    assert store.ids() == []
    store.add_many([knowledge(f"k{i}") for i in range(5)])
    assert store.ids() == [f"k{i}" for i in range(5)]


def test_an_id_twice_in_one_batch_is_told_in_its_own_words(store: MdCG) -> None:
    """Case twins in one add_many batch were refused with the default wording ("already
    exists at this batch (as 'zz')"), so DuplicateIdError.plain was true and the CLI and
    MCP reworded it as a stored memory to update or overwrite (mdcg add --overwrite)."""
    from md_cg.cli import message
    from md_cg.mcp_server import _hinted

    with pytest.raises(DuplicateIdError) as raised:
        store.add_many([knowledge("zz"), knowledge("k1"), knowledge("ZZ")])
    exc = raised.value
    words = (
        "node id 'ZZ' appears twice in this batch (also as 'zz'): ids that differ only by letter "
        "case or Unicode normalisation are one file on macOS and Windows; give each memory its own id"
    )
    assert (str(exc), exc.node_id, exc.plain) == (words, "ZZ", False)
    assert store.ids() == []
    assert message(exc) == words  # the library's own words, not "... mdcg add --overwrite"
    assert _hinted(exc) == words


def test_unknown_field_keywords_are_refused(store: MdCG) -> None:
    with pytest.raises(InvalidNodeError, match=r"unknown node field\(s\): colour"):
        store.add(id="a", layer="self", colour="red")
    store.add(Node(id="a", layer="self", body="a"))
    with pytest.raises(InvalidNodeError, match="cannot update field\\(s\\) id of node 'a'"):
        store.update("a", id="b")


def test_update_changes_fields_and_stamps(store: MdCG) -> None:
    store.add(knowledge("a", confidence=0.5))
    node = store.update("a", confidence=0.7, extra={"note": "x"})
    assert node.confidence == 0.7
    again = store.get("a")
    assert again.confidence == 0.7
    assert again.extra == {"note": "x"}
    assert again.updated_at is not None


def test_update_moving_layers_is_a_move(store: MdCG) -> None:
    store.add(knowledge("a"))
    old = store.root / store.entry("a").path
    store.move("a", "contextual")
    assert not old.exists()
    assert (store.root / "contextual" / "a.md").exists()
    assert store.entry("a").layer == "contextual"
    with MdCG(store.root) as fresh:
        assert fresh.entry("a").path == "contextual/a.md"


def test_update_unknown_id(store: MdCG) -> None:
    with pytest.raises(NodeNotFoundError, match="no node with id 'ghost' in this store"):
        store.update("ghost", confidence=0.1)
    with pytest.raises(NodeNotFoundError):
        store.get("ghost")


def test_invalid_update_changes_nothing(store: MdCG) -> None:
    store.add(knowledge("a"))
    before = node_tree(store.root)
    with pytest.raises(InvalidNodeError, match="between 0 and 1"):
        store.update("a", confidence=3)
    assert node_tree(store.root) == before


def test_a_refused_delete_of_a_hub_names_twenty_sources(store: MdCG) -> None:
    """Review (session 24): 50k incoming edges made an 889 KB message."""
    store.add(knowledge("hub"))
    store.add_many([knowledge(f"s{i:03d}", edges=[{"target": "hub", "type": "causal"}]) for i in range(130)])
    with pytest.raises(NodeHasIncomingEdgesError) as err:
        store.delete("hub")
    named = ", ".join(f"s{i:03d} (causal)" for i in range(20))
    assert str(err.value) == (
        f"node 'hub' has incoming edges from {named} and 110 more; delete with force=True "
        "to leave them dangling, or remove the edges first"
    )
    assert len(err.value.incoming) == 130


def test_delete_and_incoming_edges(store: MdCG) -> None:
    store.add(knowledge("target"))
    store.add(knowledge("src", edges=[{"target": "target", "type": "causal"}]))
    with pytest.raises(NodeHasIncomingEdgesError) as err:
        store.delete("target")
    assert str(err.value) == (
        "node 'target' has incoming edges from src (causal); delete with force=True "
        "to leave them dangling, or remove the edges first"
    )
    assert "target" in store
    result = store.delete("target", force=True)
    assert result.incoming == (("src", "causal"),)
    assert result.node.id == "target"
    assert "target" not in store
    health = store.health()
    assert [(f.kind, f.node_id) for f in health.findings] == [("dangling_edge", "src")]
    with pytest.raises(NodeNotFoundError):
        store.delete("target")


def test_health_names_an_edge_to_itself_that_add_many_carried(store: MdCG) -> None:
    # add refuses a self edge; the import path (add_many) carries what the source holds,
    # and health then says so instead of staying silent.
    store.add_many(
        [knowledge("loop", edges=[{"target": "loop", "type": "causal"}]), knowledge("plain")], checked=False
    )
    health = store.health()
    assert [(f.kind, f.node_id, f.severity) for f in health.findings] == [("self_edge", "loop", "warning")]
    assert health.findings[0].detail == (
        "causal edge to itself; edges link two memories: remove it from the file"
    )
    assert store.root / health.findings[0].path == store.path_of("loop")


def test_closed_store_refuses_use(tmp_path: Path) -> None:
    s = MdCG(tmp_path / "m")
    s.close()
    with pytest.raises(StoreClosedError):
        s.add(Node(id="a", layer="self"))


def _fsync_log(monkeypatch: pytest.MonkeyPatch, root: Path) -> list[str]:
    """Record every fsync as the path it reached, relative to ``root``: a temp
    file as ``<folder>/.tmp``, a live shard as ``<log>/shard``."""
    calls: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        rel = os.path.relpath(os.readlink(f"/proc/self/fd/{fd}"), root)
        parent, name = os.path.split(rel)
        if name.endswith(".tmp"):
            rel = f"{parent}/.tmp"
        elif name.endswith(".jsonl"):
            rel = f"{parent}/shard"
        calls.append(rel)  # list.append is atomic: safe from the fsync threads
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return calls


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="maps fds to paths through /proc")
def test_durable_writes_fsync_files_folders_and_log_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        calls = _fsync_log(monkeypatch, root)
        s.add(knowledge("fast"))
        assert calls == []
        bucket = os.path.dirname(layout.rel_path(s.get("fast")))
        s.add(knowledge("slow"), durable=True)
        # the temp file and the commit line (and, once, the shard's folder, which
        # holds its name) together, before the rename; then the rename's folder
        assert sorted(calls[:3]) == [".mdcg/log", ".mdcg/log/shard", f"{bucket}/.tmp"]
        assert calls.index(".mdcg/log/shard") < calls.index(".mdcg/log")
        assert calls[3:] == [bucket]
        calls.clear()
        s.add_many([knowledge(f"b{i}") for i in range(20)], durable=True)
        assert sorted(calls[:21]) == [".mdcg/log/shard"] + [f"{bucket}/.tmp"] * 20
        assert calls[21:] == [bucket]
        calls.clear()
        s.add_many([knowledge(f"g{i}", domain=f"d{i % 2}") for i in range(40)], durable=True)
        new = sorted({os.path.dirname(layout.rel_path(s.get(f"g{i}"))) for i in range(2)})
        # the 40 temp files, the line and the parent of the two new bucket folders
        # (once: they share it) together, then both folders
        expected = [".mdcg/log/shard", "knowledge"] + [f"{new[0]}/.tmp"] * 20 + [f"{new[1]}/.tmp"] * 20
        assert sorted(calls[:42]) == expected
        assert sorted(calls[42:]) == new


def test_fsync_all_runs_on_threads_and_raises_the_first_error(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    for i in range(40):
        (tmp_path / "d" / f"f{i}").write_bytes(b"x")
    seen: list[tuple[int, str | None]] = []

    with fsops.Dir(str(tmp_path), "d") as d:

        def call(name: str | None) -> Callable[[], None]:
            def run() -> None:
                seen.append((threading.get_ident(), name))
                d.fsync() if name is None else d.fsync_file(name)
                time.sleep(0.005)  # (on a loaded machine every thread still gets some)

            return run

        calls = [call(f"f{i}") for i in range(40)]
        me = threading.get_ident()
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(fsops, "FSYNC_SLOW_SECONDS", 0.0)  # the probe finds every fsync slow
            fsops.fsync_all([*calls, call(None)], threads=4)
            # the probe's calls on this thread, then the rest on four threads (this one too)
            assert [ident for ident, _ in seen[: fsops.FSYNC_PROBE]] == [me] * fsops.FSYNC_PROBE
            assert len({ident for ident, _ in seen}) == 4
            assert sorted(name or "" for _, name in seen) == sorted(["", *(f"f{i}" for i in range(40))])
            with pytest.raises(FileNotFoundError) as err:
                fsops.fsync_all([*calls, call("missing")], threads=4)
            assert err.value.filename == "missing"
            assert threading.active_count() == 1  # every fsync thread joined
            seen.clear()
            fsops.fsync_all(calls, threads=1)
            assert {ident for ident, _ in seen} == {me} and len(seen) == 40
        seen.clear()
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(fsops, "FSYNC_SLOW_SECONDS", 3600.0)  # fast fsyncs: no thread is worth it
            fsops.fsync_all(calls, threads=4)
            assert {ident for ident, _ in seen} == {me} and len(seen) == 40


def test_health_reports_layer_counts_and_is_clean(store: MdCG) -> None:
    store.add(knowledge("a"))
    store.add(Node(id="s", layer="self", body="a self note"))
    h = store.health()
    assert h.ok, h.findings
    assert h.nodes == 2
    assert h.layers["knowledge"] == 1 and h.layers["self"] == 1 and h.layers["anchor"] == 0


def test_health_flags_degraded_buckets_on_a_large_store(store: MdCG) -> None:
    store.add_many([knowledge(f"k{i}", domain="only") for i in range(120)])
    h = store.health()
    assert [f.kind for f in h.findings] == ["bucket_degraded"]
    assert h.buckets.largest_share == 1.0
    assert h.buckets.degraded


@pytest.mark.parametrize("threads", [1, 4])
def test_the_benchmarks_durable_floor_writes_the_engines_bytes(tmp_path: Path, threads: int) -> None:
    from md_cg import benchmark

    nodes = benchmark.corpus(30)
    rate = benchmark._raw_floor(tmp_path / "raw", nodes, durable=True, batch=8, threads=threads)
    assert rate > 0
    raw = tmp_path / "raw"
    written = {p.relative_to(raw).as_posix(): p.read_bytes() for p in raw.rglob("*.md")}
    assert written == {layout.rel_path(n): nodefile.dumps(n).encode() for n in nodes}
    assert list((tmp_path / "raw").rglob(".*.tmp")) == []


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="maps fds to paths through /proc")
def test_a_durable_atomic_write_makes_its_new_folders_durably(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "r"
    root.mkdir()
    calls = _fsync_log(monkeypatch, root)
    fsops.atomic_write(str(root), "x/y/f.bin", b"data", durable=True)
    # each folder made has its parent fsynced, then the file, then its folder
    assert calls == [".", "x", "x/y/.tmp", "x/y"]
    calls.clear()
    fsops.atomic_write(str(root), "x/y/g.bin", b"data", durable=True)
    assert calls == ["x/y/.tmp", "x/y"]
    made: list[str] = []
    with fsops.Dir(str(root), "x/z/w", create=True, made=made):
        pass
    assert made == ["x/z", "x/z/w"] and calls == ["x/y/.tmp", "x/y"]


def test_durable_rounds_alternate_the_order_and_clean_up(tmp_path: Path) -> None:
    from md_cg import benchmark

    rows = benchmark.durable_rounds(20, 2, work=tmp_path / "w")
    assert [r.measure.split(":")[0] for r in rows] == [
        "round 1 (ours, serial, concurrent)",
        "round 2 (concurrent, serial, ours)",
    ]
    assert all(r.n == 20 and "16 fsyncs at a time" in r.baseline for r in rows)
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"refresh_interval": "x"},
            "refresh_interval must be a finite number of seconds >= 0 or None, got 'x'",
        ),
        ({"lock_timeout": "x"}, "lock_timeout must be a finite number of seconds >= 0, got 'x'"),
        ({"lock_timeout": -1}, "lock_timeout must be a finite number of seconds >= 0, got -1"),
        ({"lock_timeout": float("nan")}, "lock_timeout must be a finite number of seconds >= 0, got nan"),
        ({"auto_compact": "x"}, "auto_compact must be a whole number >= 1 or None, got 'x'"),
        ({"auto_compact": 2.5}, "auto_compact must be a whole number >= 1 or None, got 2.5"),
        ({"durable": "no"}, "durable must be True or False, got 'no'"),
        ({"read_only": 1}, "read_only must be True or False, got 1"),
    ],
)
def test_options_of_the_wrong_kind_are_refused_when_given(
    tmp_path: Path, options: dict, message: str
) -> None:
    """MdCG(refresh_interval="x") opened, then get/len/search raised TypeError; a bad
    lock_timeout failed in add, auto_compact in close. Now the open refuses, naming it."""
    with pytest.raises(InvalidArgumentError) as err:
        MdCG(tmp_path / "m", **options)
    assert str(err.value) == message and err.value.name == next(iter(options))
    assert not (tmp_path / "m").exists()


def test_misused_calls_say_what_they_take(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as s:
        s.add(id="a", body="x")
        with pytest.raises(InvalidArgumentError, match=r"^ids must be a node id or ids, got None$"):
            s.archive(None)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"^a change must return a Node or None, got int$"):
            s.modify("a", lambda n: 5)  # type: ignore[arg-type,return-value]
        assert s.get("a").body == "x" and s.ids() == ["a"]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"tags": ["ok", " "]}, "node 'x': field 'tags' holds a blank tag (' '); a tag needs some text"),
        (
            {"edges": [{"target": "x", "type": "causal"}]},
            "node 'x': an edge to itself (causal); edges link two memories",
        ),
        (
            {"edges": [{"target": "b", "type": "causal", "confidence": 7}]},
            "node 'x': the edge to 'b' has confidence 7; it must be 0..1",
        ),
        ({"body": "# \n\n##\n"}, "node 'x': the body holds only heading marks (#); a memory needs some text"),
    ],
)
def test_hand_written_memories_hold_nothing_a_read_cannot_use(
    tmp_path: Path, fields: dict, message: str
) -> None:
    """A blank tag was stored though the tag filter refuses one; an edge to itself was
    stored though neighbours never shows it; an edge confidence of 7; a body of heading
    marks alone. add and update refuse them, nothing written; files and imports carry them."""
    with MdCG(tmp_path / "m") as s:
        s.add(id="b", body="the other memory")
        with pytest.raises(InvalidNodeError) as err:
            s.add(id="x", **{"body": "a memory", **fields})
        assert str(err.value) == message
        s.add(id="x", body="a memory")
        before = s.path_of("x").read_bytes()
        with pytest.raises(InvalidNodeError) as err:
            s.update("x", **fields)
        assert str(err.value) == message
        assert s.path_of("x").read_bytes() == before
        if "tags" in fields:  # what a file holds is still read, and add_many carries it
            s.add_many([Node(id="y", body="imported", tags=fields["tags"])], checked=False)
            assert s.get("y").tags == fields["tags"]


@pytest.mark.parametrize(
    ("tags", "message"),
    [
        (["\u200b"], "field 'tags' holds a blank tag ('\\u200b'); a tag needs some text"),
        (["a\nb"], "field 'tags' holds a tag with a control character ('a\\nb'); a tag is one line of text"),
    ],
)
def test_invisible_and_multi_line_tags_are_refused(tmp_path: Path, tags: list, message: str) -> None:
    with MdCG(tmp_path / "m") as s:
        with pytest.raises(InvalidNodeError) as err:
            s.add(id="x", body="a memory", tags=tags)
        assert str(err.value) == f"node 'x': {message}"
        assert s.add(id="y", body="a memory", tags=["c++", "🚀", "数学"]).tags == ["c++", "🚀", "数学"]
        with pytest.raises(InvalidNodeError, match="holds only heading marks"):
            s.add(id="z", body="＃＃ \n")


def test_health_names_a_forgotten_node_whose_file_came_back(tmp_path: Path) -> None:
    """A merge that kept another clone's edit of a forgotten memory brought it back and
    nothing said so; a node added again under the id after the forget is new, not named."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(knowledge("gym", body="The user goes to the gym on Mondays"))
        s.add(knowledge("again", body="The user swims"))
        rel = s.entry("gym").path
        text = (root / rel).read_bytes()
        s.forget("gym", "wrong")
        s.forget("again", "tidy")
        s.add(knowledge("again", body="The user swims on Fridays"))
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(text)  # what git brings back
        report = s.sync()  # the sync that takes it in says so (a pull's hook exits 1 then)
        assert (report.added, report.returned, report.problems) == (("gym",), (("gym", rel),), True)
        found = [(f.kind, f.node_id, f.path) for f in s.health().findings]
        assert found == [("forgotten_returned", "gym", rel)]
        detail = s.health().findings[0].detail
        assert detail.startswith("forgotten in this clone on ") and detail.endswith(
            " (wrong); its file is back: forget it again, or keep it (mdcg keep)"
        )
        assert len(detail) <= 160  # the advice survives an MCP reply's clip
        with pytest.raises(InvalidArgumentError, match="'again' is not a memory forgotten in this clone"):
            s.keep_returned("again")  # added again after its forget: a new memory
        s.keep_returned("gym")
        assert s.health().findings == () and s.get("gym").body == "The user goes to the gym on Mondays"
        s.forget("gym", "wrong, again")
        (root / rel).write_bytes(text)
        assert s.sync().returned == (("gym", rel),)  # forgotten again, back again: told again
        s.forget("gym", "wrong, again")
        assert s.health().findings == ()


def test_health_names_a_node_file_moved_outside_the_layer_folders(tmp_path: Path) -> None:
    """`git mv knowledge/.../kp_deadline.md notes/` (or to the root): the memory left every
    read and health said OK. A README or other Markdown without node frontmatter is not named."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(knowledge("kp_deadline", body="The Atlas deadline is in March"))
        rel = s.entry("kp_deadline").path
    (root / "notes" / "deep").mkdir(parents=True)
    (root / rel).rename(root / "notes" / "kp_deadline.md")
    (root / "README.md").write_text("# My memory\n\nNotes of the agent.\n", encoding="utf-8")
    (root / "notes" / "deep" / "plain.md").write_text("---\ntitle: x\n---\nnot a node\n", encoding="utf-8")
    with MdCG(root) as s:
        s.sync()
        found = [(f.kind, f.node_id, f.path, f.detail) for f in s.health().findings]
        assert found == [
            (
                "stray_file",
                "kp_deadline",
                "notes/kp_deadline.md",
                "a node file (layer knowledge) outside the layer folders: md-cg does not read it; "
                "move it into knowledge/ and run sync()",
            )
        ]


def test_a_problem_of_a_memory_without_an_id_does_not_name_the_id_it_would_get(tmp_path: Path) -> None:
    """``mdcg add --edge kp_2:badtype "edge test"`` said ``node 'edge-test-69ddcc': ...``, an id
    the caller never gave and that was never stored (reviewer's find)."""
    with MdCG(tmp_path / "m") as s:
        cases = [
            (
                {"body": "# \n"},
                "body",
                "the new memory: the body holds only heading marks (#); a memory needs some text",
            ),
            (
                {"body": "x", "importance": 7},
                "importance",
                "the new memory: field 'importance' must be a number between 0 and 1 (got 7)",
            ),
        ]
        for fields, field, message in cases:
            with pytest.raises(InvalidNodeError) as err:
                s.add(**fields)
            assert (str(err.value), err.value.field, err.value.node_id) == (message, field, None)
            with pytest.raises(InvalidNodeError, match=r"^the new memory: "):
                s.add_unique(**fields)
        with pytest.raises(InvalidNodeError, match=r"^node 'given': field 'importance'"):
            s.add(id="given", body="x", importance=7)  # an id the caller gave is named
        assert len(s) == 0


def test_keep_returned_sees_a_forget_made_since_by_another_process(tmp_path: Path) -> None:
    """A handle that had seen the memory come back kept it after another process had
    forgotten it again, and the restored record cancelled that forget (reviewer's find)."""
    root = tmp_path / "m"
    s = MdCG(root)
    s.add(knowledge("x", body="secret"))
    p = s.path_of("x")
    text = p.read_bytes()
    s.forget("x", "first")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(text)
    assert s.sync().returned == (("x", s.entry("x").path),)
    code = f"from md_cg import MdCG; MdCG({str(root)!r}).forget('x', 'asked again')"
    subprocess.run([sys.executable, "-c", code], check=True, env=python_env())
    with pytest.raises(NodeNotFoundError):
        s.keep_returned("x")
    assert [r["event"] for r in s.log("audit").read()] == ["forget", "forget"]
    s.close()
