"""The shortcuts of the fast paths answer exactly as the careful paths they skip.

* ``fsops.exists`` answers "absent" with one plain ``lstat``; a symlink on the
  way still counts as absent, even when its target holds the file.
* The cold rebuild reads a folder's files through one open folder
  (``index.DirCache``): the same entries as reading each file from the root,
  and a symlinked file or folder is still refused.
* Snapshot rows with plain ASCII ids skip the slow id check: every other row
  still goes through it, so a crafted row is refused either way.
* The like-for-like sqlite baseline (FTS5, OR of terms, ``bm25()``) of the
  benchmarks.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import orjson
import pytest

from md_cg import MdCG, Node, benchmark, fsops, index, snapshot
from md_cg.errors import UnsafePathError


def _store(root: Path, ids: list[str]) -> None:
    with MdCG(root, auto_compact=None) as s:
        for i, node_id in enumerate(ids):
            s.add(
                Node(
                    id=node_id,
                    layer="knowledge",
                    body=f"note {i} about rivers",
                    condition_space={"observation_position": f"geo{i % 2}"},
                )
            )


def test_exists_fast_negative_and_symlinked_folder(tmp_path: Path) -> None:
    root = tmp_path / "m"
    (root / "a").mkdir(parents=True)
    (root / "a" / "x.md").write_text("x")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "y.md").write_text("y")
    os.symlink(outside, root / "link")
    assert fsops.exists(str(root), "a/x.md") is True
    assert fsops.exists(str(root), "a/none.md") is False
    assert fsops.exists(str(root), "missing/x.md") is False
    assert fsops.exists(str(root), "a/x.md/deeper") is False  # a file on the way
    # The plain lstat finds outside/y.md through the symlink; the careful walk refuses it.
    assert os.path.lexists(root / "link" / "y.md")
    assert fsops.exists(str(root), "link/y.md") is False


def test_dir_cache_reads_the_same_entries_and_refuses_symlinks(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _store(root, ["k1", "k2", "k3", "k4"])
    scan = index.scan_files(str(root))
    rels = sorted(scan.files)
    assert len(rels) == 4 and len({r.rsplit("/", 1)[0] for r in rels}) == 2
    with index.DirCache(str(root)) as dirs:
        cached = [index.parse_file(str(root), rel, dirs).entry for rel in rels]
    plain = [index.parse_file(str(root), rel).entry for rel in rels]
    assert cached == plain
    folder = rels[0].rsplit("/", 1)[0]
    outside = tmp_path / "planted.md"
    outside.write_text('---\nid: "planted"\nlayer: "knowledge"\n---\nsecret\n')
    os.symlink(outside, root / folder / "planted.md")
    with index.DirCache(str(root)) as dirs:
        index.parse_file(str(root), rels[0], dirs)
        with pytest.raises(UnsafePathError, match="symlink"):
            index.parse_file(str(root), f"{folder}/planted.md", dirs)
    state = index.build_from_files(str(root))
    assert sorted(state.entries) == ["k1", "k2", "k3", "k4"]
    assert f"{folder}/planted.md" not in state.problems  # refused by the scan, never read


@pytest.mark.parametrize(
    ("node_id", "layer", "bucket", "plain"),
    [
        ("kp_88c45c06", "knowledge", "geo", True),
        ("kp_1", "knowledge", "cond_中国历史_10407d32", True),  # bucket: the cached full check
        ("kp_1", "knowledge", "a/b", False),
        ("kp_1", "knowledge", "x" * 129, False),
        ("n-1", "self", None, True),
        ("x" * 100, "self", None, True),
        ("x" * 101, "self", None, False),  # left to the full check (limits)
        ("a.b", "self", None, False),
        ("..", "self", None, False),
        ("秦统一", "knowledge", "geo", False),
        ("ok", "knowledge", "../up", False),
        ("ok", "self", "geo", False),  # a bucket on an unbucketed layer
        ("ok", "nolayer", None, False),
        (7, "self", None, False),
    ],
)
def test_plainly_safe_rows(node_id: object, layer: object, bucket: object, plain: bool) -> None:
    assert snapshot._plainly_safe(node_id, layer, bucket) is plain


def test_snapshot_with_unicode_ids_loads_and_a_crafted_id_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _store(root, ["k1", "河流笔记", "k3"])
    with MdCG(root) as s:
        s.compact_index()
    snap = snapshot.load(str(root))
    assert snap is not None and sorted(snap.state.entries) == ["k1", "k3", "河流笔记"]
    data = (root / ".mdcg" / "index.snapshot").read_bytes()
    # Rename one row's id to a path escape and fix the checksum: still refused.
    magic, rest = data[: len(snapshot.MAGIC)], data[len(snapshot.MAGIC) :]
    head, _, body = rest.partition(b"\n")
    header = orjson.loads(head)
    entries = body[: header["entries_len"]].replace(b'"k3"', b'"../k3"', 1)
    header["entries_len"], header["crc32"] = len(entries), zlib.crc32(entries)
    crafted = magic + orjson.dumps(header) + b"\n" + entries + body[len(body) - header["text_len"] :]
    got = snapshot.decode(crafted)
    assert isinstance(got, str) and got.startswith("unsafe (a row with id '../k3'")


def test_fts_or_query_and_ranked_lookup() -> None:
    assert benchmark.fts_or_query("river delta") == '"river" OR "delta"'
    assert benchmark.fts_or_query('say "hi"') == '"say" OR "hi"'
    assert benchmark.fts_or_query("秦统一六国（地理）") == '"秦统一六国" OR "地理"'
    assert benchmark.fts_or_query("--") == '"--"'


def test_time_sqlite_returns_the_ranked_ids(tmp_path: Path) -> None:
    nodes = [
        Node(id="a", layer="knowledge", body="river delta sediments"),
        Node(id="b", layer="knowledge", body="mountain glacier"),
        Node(id="c", layer="knowledge", body="the river mouth"),
    ]
    conn = benchmark.build_sqlite_fts(tmp_path / "b.db", nodes)
    try:
        times, ranked = benchmark.time_sqlite(conn, ["river delta", "glacier"])
    finally:
        conn.close()
    assert sorted(times) == ["FTS5 OR + bm25", "FTS5 trigram phrase", "LIKE"]
    assert all(len(ms) == 2 for ms in times.values())
    assert ranked == [["a", "c"], ["b"]]
