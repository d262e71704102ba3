"""Building the index with helper processes: the serial build's state, whatever the helpers do.

The helpers are real processes. To make them do part of a small build, this
process's own parsing is slowed down (``index.parse_chunk`` patched here; a
helper imports the module afresh and parses at full speed).
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import pytest
from conftest import knowledge, no_writes, tree_listing

from md_cg import MdCG, Node, coldbuild, index
from md_cg.errors import InvalidArgumentError

QUERIES = ["tea", "green tea garden", "正文 k007", "有序数组 单元测试", "release notes", "note"]


def make_store(root: Path, n: int = 120) -> None:
    """Knowledge in four Chinese buckets, English notes, hand-written files, bad files and a duplicate id."""
    with MdCG(root, auto_compact=None) as s:
        s.add_many([knowledge(f"k{i:03d}", domain=f"域{i % 4}") for i in range(n)])
        s.add_many(
            [
                Node(
                    id=f"e{i:03d}",
                    layer="contextual",
                    body=f"note {i}: green tea in the garden, release {i % 7}",
                )
                for i in range(n)
            ]
        )
        s.add(Node(id="self_1", layer="self", body="I like tea"))
    shutil.rmtree(root / ".mdcg")  # a fresh clone: no snapshot, no log
    self_dir = root / "self"
    (self_dir / "bad_yaml.md").write_text("---\nid: [unclosed\n---\nx\n", encoding="utf-8")
    (self_dir / "bad_utf8.md").write_bytes(b'---\nid: "x"\n---\n\xff\n')
    (self_dir / "a_bad_layer.md").write_text('---\nid: "a_bad_layer"\nlayer: "nope"\n---\nx\n', "utf-8")
    (self_dir / "plain_note.md").write_text("just a note about oolong tea\n", encoding="utf-8")
    # A newer copy of self_1 later in path order: the winner replaces the first copy put.
    (self_dir / "zz_copy.md").write_text(
        '---\nid: "self_1"\nlayer: "self"\nupdated_at: "2099-01-01T00:00:00Z"\n---\nI like coffee now\n',
        "utf-8",
    )


def matches(state: index.IndexState) -> list[list[tuple[str, float]]]:
    out = []
    for q in QUERIES:
        terms = [(t, 1.0) for t in index.query_terms(q)]
        out.append(state.text.match(terms, state.text.scope(), k=15))
    return out


def serial(root: Path) -> index.IndexState:
    state = index.build_from_files(str(root))
    state.flush_text()
    return state


def assert_same(got: index.IndexState, want: index.IndexState) -> None:
    assert list(got.entries.items()) == list(want.entries.items())
    assert list(got.problems.items()) == list(want.problems.items())
    assert got.duplicates == want.duplicates
    assert got.pending_text == {}
    assert matches(got) == matches(want)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "m"
    make_store(root)
    return root


def wait_for_helpers(helpers: list[coldbuild._Helper]) -> None:
    """Until every helper started so far has sent its first chunk or is stopped (read with
    its own ``pump``). A helper's interpreter can take seconds to start on a loaded machine,
    and this process had parsed nearly every chunk by then (CI: 8-16 of 62 taken): the
    helpers' share was the scheduler's. From here it is the code's."""
    deadline = time.monotonic() + 120
    while any(not h.broken and h.received == 0 for h in helpers) and time.monotonic() < deadline:
        for h in helpers:
            h.pump()
        time.sleep(0.005)


@pytest.fixture
def slow_here(monkeypatch, helpers):
    """This process parses a chunk in 30 ms or more, so the helpers deliver most chunks, and
    none before the helpers have started (:func:`wait_for_helpers`)."""
    real = index.parse_chunk

    def slow(*args, **kw):
        wait_for_helpers(helpers)
        time.sleep(0.03)
        return real(*args, **kw)

    monkeypatch.setattr(index, "parse_chunk", slow)
    monkeypatch.setattr(index, "BUILD_CHUNK", 4)


@pytest.fixture
def helpers(monkeypatch) -> list[coldbuild._Helper]:
    """Every helper started, and (in ``taken``) how many chunks this process took from helpers."""
    started: list[coldbuild._Helper] = []
    real_init, real_take = coldbuild._Helper.__init__, coldbuild._Helper.take

    def init(self, *args, **kw):
        real_init(self, *args, **kw)
        self.taken = 0
        started.append(self)

    def take(self, chunk, rels):
        out = real_take(self, chunk, rels)
        self.taken += out is not None
        return out

    monkeypatch.setattr(coldbuild._Helper, "__init__", init)
    monkeypatch.setattr(coldbuild._Helper, "take", take)
    return started


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_helpers_give_the_serial_state(store: Path, slow_here, helpers, workers: int) -> None:
    want = serial(store)
    assert want.duplicates == {"self_1": ["self/self_1.md"]}
    assert list(want.problems) == ["self/a_bad_layer.md", "self/bad_utf8.md", "self/bad_yaml.md"]
    ticks: list[int] = []
    got = coldbuild.build_from_files(str(store), progress=ticks.append, workers=workers)
    assert_same(got, want)
    assert sum(ticks) == len(index.scan_files(str(store)).files)
    assert len(helpers) == workers
    chunks = -(-len(index.scan_files(str(store)).files) // 4)
    taken = sum(h.taken for h in helpers)
    # the helpers did a large part of the work (slow_here waits for them to start: the
    # share was an eighth from d6f9f76 on, when their start on a loaded machine decided it)
    assert taken >= chunks // 3, (taken, chunks)
    assert all(h.proc is None for h in helpers)  # every helper stopped and reaped
    assert [h.errors for h in helpers] == [b""] * workers


def test_the_winner_of_a_duplicated_id_is_what_is_indexed(store: Path, slow_here, helpers) -> None:
    got = coldbuild.build_from_files(str(store), workers=1)
    assert got.entries["self_1"].path == "self/zz_copy.md"
    coffee = got.text.match([(t, 1.0) for t in index.query_terms("coffee")], got.text.scope(), k=5)
    like = got.text.match([(t, 1.0) for t in index.query_terms("like")], got.text.scope(), k=5)
    assert [i for i, _ in coffee] == ["self_1"]
    assert [i for i, _ in like] == ["self_1"]  # one document: the first copy's text is gone
    assert (
        got.text.match([(t, 1.0) for t in index.query_terms("like tea")], got.text.scope(), k=5)[0][0]
        == "self_1"
    )


#: A helper program's start: read what the helper is sent, as the real one does.
READ_CHUNKS = (
    "import sys, marshal; i = sys.stdin.buffer; "
    "frames = [marshal.loads(i.read(int.from_bytes(i.read(4), 'little'))) for _ in range(2)]; "
    "root, chunks = frames[1]; "
)


@pytest.mark.parametrize(
    "boot",
    [
        "import sys; sys.exit(3)\n",  # dies at once
        # not marshal
        "import sys; sys.stdout.buffer.write(b'\\x05\\x00\\x00\\x00garbage'); sys.stdout.flush()\n",
        # a well-formed frame of the wrong shape, then nothing
        "import sys, marshal; d = marshal.dumps(('x', 1)); "
        "sys.stdout.buffer.write(len(d).to_bytes(4, 'little') + d); sys.stdout.flush()\n",
        # entries of the wrong arity
        "import sys, marshal; d = marshal.dumps(([('a',)], ['t'], {})); "
        "sys.stdout.buffer.write(len(d).to_bytes(4, 'little') + d); sys.stdout.flush()\n",
        "import sys; sys.stdout.buffer.write(b'\\xff\\xff\\xff'); sys.stdout.flush()\n",  # a torn header
        # a problem named for a file of no chunk of its own
        "import sys, marshal; d = marshal.dumps(([], [], {'self/elsewhere.md': 'x'})); "
        "sys.stdout.buffer.write(len(d).to_bytes(4, 'little') + d); sys.stdout.flush()\n",
        # a problem that is not a string, for the first file it owes
        READ_CHUNKS + "e = marshal.dumps(([], [], {chunks[0][1][0]: 1})); "
        "sys.stdout.buffer.write(len(e).to_bytes(4, 'little') + e); sys.stdout.flush()\n",
    ],
    ids=["exits", "garbage", "wrong-shape", "wrong-arity", "torn", "other-file", "bad-problem"],
)
def test_a_broken_helper_leaves_its_chunks_to_this_process(
    store: Path, slow_here, helpers, monkeypatch, boot
) -> None:
    want = serial(store)
    monkeypatch.setattr(coldbuild, "_BOOT", boot)
    got = coldbuild.build_from_files(str(store), workers=2)
    assert_same(got, want)
    assert sum(h.taken for h in helpers) == 0
    assert all(h.broken and h.proc is None for h in helpers)


def test_a_failing_helper_leaves_its_traceback(store: Path, slow_here, helpers, monkeypatch) -> None:
    monkeypatch.setattr(coldbuild, "_BOOT", "raise RuntimeError('helper failed on purpose')\n")
    coldbuild.build_from_files(str(store), workers=1)
    assert b"RuntimeError: helper failed on purpose" in helpers[0].errors


def test_a_helper_sending_more_than_it_owes_is_stopped(store: Path, slow_here, helpers, monkeypatch) -> None:
    boot = (
        "import sys, marshal; d = marshal.dumps(([], [], {})); "
        "sys.stdout.buffer.write((len(d).to_bytes(4, 'little') + d) * 100000); sys.stdout.flush()\n"
    )
    want = serial(store)
    monkeypatch.setattr(coldbuild, "_BOOT", boot)
    got = coldbuild.build_from_files(str(store), workers=1)
    assert_same(got, want)
    assert helpers[0].broken


def test_a_stuck_helper_is_never_waited_for(store: Path, helpers, monkeypatch) -> None:
    monkeypatch.setattr(coldbuild, "_BOOT", "import time; time.sleep(120)\n")
    want = serial(store)
    started = time.monotonic()
    got = coldbuild.build_from_files(str(store), workers=1)
    assert time.monotonic() - started < 30
    assert_same(got, want)
    assert helpers[0].proc is None and helpers[0].taken == 0


def test_a_helper_killed_midway(store: Path, helpers, monkeypatch) -> None:
    """SIGKILL to the helper after this process has put a few of its chunks."""
    want = serial(store)
    real = index.parse_chunk
    monkeypatch.setattr(index, "BUILD_CHUNK", 4)
    calls = []

    def slow(*args, **kw):
        wait_for_helpers(helpers)
        time.sleep(0.03)
        calls.append(1)
        if helpers and helpers[0].taken >= 5 and helpers[0].proc is not None:
            os.kill(helpers[0].proc.pid, signal.SIGKILL)
        return real(*args, **kw)

    monkeypatch.setattr(index, "parse_chunk", slow)
    got = coldbuild.build_from_files(str(store), workers=1)
    assert_same(got, want)
    assert helpers[0].taken >= 5 and helpers[0].broken


def test_no_interpreter_to_start(store: Path, helpers, monkeypatch) -> None:
    want = serial(store)
    monkeypatch.setattr(coldbuild.sys, "executable", "/nonexistent/python3")
    got = coldbuild.build_from_files(str(store), workers=2)
    assert_same(got, want)
    assert [h.broken for h in helpers] == [True, True]


def test_a_helper_of_another_md_cg_copy_refuses(tmp_path: Path) -> None:
    import io

    out = io.BytesIO()
    assert coldbuild._serve(str(tmp_path), io.BytesIO(b""), out) == 2
    assert out.getvalue() == b""


def test_read_only_store_with_helpers_writes_nothing(store: Path, slow_here, helpers, monkeypatch) -> None:
    want = serial(store)
    monkeypatch.setenv(coldbuild.ENV, "1")
    before = tree_listing(store)
    with no_writes() as attempts, MdCG(store, read_only=True) as s:
        assert s.loaded_from == "files"
        assert_same(s._engine.state, want)
    assert attempts == []
    assert tree_listing(store) == before
    assert helpers and sum(h.taken for h in helpers) > 0


def test_open_and_rebuild_use_the_helpers(store: Path, slow_here, helpers, monkeypatch) -> None:
    want = serial(store)
    monkeypatch.setenv(coldbuild.ENV, "1")
    with MdCG(store, auto_compact=None) as s:
        assert s.loaded_from == "files"
        assert_same(s._engine.state, want)
        assert [h.taken > 0 for h in helpers] == [True]
        ticks: list[int] = []
        s.rebuild_index(progress=ticks.append)
        assert len(helpers) == 2 and helpers[1].taken > 0
        assert sum(ticks) == len(index.scan_files(str(store)).files)
        assert_same(s._engine.state, want)


@pytest.mark.parametrize(("raw", "want"), [("0", 0), ("2", 2), (" 1 ", 1)])
def test_worker_count_from_the_environment(monkeypatch, raw: str, want: int) -> None:
    monkeypatch.setenv(coldbuild.ENV, raw)
    assert coldbuild.worker_count(5) == want
    assert coldbuild.worker_count(5, workers=4) == 4  # an explicit count wins


@pytest.mark.parametrize("raw", ["x", "-1", "1.5"])
def test_a_bad_worker_count_is_refused_by_name(monkeypatch, raw: str) -> None:
    monkeypatch.setenv(coldbuild.ENV, raw)
    with pytest.raises(InvalidArgumentError) as info:
        coldbuild.worker_count(5)
    assert (
        str(info.value)
        == f"MDCG_BUILD_WORKERS must be a whole number of helper processes (0: none), got {raw!r}"
    )


def test_default_worker_count(monkeypatch) -> None:
    monkeypatch.delenv(coldbuild.ENV, raising=False)
    monkeypatch.setattr(coldbuild.os, "sched_getaffinity", lambda _pid: set(range(8)), raising=False)
    assert coldbuild.worker_count(coldbuild.PARALLEL_MIN_FILES - 1) == 0
    assert coldbuild.worker_count(coldbuild.PARALLEL_MIN_FILES) == coldbuild.MAX_WORKERS == 3
    monkeypatch.setattr(coldbuild.os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    assert coldbuild.worker_count(10**6) == 1
    monkeypatch.setattr(coldbuild.os, "sched_getaffinity", lambda _pid: {0}, raising=False)
    assert coldbuild.worker_count(10**6) == 0
    monkeypatch.setattr(coldbuild.sys, "executable", "")
    monkeypatch.setattr(coldbuild.os, "sched_getaffinity", lambda _pid: set(range(8)), raising=False)
    assert coldbuild.worker_count(10**6) == 0


@pytest.mark.parametrize(
    ("executable", "frozen", "want"),
    [
        ("/usr/bin/python3", False, 2),
        ("/opt/venv/bin/python", False, 2),
        ("/usr/local/bin/python3.11", False, 2),
        ("C:\\Python311\\python.exe", False, 2),
        ("/usr/bin/pypy3", False, 2),
        ("/usr/bin/python3", True, 0),  # a frozen application
        ("/usr/bin/blender", False, 0),  # an embedding program
        ("/usr/bin/uwsgi", False, 0),
        ("", False, 0),
    ],
)
def test_helpers_only_with_a_python_interpreter(
    monkeypatch, executable: str, frozen: bool, want: int
) -> None:
    monkeypatch.setattr(coldbuild.sys, "executable", executable)
    if frozen:
        monkeypatch.setattr(coldbuild.sys, "frozen", True, raising=False)
    monkeypatch.setattr(coldbuild.os.path, "basename", lambda p: p.replace("\\", "/").rsplit("/", 1)[-1])
    assert coldbuild.worker_count(10**6, workers=2) == want
    monkeypatch.setenv(coldbuild.ENV, "2")
    assert coldbuild.worker_count(10**6) == want


def test_a_small_store_is_built_here_alone(store: Path, helpers, monkeypatch) -> None:
    monkeypatch.delenv(coldbuild.ENV, raising=False)
    got = coldbuild.build_from_files(str(store))
    assert helpers == []
    assert len(got.pending_text) == len(got.entries)  # the serial build leaves the text to the first search


def test_a_rebuild_with_helpers_writes_the_serial_snapshot(
    store: Path, slow_here, helpers, monkeypatch
) -> None:
    """Byte for byte, apart from the snapshot's creation time, its generation (one more per
    rebuild) and its token (random)."""
    import re

    def rebuilt(workers: str) -> bytes:
        monkeypatch.setenv(coldbuild.ENV, workers)
        with MdCG(store) as s:
            s.rebuild_index()
        data = (store / ".mdcg" / "index.snapshot").read_bytes()
        data = re.sub(rb'"(created|generation)":[0-9.e+-]+,', rb'"\1":0,', data, count=2)
        return re.sub(rb'"token":"[0-9a-f]{32}",', b'"token":"",', data, count=1)

    alone = rebuilt("0")
    shared = rebuilt("2")
    assert sum(h.taken for h in helpers) > 0
    assert len(shared) > 100_000
    assert shared == alone


@pytest.mark.parametrize("workers", [1, 2])
def test_every_share_th_chunk_is_parsed_here(store: Path, slow_here, helpers, workers: int) -> None:
    """With k helpers every (6k+1)-th chunk is this process's own (put in as it comes); the helpers
    share the rest round-robin, in ascending order."""
    coldbuild.build_from_files(str(store), workers=workers)
    chunks = -(-len(index.scan_files(str(store)).files) // 4)
    share = coldbuild.SHARE_PER_HELPER * workers + 1
    theirs = [i for i in range(chunks) if i % share != share - 1]
    assert [h.owed for h in helpers] == [theirs[w::workers] for w in range(workers)]
