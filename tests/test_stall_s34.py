"""A live process whose write was stopped midway -- its commit left open, as
docs/reliability.md says of a Ctrl-C or an I/O error after the commit line -- and that then
lives on idle must not make other processes wait (session 34, attack a1). Since the fix for
review rD a read waited while "a commit still open by a live writer" named the memory, for
``lock_timeout`` (30 s): a long-lived reader's next search took 30.01 s, every fresh open
30.00 s, every CLI command 31 s (before that fix: 0.01 s, 0.00 s, 1.3 s). Now an open commit
is waited for only while a process is at work on it -- its writer holds the stripe locks of
its ids for the whole commit, so a stripe taken at once means nobody is -- for at most
``engine.MOVE_WAIT`` seconds, once per commit; the files decide meanwhile, and the next
recovery rolls the commit forward.

The writer is a real process (``_WRITER``), driven by lines on its standard input."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import md_cg
from md_cg import MdCG, engine
from md_cg.errors import NodeNotFoundError

_ENV = {**os.environ, "PYTHONPATH": str(Path(md_cg.__file__).resolve().parent.parent)}

QUERY = "quokka"
OTHERS = ["o0", "o1", "o2"]
ALPHA = "knowledge/cond_alpha_8ed3f6ad/x1.md"
BETA = "knowledge/cond_beta_f44e64e7/x1.md"

#: The other process. "delete": x1's delete stopped by Ctrl-C after the unlink, before its
#: ``done`` line; "retag": x1's re-tag to beta stopped by an I/O error after the new file was
#: renamed in, before the old one was removed; "hold": it takes x1's stripe (``holding``)
#: and keeps it; "pause": x1's delete stopped after the unlink until the file ``go`` exists
#: (a commit at work), then finished. Each prints a word when it is there; the process then
#: waits, alive, for the next line.
_WRITER = """
import os, sys, time
from md_cg import MdCG
root = sys.argv[1]
m = MdCG(root, refresh_interval=0)
j = m._engine.journal
def stop_at(step, exc):
    def fault(name):
        if name == step:
            raise exc
    return fault
def paused(name):
    if name == "deleted":
        print("paused", flush=True)
        while not os.path.exists(os.path.join(root, "..", "go")):
            time.sleep(0.005)
for line in sys.stdin:
    cmd = line.strip()
    if cmd == "delete":
        j.fault = stop_at("deleted", KeyboardInterrupt("simulated Ctrl-C"))
        try:
            m.delete("x1")
        except KeyboardInterrupt:
            print("interrupted", flush=True)
    elif cmd == "retag":
        j.fault = stop_at("renamed", OSError(5, "simulated I/O error"))
        try:
            m.update("x1", tags=["domain:beta"])
        except OSError:
            print("interrupted", flush=True)
    elif cmd == "hold":
        held = m.holding(["x1"])
        held.__enter__()
        print("holding", flush=True)
    elif cmd == "pause":
        j.fault = paused
        m.delete("x1")
        print("done", flush=True)
    j.fault = None
"""


Writer = tuple[Path, Callable[[str | None], str]]


def _store(tmp_path: Path) -> Path:
    root = tmp_path / "s"
    with MdCG(root) as m:
        m.add(id="x1", layer="knowledge", body="quokka doomed memory", tags=["domain:alpha"])
        for i, o in enumerate(OTHERS):
            m.add(id=o, layer="knowledge", body=f"other {i} quokka", tags=["domain:alpha"])
    assert _where(root) == [ALPHA]
    return root


def _where(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("x1.md") if ".mdcg" not in p.parts)


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[Writer]:
    """The store and the writer process: ``tell(cmd)`` returns the word it printed."""
    root = _store(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_ENV,
    )
    assert proc.stdin is not None and proc.stdout is not None

    def tell(cmd: str | None) -> str:
        """Send ``cmd`` (None: nothing, only read the next word)."""
        assert proc.stdin is not None and proc.stdout is not None
        if cmd is not None:
            proc.stdin.write(cmd + "\n")
            proc.stdin.flush()
        return proc.stdout.readline().strip()

    try:
        yield root, tell
    finally:
        (tmp_path / "go").touch()
        proc.stdin.close()
        proc.wait(timeout=30)
    assert proc.returncode == 0


def _timed(fn: Callable[[], object]) -> tuple[float, object]:
    t = time.monotonic()
    try:
        out = fn()
    except NodeNotFoundError as exc:
        out = exc
    return time.monotonic() - t, out


def _ids(m: MdCG, query: str = QUERY) -> list[str]:
    return sorted(r.id for r in m.search(query, record=False)[0] if not r.filler)


def test_interrupted_delete_of_a_live_writer_stalls_no_reader(writer: Writer) -> None:
    root, tell = writer
    reader = MdCG(root, refresh_interval=0)
    assert _ids(reader) == ["o0", "o1", "o2", "x1"]
    assert tell("delete") == "interrupted"
    assert _where(root) == []  # unlinked; the commit stays open (no done line)
    took, out = _timed(lambda: _ids(reader))
    assert out == OTHERS and took < 2.0, (took, out)
    took, out = _timed(lambda: reader.get("x1"))
    assert isinstance(out, NodeNotFoundError) and str(out) == "no node with id 'x1' in this store", out
    assert took < 2.0, took
    assert "x1" not in reader._engine.hand_after  # md-cg's own delete: nothing to tell by hand
    took, fresh = _timed(lambda: MdCG(root, refresh_interval=0))
    assert took < 2.0, took
    assert isinstance(fresh, MdCG)
    took, out = _timed(lambda: _ids(fresh))
    assert out == OTHERS and took < 2.0, (took, out)
    fresh.close()
    reader.close()


def _cli_get(root: Path, node_id: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    t = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "md_cg.cli", "get", node_id, "--root", str(root)],
        capture_output=True,
        text=True,
        env=_ENV,
        timeout=90,
    )
    return time.monotonic() - t, p


def test_cli_command_with_an_interrupted_delete_open(writer: Writer) -> None:
    """The CLI's start (interpreter, imports) alone takes 1 to 2 s here, so the same command
    before the interrupted delete is the measure: the stall added 30 s to it."""
    root, tell = writer
    before, p = _cli_get(root, "o1")
    assert p.returncode == 0 and "other 1 quokka" in p.stdout, p.stderr
    assert tell("delete") == "interrupted"
    took, p = _cli_get(root, "o1")
    assert p.returncode == 0 and "other 1 quokka" in p.stdout, p.stderr
    assert took < before + 3.0, (took, before)
    took, p = _cli_get(root, "x1")
    assert p.returncode == 2 and p.stderr == "error: no node with id 'x1' in this store\n", p.stderr
    assert took < before + 3.0, (took, before)


def test_interrupted_retag_then_hand_rm(writer: Writer) -> None:
    """attack a1's a_failed_live.py: the re-tag stopped with both files there; a person then
    removes both. Every read answers at once, x1 gone."""
    root, tell = writer
    reader = MdCG(root, refresh_interval=0)
    assert _ids(reader) == ["o0", "o1", "o2", "x1"]
    assert tell("retag") == "interrupted"
    assert _where(root) == [ALPHA, BETA]
    took, out = _timed(lambda: reader.get("x1"))
    assert took < 2.0, took
    assert not isinstance(out, NodeNotFoundError) and out.id == "x1"  # type: ignore[attr-defined]
    for rel in _where(root):
        (root / rel).unlink()
    took, out = _timed(lambda: _ids(reader))
    assert out == OTHERS and took < 2.0, (took, out)
    took, out = _timed(lambda: reader.get("x1"))
    assert isinstance(out, NodeNotFoundError) and took < 2.0, (took, out)
    took, fresh = _timed(lambda: MdCG(root, refresh_interval=0))
    assert isinstance(fresh, MdCG) and took < 2.0, took
    assert _ids(fresh) == OTHERS
    fresh.close()
    reader.close()


def test_open_commit_named_only_while_at_work(writer: Writer) -> None:
    """The exact rule: a commit a process is at work on (its stripe held) names its ids, and a
    search waits for it -- x1 not dropped as a hand removal --; the same kind of commit
    stopped midway, its writer alive, does not (test_stalled_commit_names_nothing)."""
    root, tell = writer
    reader = MdCG(root, refresh_interval=0)
    assert _ids(reader) == ["o0", "o1", "o2", "x1"]
    assert tell("pause") == "paused"  # x1 unlinked, its stripe held, no done line yet
    assert engine.named_in_log(reader._engine, ["x1", "o1"]) == {"x1"}
    go = threading.Timer(0.5, (root.parent / "go").touch)
    go.start()
    took, out = _timed(lambda: _ids(reader))
    go.join()
    assert out == OTHERS and 0.4 < took < engine.MOVE_WAIT, (took, out)
    assert tell(None) == "done"
    assert "x1" not in reader._engine.hand_after
    assert engine.named_in_log(reader._engine, ["x1", "o1"]) == {"x1"}  # its done line, not followed yet
    reader._engine.refresh()
    assert engine.named_in_log(reader._engine, ["x1", "o1"]) == set()
    assert reader._engine.cursor.open_commits() == []
    reader.close()


def test_stalled_commit_names_nothing(writer: Writer) -> None:
    root, tell = writer
    reader = MdCG(root, refresh_interval=0)
    assert tell("delete") == "interrupted"
    assert engine.named_in_log(reader._engine, ["x1", "o1"]) == set()
    reader._engine.refresh()
    assert engine.named_in_log(reader._engine, ["x1", "o1"]) == set()
    assert [c.ids for c in reader._engine.cursor.open_commits()] == [frozenset({"x1"})]  # still open
    reader.close()


def test_stripe_held_idle_is_waited_for_once(writer: Writer) -> None:
    """The writer stopped midway then holds x1's stripe (a ``holding`` block): a reader cannot
    tell that from a write at work, so it waits -- at most ``MOVE_WAIT`` seconds, once."""
    root, tell = writer
    reader = MdCG(root, refresh_interval=0, lock_timeout=6.0)
    assert _ids(reader) == ["o0", "o1", "o2", "x1"]
    assert tell("delete") == "interrupted"
    assert tell("hold") == "holding"
    took, out = _timed(lambda: _ids(reader))
    assert out == OTHERS and took < engine.MOVE_WAIT + 1.0, (took, out)
    took, out = _timed(lambda: _ids(reader, "other quokka"))
    assert out == OTHERS and took < 0.5, (took, out)
    took, out = _timed(lambda: reader.get("x1"))
    assert isinstance(out, NodeNotFoundError) and took < 0.5, (took, out)
    reader.close()


def test_own_held_stripe_is_not_waited_for(writer: Writer) -> None:
    """A read inside this handle's own hold of x1's stripe: a second descriptor of this process
    would find the stripe busy -- the engine's own lock says nobody else writes x1."""
    root, tell = writer
    reader = MdCG(root, refresh_interval=0, lock_timeout=6.0)
    assert _ids(reader) == ["o0", "o1", "o2", "x1"]
    assert tell("delete") == "interrupted"
    with reader.holding(["x1"]):
        took, out = _timed(lambda: _ids(reader))
        assert out == OTHERS and took < 0.5, (took, out)
        took, out = _timed(lambda: reader.get("x1"))
        assert isinstance(out, NodeNotFoundError) and took < 0.5, (took, out)
    reader.close()
