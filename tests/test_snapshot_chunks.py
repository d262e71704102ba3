"""An open reads the snapshot's eager part only; the rows' JSON and the postings are read and
checked chunk by chunk on first use, and a damaged chunk is never used.

The stores here are written with 2 KiB chunks (instead of 64 KiB), so that
even a small store has many chunks of each lazy region; every test compares
with a cold build from the files (entries field by field, search results id
by id and score by score).
"""

from __future__ import annotations

import contextlib
import gc
import os
import subprocess
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import orjson
import pytest
from conftest import no_writes, tree_listing

from md_cg import MdCG, Node, SnapshotDamageError, benchmark, index, snapshot
from md_cg import textindex_codec as codec
from md_cg.errors import StoreClosedError
from md_cg.text import analyze

CHUNK = 2048
#: the first reads the postings of its terms only; "binary search ..." and "photosynthesis ..." use
#: pseudo-relevance feedback, which reads every posting
QUERIES = [
    "秦统一六国",
    "计算机网络",
    "the history of mathematics",
    "conclusion answers",
    "binary search sorted array",
    "photosynthesis light energy",
]


def _chunked_store(root: Path, knowledge: int) -> Path:
    """``knowledge`` nodes plus the seed's others (CJK and English), the snapshot in 2 KiB chunks."""
    mp = pytest.MonkeyPatch()
    mp.setattr(codec, "CHUNK", CHUNK)
    try:
        with MdCG(root, auto_compact=None) as s:
            s.add_many(benchmark.corpus(knowledge), stamp=False)
            s.compact_index()
    finally:
        mp.undo()
    return root


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """400 knowledge nodes and the seed's others: 100 chunks of rows, 222 of postings."""
    return _chunked_store(tmp_path_factory.mktemp("chunks") / "m", 400)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """100 knowledge nodes and the seed's others: 45 chunks of rows, 88 of postings. The tests
    that damage every chunk in turn use it: each damaged chunk of postings rebuilds the text
    index from every file, so with ``store`` one test took 54 s of a CI run."""
    return _chunked_store(tmp_path_factory.mktemp("chunks") / "s", 100)


def _cold(root: Path) -> index.IndexState:
    state = index.build_from_files(str(root))
    state.flush_text()
    return state


def _layout(root: Path) -> tuple[dict[str, int], int, int]:
    """The header, and where the rows and the text lazy regions start in the file."""
    data = (root / ".mdcg" / "index.snapshot").read_bytes()
    nl = data.index(b"\n", len(snapshot.MAGIC))
    header = orjson.loads(data[len(snapshot.MAGIC) : nl])
    eager_end = nl + 1 + header["entries_len"] + header["rows_len"] + header["text_len"]
    return header, eager_end, eager_end + header["rows_lazy_len"]


def _results(state: index.IndexState, query: str) -> list[tuple[str, float]]:
    text = state.text
    return [
        (d, round(x, 9)) for d, x in text.match([(t, 1.0) for t in set(analyze(query))], text.scope(), k=20)
    ]


def _copy(src: Path, dest: Path) -> None:
    """A copy of a store, the files' mtimes kept (the snapshot records them)."""
    subprocess.run(["cp", "-a", str(src), str(dest)], check=True)


@contextlib.contextmanager
def _flipped(root: Path, offset: int) -> Iterator[Path]:
    """The store's snapshot with the byte at ``offset`` flipped, put back after: each
    version is a new file renamed in (an open snapshot maps the file it opened), the
    mtime kept (the snapshot records its own)."""
    snap = root / ".mdcg" / "index.snapshot"
    st = snap.stat()
    sound = snap.read_bytes()

    def put(data: bytes) -> None:
        tmp = snap.with_name("snapshot.tmp")
        tmp.write_bytes(data)
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(tmp, snap)

    data = bytearray(sound)
    data[offset] ^= 0x5A
    put(bytes(data))
    try:
        yield root
    finally:
        put(sound)


def _damaged_copy(src: Path, dest: Path, offset: int) -> Path:
    """A copy of the store whose snapshot has the byte at ``offset`` flipped."""
    _copy(src, dest)
    snap = dest / ".mdcg" / "index.snapshot"
    data = bytearray(snap.read_bytes())
    data[offset] ^= 0x5A
    st = snap.stat()
    snap.write_bytes(bytes(data))
    os.utime(snap, ns=(st.st_atime_ns, st.st_mtime_ns))
    return dest


def test_an_open_reads_the_eager_part_only_and_the_lazy_state_equals_a_cold_build(store: Path) -> None:
    header, rows_at, _ = _layout(store)
    size = (store / ".mdcg" / "index.snapshot").stat().st_size
    assert header["version"] == snapshot.VERSION == 12
    assert rows_at + header["rows_lazy_len"] + header["text_lazy_len"] == size
    assert header["rows_lazy_len"] > 20 * CHUNK and header["text_lazy_len"] > 20 * CHUNK
    snap, problem = snapshot.load_checked(str(store))
    assert snap is not None and problem is None
    table = snap.state.entries.source
    rows = table.region
    assert rows.length == header["rows_lazy_len"] and not rows.complete
    assert sum(rows._ok) == 0  # nothing of the rows read at open
    (seg,) = snap.state.text._postings.segments
    postings = seg._guard.region
    assert seg.lazy and sum(postings._ok) == 0
    cold = _cold(store)
    assert _results(snap.state, QUERIES[0]) == _results(cold, QUERIES[0])
    assert 0 < sum(postings._ok) < len(postings._ok) // 10  # the query's terms only
    for q in QUERIES:  # (a query with pseudo-relevance feedback reads every posting)
        assert _results(snap.state, q) == _results(cold, q), q
    assert dict(snap.state.entries) == dict(cold.entries)
    assert rows.complete and snap.state.snapshot_damage == []


def test_search_through_the_store_equals_a_store_opened_from_the_files(store: Path, tmp_path: Path) -> None:
    files = tmp_path / "files"
    _copy(store, files)
    (files / ".mdcg" / "index.snapshot").unlink()
    with MdCG(store, read_only=True) as lazy, MdCG(files, read_only=True) as cold:
        assert (lazy.loaded_from, cold.loaded_from) == ("snapshot", "files")
        for q in QUERIES:
            got, _ = lazy.search(q, record=False)
            want, _ = cold.search(q, record=False)
            assert [(r.id, round(r.score, 9), r.tier) for r in got] == [
                (r.id, round(r.score, 9), r.tier) for r in want
            ], q
        assert lazy.health().ok


def _rows_in_chunk(table: snapshot._Table, chunk: int) -> list[int]:
    lo, hi = chunk * CHUNK, (chunk + 1) * CHUNK
    return [r for r in range(len(table.ids)) if table.ptr[r] < hi and table.ptr[r + 1] > lo]


def test_a_flipped_byte_in_every_rows_chunk_is_found_at_first_use_and_its_entries_come_from_the_files(
    small: Path, tmp_path: Path
) -> None:
    header, rows_at, _ = _layout(small)
    cold = _cold(small)
    chunks = -(-header["rows_lazy_len"] // CHUNK)
    assert chunks >= 40
    root = tmp_path / "r"
    _copy(small, root)
    for c in range(chunks):
        at = min(c * CHUNK + CHUNK // 2, header["rows_lazy_len"] - 1)
        with _flipped(root, rows_at + at):
            snap, problem = snapshot.load_checked(str(root))
            assert snap is not None and problem is None  # the open does not read the rows
            table = snap.state.entries.source
            assert snap.state.snapshot_damage == []
            rows = _rows_in_chunk(table, c)
            for r in rows:
                node_id = table.ids[r]
                assert snap.state.entries[node_id] == cold.entries[node_id]  # rebuilt from its file
            assert snap.state.snapshot_damage == [f"rows section, chunk {c}: checksum mismatch"]
            # a listing by tag decodes only the tags of a row: a damaged one's come from its file
            assert [table.tags_of(r) for r in rows] == [cold.entries[table.ids[r]].tags for r in rows]
            with pytest.raises(SnapshotDamageError, match=f"rows section is damaged \\(chunk {c}: checksum"):
                table.raw(rows[0])  # the damaged bytes are never handed out
            snapshot.close(snap.state)


def _chunk_term(state: index.IndexState, offset: int) -> str:
    """A term whose postings lie in the text region's bytes at ``offset``."""
    (seg,) = state.text._postings.segments
    guard = seg._guard
    pos = (offset - guard.docs) // 4 if offset < guard.tfs else (offset - guard.tfs) // 2
    pos = min(max(pos, 0), seg.nnz - 1)
    p = int(np.searchsorted(seg.ptr, pos, side="right")) - 1
    return state.text._vocab.terms[int(seg.terms[p])]


def test_a_flipped_byte_in_every_postings_chunk_is_found_at_first_use_and_the_text_index_is_rebuilt(
    small: Path, tmp_path: Path
) -> None:
    header, _, text_at = _layout(small)
    cold = _cold(small)
    chunks = -(-header["text_lazy_len"] // CHUNK)
    assert chunks >= 80
    root = tmp_path / "t"
    _copy(small, root)
    for c in range(chunks):
        at = min(c * CHUNK + CHUNK // 2, header["text_lazy_len"] - 1)
        with _flipped(root, text_at + at):
            snap, problem = snapshot.load_checked(str(root))
            assert snap is not None and problem is None
            state = snap.state
            term = _chunk_term(state, at)
            text = state.text
            want = cold.text.match([(term, 1.0)], cold.text.scope(), k=20)
            got = text.match([(term, 1.0)], text.scope(), k=20)
            assert [(d, round(x, 9)) for d, x in got] == [(d, round(x, 9)) for d, x in want], (c, term)
            assert state.snapshot_damage[0].startswith(f"text section, chunk {c}: ")
            assert state.snapshot_damage[1:] == ["text section: the text index was rebuilt from the files"]
            assert not any(seg.lazy for seg in text._postings.segments)  # nothing of the snapshot is used now
            for q in QUERIES[:2]:
                assert _results(state, q) == _results(cold, q)
            snapshot.close(state)


def test_health_reports_lazy_damage_and_a_compaction_writes_a_sound_snapshot(
    store: Path, tmp_path: Path
) -> None:
    _, _, text_at = _layout(store)
    snap, _ = snapshot.load_checked(str(store))
    assert snap is not None
    (seg,) = snap.state.text._postings.segments
    tid = snap.state.text._vocab[analyze("计算机网络")[0]]
    offset = seg._guard.docs + 4 * int(seg.ptr[int(np.searchsorted(seg.terms, tid))])
    root = _damaged_copy(store, tmp_path / "h", text_at + offset)
    with MdCG(root, auto_compact=None) as s:
        assert s.loaded_from == "snapshot" and s.health().ok
        got, _ = s.search("计算机网络", record=False)
        with MdCG(store, read_only=True) as sound:
            want, _ = sound.search("计算机网络", record=False)
        assert [(r.id, round(r.score, 9)) for r in got] == [(r.id, round(r.score, 9)) for r in want]
        assert got and not got[0].filler
        findings = [f for f in s.health().findings if f.kind == "log_damage"]
        assert [f.path for f in findings] == [".mdcg/index.snapshot"] * 2
        assert f"text section, chunk {offset // CHUNK}: checksum mismatch" in findings[0].detail
        assert "the text index was rebuilt from the files" in findings[1].detail
        s.compact_index()
        assert not [f for f in s.health().findings if f.kind == "log_damage"]
    snap, problem = snapshot.load_checked(str(root))
    assert snap is not None and problem is None
    snap.state.entries.settle()
    for seg in snap.state.text._postings.segments:
        seg.docs  # noqa: B018  (reads and checks every chunk)
    assert snap.state.snapshot_damage == []


def test_a_damaged_row_whose_file_is_gone_raises_rather_than_answering(store: Path, tmp_path: Path) -> None:
    _, rows_at, _ = _layout(store)
    root = _damaged_copy(store, tmp_path / "g", rows_at + 10)
    snap, _ = snapshot.load_checked(str(root))
    assert snap is not None
    table = snap.state.entries.source
    first = table.ids[0]
    (root / table.path_of(0)).unlink()
    with pytest.raises(SnapshotDamageError, match="cannot be read"):
        snap.state.entries[first]
    # decoded from bytes there are no files to rebuild from: the damage is raised
    data = (root / ".mdcg" / "index.snapshot").read_bytes()
    got = snapshot.decode(data)
    assert isinstance(got, snapshot.Snapshot)
    with pytest.raises(SnapshotDamageError):
        got.state.entries[table.ids[1]]


def test_reading_and_repairing_a_damaged_snapshot_writes_nothing(store: Path, tmp_path: Path) -> None:
    _header, rows_at, text_at = _layout(store)
    root = _damaged_copy(store, tmp_path / "w", text_at + 7)
    snap_path = root / ".mdcg" / "index.snapshot"
    data = bytearray(snap_path.read_bytes())
    data[rows_at + 7] ^= 0x5A
    snap_path.write_bytes(bytes(data))
    before = tree_listing(root)
    with no_writes() as attempts:
        s = MdCG(root, read_only=True)
        got, _ = s.search("the history of mathematics", record=False)
        assert got
        assert len(s.entries()) == len(_cold(store).entries)
        assert not s.health().ok
        s.close()
    assert attempts == []
    assert tree_listing(root) == before


def test_a_snapshot_of_the_previous_version_is_rebuilt_never_trusted(store: Path, tmp_path: Path) -> None:
    root = tmp_path / "v8"
    _copy(store, root)
    path = root / ".mdcg" / "index.snapshot"
    data = path.read_bytes()
    nl = data.index(b"\n", len(snapshot.MAGIC))
    header = orjson.loads(data[len(snapshot.MAGIC) : nl])
    header["version"] = 8
    path.write_bytes(snapshot.MAGIC + orjson.dumps(header) + data[nl:])
    assert snapshot.load_checked(str(root)) == (None, None)
    assert snapshot.read_header(str(root)) is None
    with MdCG(root, read_only=True) as s:
        assert s.loaded_from == "files"
        assert s.health().ok  # another version is replaced at the next compaction, not a problem
        got, _ = s.search("计算机网络", record=False)
    with MdCG(store, read_only=True) as t:
        want, _ = t.search("计算机网络", record=False)
    assert [r.id for r in got] == [r.id for r in want]


@pytest.mark.parametrize("cut", [1, CHUNK, "rows"])
def test_a_truncated_snapshot_is_refused_at_open(store: Path, tmp_path: Path, cut: int | str) -> None:
    _header, _rows_at, text_at = _layout(store)
    root = tmp_path / "cut"
    _copy(store, root)
    path = root / ".mdcg" / "index.snapshot"
    data = path.read_bytes()
    path.write_bytes(data[: text_at if cut == "rows" else len(data) - int(cut)])
    snap, problem = snapshot.load_checked(str(root))
    assert snap is None and problem == "damaged (truncated)"


def test_crafted_slots_with_valid_checksums_are_refused_when_their_chunk_is_read(
    store: Path, tmp_path: Path
) -> None:
    """A slot outside its segment's bounds (checksums recomputed) fails its chunk's check."""
    header, _, text_at = _layout(store)
    root = tmp_path / "craft"
    _copy(store, root)
    path = root / ".mdcg" / "index.snapshot"
    data = bytearray(path.read_bytes())
    snap, _ = snapshot.load_checked(str(root))
    assert snap is not None
    (seg,) = snap.state.text._postings.segments
    guard = seg._guard
    at = text_at + guard.docs + 4 * 3
    data[at : at + 4] = (10**6).to_bytes(4, "little")
    # recompute that chunk's CRC in the eager part of the text image
    region = guard.region
    c = (guard.docs + 12) // CHUNK
    old = region._crcs[c].to_bytes(4, "little")
    new = zlib.crc32(bytes(data[text_at + c * CHUNK : text_at + min((c + 1) * CHUNK, region.length)]))
    eager_text = slice(
        text_at - header["rows_lazy_len"] - header["text_len"], text_at - header["rows_lazy_len"]
    )
    image = bytes(data[eager_text])
    assert image.count(old) == 1
    image = image.replace(old, new.to_bytes(4, "little"))
    image = image[:-4] + zlib.crc32(image[:-4]).to_bytes(4, "little")
    data[eager_text] = image
    path.write_bytes(bytes(data))
    snap, problem = snapshot.load_checked(str(root))
    assert snap is not None and problem is None
    (seg,) = snap.state.text._postings.segments
    with pytest.raises(SnapshotDamageError, match="out of its segment's bounds"):
        seg.postings(0, 8)
    assert snap.state.snapshot_damage == [
        f"text section, chunk {c}: a posting's slot is out of its segment's bounds"
    ]


def _snapshot_fds() -> list[str]:
    """What this process's open descriptors on snapshot files point to."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if "index.snapshot" in target:
                out.append(target)
    return out


def test_a_process_following_a_newer_snapshot_closes_the_replaced_one(store: Path, tmp_path: Path) -> None:
    root = tmp_path / "f"
    _copy(store, root)
    gc.collect()
    before = _snapshot_fds()
    reader = MdCG(root, read_only=True, refresh_interval=None)
    assert reader.loaded_from == "snapshot"
    state = reader._engine.state
    # kept open for the lazy parts
    assert _snapshot_fds() == [*before, str(root / ".mdcg" / "index.snapshot")]
    with MdCG(root, auto_compact=None) as writer:
        writer.add(Node(id="followed", layer="self", body="计算机网络 notes added later"))
        writer.compact_index()
    assert reader.refresh() != []  # followed without reloading (one generation on)
    assert reader._engine.snap_gen == 2 and reader._engine.state is state  # not reloaded
    gc.collect()
    assert _snapshot_fds() == before  # the replaced file was read to its end and closed
    got, _ = reader.search("计算机网络", record=False)
    with MdCG(root, read_only=True) as fresh:
        want, _ = fresh.search("计算机网络", record=False)
    assert [r.id for r in got] == [r.id for r in want]
    reader.close()


def test_closing_the_store_closes_the_snapshot_file(store: Path) -> None:
    gc.collect()
    before = _snapshot_fds()
    s = MdCG(store, read_only=True)
    assert len(_snapshot_fds()) == len(before) + 1
    state = s._engine.state
    s.close()
    gc.collect()
    assert _snapshot_fds() == before
    with pytest.raises(StoreClosedError):
        state.entries[state.entries.source.ids[0]]  # nothing of it was read: it cannot be now


def test_a_lazy_region_checks_the_chunks_of_many_ranges_at_once() -> None:
    """``need_ranges``: exactly the chunks the ranges touch are read (a run of them in one
    read) and checked; a damaged one raises every time, naming the section and the chunk."""
    size = 64
    data = bytes(range(256)) * 2  # 8 chunks
    crcs = np.array([zlib.crc32(data[c : c + size]) for c in range(0, len(data), size)], dtype=np.uint32)
    damaged = bytearray(data)
    damaged[5 * size + 3] ^= 0xFF
    reads: list[tuple[int, int]] = []

    def read(offset: int, view: memoryview) -> int:
        reads.append((offset, len(view)))
        view[:] = damaged[offset : offset + len(view)]
        return len(view)

    damage: list[str] = []
    region = codec.LazyRegion("postings", len(data), size, crcs, read=read, damage=damage)
    region.need_ranges(np.array([0, 20, 64, 450, 200], dtype=np.int64), np.array([10, 30, 70, 460, 200]))
    assert reads == [(0, 128), (448, 64)]  # chunks 0-1 as one read, then 7; the empty range reads nothing
    assert list(region._ok) == [1, 1, 0, 0, 0, 0, 0, 1]
    region.need_ranges(np.array([5, 100], dtype=np.int64), np.array([6, 120], dtype=np.int64))
    assert len(reads) == 2  # all sound already: nothing read again
    with pytest.raises(SnapshotDamageError) as err:
        region.need_ranges(np.array([300], dtype=np.int64), np.array([330], dtype=np.int64))
    assert "postings" in str(err.value) and "5" in str(err.value)
    assert reads[2] == (256, 128)  # chunks 4-5, one read
    assert damage == ["postings section, chunk 5: checksum mismatch"]
    assert list(region._ok) == [1, 1, 0, 0, 1, 0, 0, 1]  # chunk 4 was sound, 5 never is
    with pytest.raises(SnapshotDamageError):
        region.need_ranges(np.array([321], dtype=np.int64), np.array([322], dtype=np.int64))
    region.need_ranges(np.array([384], dtype=np.int64), np.array([512], dtype=np.int64))
    assert reads[-1] == (384, 64)  # chunk 6 only: 7 is sound
    assert list(region._ok) == [1, 1, 0, 0, 1, 0, 1, 1]
    assert bytes(region.buf[384:512]) == data[384:512]
