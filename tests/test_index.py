"""The index: log shards, snapshot, read-only open, sync, compaction, git."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import knowledge, no_writes, python_env, tree_listing

from md_cg import MdCG, Node, index, layout, nodefile


def populated(root: Path, n: int = 30) -> set[str]:
    with MdCG(root, auto_compact=None) as s:
        s.add_many([knowledge(f"k{i:03d}", domain=f"域{i % 4}") for i in range(n)])
        s.add(Node(id="self_1", layer="self", body="I like tea"))
        s.delete("k000")
        s.update("k001", layer="contextual")
        return set(s.ids())


def shard_files(root: Path) -> list[str]:
    return sorted(p.name for p in (root / ".mdcg" / "log").glob("*.jsonl"))


# -- open without / with snapshot ------------------------------------------------


def test_open_from_files_then_snapshot_gives_same_state(tmp_path: Path) -> None:
    root = tmp_path / "m"
    ids = populated(root)
    with MdCG(root) as s:
        assert s.loaded_from == "files"
        assert set(s.ids()) == ids
        entries = s.entries()
        report = s.compact_index()
        assert report.nodes == len(ids)
    # every writer above closed, so all their shards were removable
    assert shard_files(root) == []
    with MdCG(root) as s:
        assert s.loaded_from == "snapshot"
        assert s.entries() == entries


@pytest.mark.parametrize("damage", ["deleted", "truncated", "garbage", "empty"])
def test_damaged_snapshot_rebuilds_in_memory_and_writes_nothing(tmp_path: Path, damage: str) -> None:
    root = tmp_path / "m"
    ids = populated(root)
    with MdCG(root) as s:
        s.compact_index()
        expected = s.entries()
    snap = root / ".mdcg" / "index.snapshot"
    data = snap.read_bytes()
    if damage == "deleted":
        snap.unlink()
    elif damage == "truncated":
        snap.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        snap.write_bytes(b"\x00garbage" * 100)
    else:
        snap.write_bytes(b"")
    before = tree_listing(root)
    with no_writes() as attempts:
        s = MdCG(root)
        assert s.loaded_from == "files"
        assert set(s.ids()) == ids
        assert s.entries() == expected
        assert s.get("k002").id == "k002"
        s.health()
    assert attempts == []
    assert tree_listing(root) == before
    s.close()


def test_read_only_copy_can_be_opened_and_read(tmp_path: Path) -> None:
    root = tmp_path / "m"
    ids = populated(root)
    copy = tmp_path / "copy"
    shutil.copytree(root / "knowledge", copy / "knowledge")
    shutil.copytree(root / "self", copy / "self")
    before = tree_listing(copy)
    with no_writes() as attempts:
        s = MdCG(copy, create=False)
        assert set(s.ids()) == ids - {"k001"}
        assert s.get("self_1").body == "I like tea"
        assert s.health().nodes == len(ids) - 1
    assert attempts == []
    assert tree_listing(copy) == before


def test_snapshot_plus_tail(tmp_path: Path) -> None:
    root = tmp_path / "m"
    populated(root)
    with MdCG(root) as s:
        s.compact_index()
    with MdCG(root) as s:
        s.add(knowledge("after_snapshot"))
        s.delete("k005")
    with MdCG(root) as s:
        assert s.loaded_from == "snapshot"
        assert "after_snapshot" in s and "k005" not in s


def test_torn_last_line_of_a_shard_is_tolerated(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root, auto_compact=None) as s:
        s.add(knowledge("a"))
        s.add(knowledge("b"))
    (shard,) = (root / ".mdcg" / "log").glob("*.jsonl")
    with open(shard, "ab") as fh:
        fh.write(b'{"ts": 1, "seq": 9, "op": "put", "id": "c", "pa')
    with MdCG(root) as s:
        assert s.ids() == ["a", "b"]
        assert s.health().ok


def test_log_record_without_file_leaves_no_ghost(tmp_path: Path) -> None:
    """A writer killed between its intent record and the file write."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(knowledge("a"))
        s.compact_index()
    log = root / ".mdcg" / "log"
    log.mkdir(exist_ok=True)
    (log / "999999_dead.jsonl").write_bytes(
        b'{"ts": 5, "seq": 1, "op": "put", "id": "ghost", "path": "self/ghost.md"}\n'
        b'{"ts": 6, "seq": 2, "op": "del", "id": "a", "path": "'
        + index.canonical_path(MdCG(root).entry("a")).encode()
        + b'"}\n'
    )
    with MdCG(root) as s:
        # ghost has no file; "a" still has its file, so the unfinished delete did not happen
        assert s.ids() == ["a"]


def test_other_process_changes_visible_after_refresh(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root, refresh_interval=None) as reader:
        code = (
            "from md_cg import MdCG, Node\n"
            f"s = MdCG({str(root)!r})\n"
            "s.add(Node(id='from_child', layer='self', body='hi'))\n"
            "s.close()\n"
        )
        subprocess.run([sys.executable, "-c", code], check=True, env=python_env())
        assert "from_child" not in reader
        assert reader.refresh() == ["from_child"]
        assert reader.get("from_child").body == "hi"


def test_compaction_keeps_shards_of_live_processes(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root, auto_compact=None) as live, MdCG(root, auto_compact=None) as other:
        live.add(knowledge("live_1"))
        other.add(knowledge("other_1"))
        other_shard = other._engine.journal.shard
        other.close()
        report = live.compact_index()
        assert report.shards_removed == (other_shard,)
        assert report.shards_kept == (live._engine.journal.shard,)
        live.add(knowledge("live_2"))  # still appends to its kept shard
    with MdCG(root) as s:
        assert s.ids() == ["live_1", "live_2", "other_1"]


def test_rebuild_index_from_files(tmp_path: Path) -> None:
    root = tmp_path / "m"
    ids = populated(root)
    with MdCG(root) as s:
        s.compact_index()
    shutil.rmtree(root / ".mdcg")
    with MdCG(root) as s:
        report = s.rebuild_index()
        assert report.nodes == len(ids)
    with MdCG(root) as s:
        assert s.loaded_from == "snapshot"
        assert set(s.ids()) == ids


def test_a_writer_compacts_when_it_closes(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(knowledge("a"))
        assert not (root / ".mdcg" / "index.snapshot").exists()
    assert (root / ".mdcg" / "index.snapshot").exists()
    assert shard_files(root) == []
    with MdCG(root) as s:
        assert s.loaded_from == "snapshot"
        s.get("a")
    before = (root / ".mdcg" / "index.snapshot").stat().st_mtime_ns
    with MdCG(root) as s:  # wrote nothing: no compaction
        s.search("a")
    with MdCG(root, auto_compact=2) as s:
        s.add_many([knowledge("b"), knowledge("c")])  # 2 node changes logged
    assert (root / ".mdcg" / "index.snapshot").stat().st_mtime_ns != before


def test_many_short_lived_writers_keep_the_log_to_few_shards(tmp_path: Path) -> None:
    """Review (session 24): one write per handle (a CLI command each) left one shard per
    handle until auto_compact records were reached, so every open read one more file
    (19 ms a session at 500 shards, 75 ms at 2,500). A writer now compacts on close once
    the log has maintenance.SHARDS_DUE shards."""
    from md_cg.maintenance import SHARDS_DUE

    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add_many([knowledge(f"n{i}") for i in range(5)])
    counts = []
    for j in range(SHARDS_DUE + 6):
        with MdCG(root) as s:
            s.update(f"n{j % 5}", body=f"version {j}")
        counts.append(len(shard_files(root)))
    assert max(counts) == SHARDS_DUE - 1 and counts[SHARDS_DUE - 1] == 0 and counts[-1] == 6
    with MdCG(root) as s:
        assert s.ids() == [f"n{i}" for i in range(5)]
        assert s.get("n4").body == f"version {SHARDS_DUE + 5}"


def test_the_shards_due_grow_with_the_square_root_of_the_store() -> None:
    """Review round 2 (session 24): at 100k nodes the writer that compacted at 64 shards
    paid 1-4 s alone, every 64th command; a compaction costs with the store, a shard a
    little on each open, so the total is least near the square root of the node count."""
    from types import SimpleNamespace

    from md_cg.maintenance import SHARDS_DUE, shards_due

    def due(n: int) -> int:
        return shards_due(SimpleNamespace(state=SimpleNamespace(entries=range(n))))  # type: ignore[arg-type]

    assert [due(n) for n in (0, 4_000, 10_000, 100_000, 1_000_000)] == [SHARDS_DUE, 64, 100, 316, 1000]


def test_a_reader_of_a_fresh_clone_leaves_a_snapshot_for_the_next(tmp_path: Path) -> None:
    root = tmp_path / "m"
    ids = populated(root)
    clone = tmp_path / "clone"  # what git clone gives: the files, no .mdcg/
    for layer in ("knowledge", "self", "contextual"):
        shutil.copytree(root / layer, clone / layer)
    with MdCG(clone, read_only=True) as s:
        assert s.loaded_from == "files"
    assert not (clone / ".mdcg").exists()  # read_only writes nothing, ever
    with MdCG(clone) as s:
        assert s.loaded_from == "files"
        s.search("正文")
    assert (clone / ".mdcg" / "index.snapshot").exists()
    with MdCG(clone) as s:
        assert s.loaded_from == "snapshot"
        assert set(s.ids()) == ids


def test_sync_in_a_new_process_sees_a_hand_edit(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(knowledge("a"))
    path = next(root.glob("knowledge/*/a.md"))
    path.write_text(path.read_text(encoding="utf-8") + "more\n", encoding="utf-8")
    with MdCG(root) as s:
        assert s.sync().changed == ("a",)


# -- sync ------------------------------------------------------------------------


def test_sync_reports_hand_edit_copy_delete_and_move(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add_many([knowledge("edit"), knowledge("gone"), knowledge("moveme", domain="物理学")])
        s.add(Node(id="stay", layer="self", body="stays put"))
        s.compact_index()  # without a snapshot, opening would simply read the new files
    # a person edits, copies in, deletes and moves files
    edit_path = next(root.glob("knowledge/*/edit.md"))
    edit_path.write_text(
        edit_path.read_text(encoding="utf-8").replace("正文 edit", "改过了"), encoding="utf-8"
    )
    new = Node(id="copied_in", layer="self", body="from elsewhere")
    (root / "self" / "copied_in.md").write_text(nodefile.dumps(new), encoding="utf-8")
    next(root.glob("knowledge/*/gone.md")).unlink()
    src = next(root.glob("knowledge/*/moveme.md"))
    target_dir = root / "knowledge" / layout.bucket_dir("化学")
    target_dir.mkdir()
    os.replace(src, target_dir / "moveme.md")
    (root / "self" / "broken.md").write_text("---\nid: broken\n", encoding="utf-8")

    with MdCG(root) as s:
        h = s.health()
        assert sorted((f.kind, f.node_id or f.path) for f in h.findings) == [
            ("changed_file", "edit"),
            ("missing_file", "gone"),
            ("missing_file", "moveme"),
            ("unreadable_file", "self/broken.md"),
            ("untracked_file", "copied_in"),
            ("untracked_file", "moveme"),
        ]
        report = s.sync()
        assert report.added == ("copied_in",)
        assert report.changed == ("edit",)
        assert report.deleted == ("gone",)
        assert [(m.node_id, m.new_path) for m in report.moved] == [
            ("moveme", f"knowledge/{layout.bucket_dir('化学')}/moveme.md")
        ]
        assert report.malformed == (("self/broken.md", "the frontmatter has no closing '---' line"),)
        assert "改过了" in s.get("edit").body
        assert s.get("copied_in").body == "from elsewhere"
        assert "gone" not in s
        again = s.sync()
        assert again.added == again.changed == again.deleted == again.moved == ()
        # the moved file now sits outside the bucket its own tags name
        assert [(f.kind, f.node_id) for f in s.health().findings if f.kind != "unreadable_file"] == [
            ("misplaced_file", "moveme")
        ]
    # another process sees the reconciled state without syncing itself
    with MdCG(root) as s:
        assert set(s.ids()) == {"edit", "copied_in", "moveme", "stay"}
        assert s.entry("moveme").path.startswith(f"knowledge/{layout.bucket_dir('化学')}/")


def test_sync_removes_abandoned_temp_files_and_health_reports_them(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(knowledge("a"))
    bucket_dir = next(root.glob("knowledge/cond_*"))
    leftover = bucket_dir / ".a.md.999999.deadbeef.tmp"  # pid 999999 does not exist
    leftover.write_text("half a file")
    with MdCG(root) as s:
        assert [(f.kind, f.path) for f in s.health().findings] == [
            ("temp_file", leftover.relative_to(root).as_posix())
        ]
        report = s.sync()
        assert report.temp_removed == (leftover.relative_to(root).as_posix(),)
        assert not leftover.exists()
        assert s.health().ok


def test_duplicate_files_resolved_deterministically(tmp_path: Path) -> None:
    """Without a snapshot the open sees both copies and picks the newer one."""
    root = tmp_path / "m"
    with MdCG(root, auto_compact=None) as s:
        s.add(knowledge("dup"))
    original = next(root.glob("knowledge/*/dup.md"))
    newer = nodefile.read_node(original)
    newer.layer = "rejected"
    newer.updated_at = 2_000_000_000.0
    (root / "rejected" / "dup.md").write_text(nodefile.dumps(newer), encoding="utf-8")
    for _ in range(2):  # same answer every time
        with MdCG(root, auto_compact=None) as s:
            assert s.entry("dup").path == "rejected/dup.md"
            assert [f.kind for f in s.health().findings] == ["duplicate_id"]
    with MdCG(root) as s:
        report = s.sync()
        # Reported, never moved or deleted: which copy is right is a person's call.
        assert report.duplicates == (("dup", original.relative_to(root).as_posix()),)
        assert report.problems
        assert [(f.kind, f.path) for f in s.health().findings] == [
            ("duplicate_id", original.relative_to(root).as_posix())
        ]
    assert original.exists()
    assert not (root / ".mdcg" / "trash").exists()


def test_duplicate_copied_in_under_a_snapshot_is_found_by_sync(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(knowledge("dup"))
    assert (root / ".mdcg" / "index.snapshot").exists()
    original = next(root.glob("knowledge/*/dup.md"))
    newer = nodefile.read_node(original)
    newer.layer = "rejected"
    newer.updated_at = 2_000_000_000.0
    (root / "rejected" / "dup.md").write_text(nodefile.dumps(newer), encoding="utf-8")
    with MdCG(root) as s:
        assert [(f.kind, f.path) for f in s.health().findings] == [("untracked_file", "rejected/dup.md")]
        report = s.sync()
        assert [(m.node_id, m.new_path) for m in report.moved] == [("dup", "rejected/dup.md")]
        assert report.duplicates == (("dup", original.relative_to(root).as_posix()),)
        assert s.entry("dup").layer == "rejected"
        assert [f.kind for f in s.health().findings] == ["duplicate_id"]
        assert original.exists()


# -- git -------------------------------------------------------------------------


def git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    return subprocess.run(
        ["git", "-c", "core.quotePath=false", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_two_clones_merge_without_conflict_and_sync_to_the_union(tmp_path: Path) -> None:
    origin = tmp_path / "origin"
    with MdCG(origin) as s:
        s.add(knowledge("base"))
    git(origin, "init", "-q", "-b", "main")
    git(origin, "add", "-A")
    git(origin, "commit", "-qm", "base")
    assert git(origin, "ls-files").split() == [
        ".gitattributes",
        ".gitignore",
        f"knowledge/{layout.bucket_dir('计算机科学')}/base.md",
    ]
    a, b = tmp_path / "a", tmp_path / "b"
    git(tmp_path, "clone", "-q", str(origin), str(a))
    git(tmp_path, "clone", "-q", str(origin), str(b))
    with MdCG(a) as s:
        s.add_many([knowledge(f"a{i}") for i in range(5)])
        s.add(Node(id="a_self", layer="self", body="added in clone a"))
        s.compact_index()
    with MdCG(b) as s:
        s.add_many([knowledge(f"b{i}", domain="物理学") for i in range(5)])
    for clone, name in ((a, "a"), (b, "b")):
        assert git(clone, "status", "--porcelain", "--ignored").count(".mdcg") == 1
        git(clone, "add", "-A")
        git(clone, "commit", "-qm", name)
        git(clone, "push", "-q", "origin", f"HEAD:{name}")
    git(a, "fetch", "-q", "origin")
    git(a, "merge", "-q", "--no-edit", "origin/b")
    git(b, "fetch", "-q", "origin")
    git(b, "merge", "-q", "--no-edit", "origin/a")
    union = {"base", "a_self", *(f"a{i}" for i in range(5)), *(f"b{i}" for i in range(5))}
    for clone in (a, b):
        with MdCG(clone) as s:
            s.sync()
            assert set(s.ids()) == union
            assert s.health().ok


def test_flush_text_in_batches_equals_one_by_one(tmp_path, monkeypatch):
    from md_cg import index
    from md_cg.sample import build_nodes

    nodes = build_nodes(knowledge=300, seed=5)
    assert any(n.layer in ("rejected", "unresolved") for n in nodes)

    def state_of(batch_min: int, docs: int, chars: int):
        monkeypatch.setattr(index, "TEXT_BATCH_MIN", batch_min)
        monkeypatch.setattr(index, "TEXT_BATCH_DOCS", docs)
        monkeypatch.setattr(index, "TEXT_BATCH_CHARS", chars)
        state = index.IndexState()
        for node in nodes:
            state.put(index.make_entry(node, f"{node.layer}/{node.id}.md", 1, 1), index.index_text(node))
        assert state.flush_text() == len(nodes)
        return state

    one = state_of(10**9, 1000, 10**6)
    for docs, chars in ((1000, 10**6), (50, 10**6), (1000, 3000)):
        many = state_of(64, docs, chars)
        assert many.text.to_bytes() == one.text.to_bytes()
        assert many.negative_terms == one.negative_terms and many.negative_terms
        hits = many.text.match([(t, 1.0) for t in index.query_terms("知识点 应用")], many.text.scope(), k=10)
        assert hits and hits == one.text.match(
            [(t, 1.0) for t in index.query_terms("知识点 应用")], one.text.scope(), k=10
        )


def test_text_batches_cut_by_count_and_characters(monkeypatch):
    from md_cg import index

    monkeypatch.setattr(index, "TEXT_BATCH_DOCS", 3)
    monkeypatch.setattr(index, "TEXT_BATCH_CHARS", 10)
    items = [(str(i), ("x" * size, 0, -1, 0.5)) for i, size in enumerate([4, 4, 4, 1, 1, 1, 1, 30, 2])]
    got = [[i for i, _ in b] for b in index._text_batches(items)]
    assert got == [["0", "1"], ["2", "3", "4"], ["5", "6"], ["7"], ["8"]]


@pytest.mark.parametrize("chunk", [1, 3, 64])
def test_build_from_files_in_chunks_equals_one_file_at_a_time(tmp_path: Path, monkeypatch, chunk) -> None:
    root = tmp_path / "m"
    populated(root, 20)
    knowledge_dir = root / "self"
    (knowledge_dir / "bad_yaml.md").write_text("---\nid: [unclosed\n---\nx\n", encoding="utf-8")
    (knowledge_dir / "bad_utf8.md").write_bytes(b'---\nid: "x"\n---\n\xff\n')
    (knowledge_dir / "a_bad_layer.md").write_text('---\nid: "a_bad_layer"\nlayer: "nope"\n---\nx\n', "utf-8")
    (knowledge_dir / "plain_note.md").write_text("just a note about tea\n", encoding="utf-8")
    (knowledge_dir / "b_big.md").write_bytes(b"x" * (index.MAX_FILE_BYTES + 1))  # refused when read
    (root / "anchor" / "self_1.md").write_text(
        '---\nid: "self_1"\nlayer: "anchor"\n---\nolder copy\n', "utf-8"
    )

    def reference() -> index.IndexState:  # one file through every stage at a time, as before
        state = index.IndexState()
        by_id: dict[str, list[index.Parsed]] = {}
        with index.DirCache(str(root)) as dirs:
            for rel in sorted(index.scan_files(str(root)).files):
                try:
                    parsed = index.parse_file(str(root), rel, dirs)
                except (index.MalformedNodeFileError, index.UnsafePathError) as exc:
                    state.problems[rel] = exc.reason
                else:
                    by_id.setdefault(parsed.entry.id, []).append(parsed)
        for node_id, copies in by_id.items():
            best = index.winner(copies)
            if len(copies) > 1:
                state.duplicates[node_id] = sorted(p.entry.path for p in copies if p is not best)
            state.put(best.entry, best.text)
        return state

    monkeypatch.setattr(index, "BUILD_CHUNK", chunk)
    ticks: list[int] = []
    got = index.build_from_files(str(root), progress=ticks.append)
    want = reference()
    assert sum(ticks) == len(index.scan_files(str(root)).files)
    assert list(got.problems.items()) == list(want.problems.items())
    assert list(got.problems) == [
        "self/a_bad_layer.md",
        "self/b_big.md",
        "self/bad_utf8.md",
        "self/bad_yaml.md",
    ]
    assert got.duplicates == want.duplicates == {"self_1": ["anchor/self_1.md"]}
    assert list(got.entries.items()) == list(want.entries.items())
    assert got.pending_text == want.pending_text
