"""The quick freshness check (journal.LogWatch) never hides another process's write.

Each test first brings a handle to where its freshness checks are answered
from ``lstat`` calls alone (the log folder settled), proves that they are,
then lets another process write -- into a shard that already exists, into a
new shard, from a forked child holding the same handle, or by compacting --
and requires the very next call of ours to see it: an id that differs only by
case must be refused as a twin (only the index knows the other id on a
case-sensitive file system), and the other node must be listed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from md_cg import MdCG, Node, journal
from md_cg.errors import IdCollisionError

SETTLE_S = journal.SETTLE_NS / 1e9 + 0.05

WRITER = """
import sys
from md_cg import MdCG, Node
store = MdCG(sys.argv[1], auto_compact=None, refresh_interval=0)
for line in sys.stdin:
    cmd = line.strip()
    if cmd == "quit":
        break
    if cmd == "compact":
        store.compact_index()
    else:
        store.add(Node(id=cmd, body="written by another process"))
    print("ok", flush=True)
store.close()
"""


class Writer:
    """Another process with its own handle (and shard), writing on command."""

    def __init__(self, root: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )

    def do(self, cmd: str) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "ok"

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("quit\n")
        self.proc.stdin.flush()
        self.proc.wait(timeout=30)


def quiet(store: MdCG, n: int) -> None:
    """Let the log folder settle, then write until the checks are answered quickly."""
    time.sleep(SETTLE_S)
    watch = store._engine.log_watch
    before = watch.quick
    for i in range(3):
        store.add(Node(id=f"ours-{n}-{i}", body="ours"))
    assert watch.quick >= before + 2  # the shortcut is in use from here on


def refused_twin(store: MdCG, other: str) -> None:
    watch = store._engine.log_watch
    quick = watch.quick
    with pytest.raises(IdCollisionError):
        store.add(Node(id=other.upper(), body="a twin of the other process's node"))
    assert watch.quick == quick  # this check was a full look
    assert other in store.ids()


@pytest.fixture
def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    with MdCG(tmp_path / "s", auto_compact=None, refresh_interval=None) as s:
        s.add(Node(id="seed", body="first"))
        yield s


def test_a_write_into_an_existing_shard_is_seen(store: MdCG) -> None:
    writer = Writer(store.root)
    try:
        writer.do("other-0")  # its shard exists from here on
        quiet(store, 0)
        writer.do("other-1")  # the shard grows; the log folder does not change
        refused_twin(store, "other-1")
        quiet(store, 1)
        writer.do("other-2")
        assert "other-2" in store._engine.refresh()
    finally:
        writer.close()


def test_a_new_shard_is_seen(store: MdCG) -> None:
    quiet(store, 0)
    writer = Writer(store.root)
    try:
        writer.do("late-0")  # a new shard appears in a settled folder
        refused_twin(store, "late-0")
    finally:
        writer.close()


def test_a_compaction_by_another_process_is_seen(store: MdCG) -> None:
    writer = Writer(store.root)
    try:
        writer.do("comp-0")
        quiet(store, 0)
        writer.do("comp-1")
        writer.do("compact")  # a new snapshot; dead shards removed
        refused_twin(store, "comp-1")
        quiet(store, 1)
        writer.do("compact")  # a snapshot alone, the log folder settled
        writer.do("comp-2")
        refused_twin(store, "comp-2")
    finally:
        writer.close()


def test_a_replaced_log_folder_is_not_trusted(store: MdCG) -> None:
    quiet(store, 0)
    log = store.root / ".mdcg" / "log"
    copy = store.root / ".mdcg" / "log-copy"
    shutil.copytree(log, copy)
    writer_root = store.root
    os.rename(log, store.root / ".mdcg" / "log-old")
    os.rename(copy, log)  # same names and sizes, another folder
    watch = store._engine.log_watch
    full = watch.full
    store.add(Node(id="after-swap", body="x"))
    assert watch.full == full + 1
    assert writer_root == store.root


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_does_not_reuse_the_parents_shortcut(store: MdCG) -> None:
    """Parent and child share the handle; each sees the other's writes."""
    quiet(store, 0)
    to_child_r, to_child_w = os.pipe()
    to_parent_r, to_parent_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            os.read(to_child_r, 1)  # the parent has written "parent-1"
            try:
                store.add(Node(id="PARENT-1", body="twin"))
            except IdCollisionError:
                store.add(Node(id="child-1", body="from the child"))
                code = 0
            os.write(to_parent_w, b"x")
        finally:
            os._exit(code)
    store.add(Node(id="parent-1", body="from the parent"))
    os.write(to_child_w, b"x")
    os.read(to_parent_r, 1)
    _, status = os.waitpid(pid, 0)
    for fd in (to_child_r, to_child_w, to_parent_r, to_parent_w):
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    refused_twin(store, "child-1")
