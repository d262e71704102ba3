"""A recovery does not undo an acknowledged write made after an earlier write failed open
(session 38; found by attack a2's follow-up of session 37, medium, pre-existing).

A durable ``forget("h1")`` whose folder fsync failed after the unlink, and whose ``done``
line could not be written either (a full disk), left its commit open in its live process.
Another process then added ``h1`` again (acknowledged), and the next compaction rolled the
open commit forward: its del removed the new ``h1.md``. The recovery spared only a file
whose ctime was more than 2 s past the commit line -- and the failing process's own
recovery knew no time for the line at all, so there the new file was removed however late
it came. The same held for puts: an ``update`` whose rename failed (the process alive) had
its temp file renamed over another process's later update, or over the id another process
had forgotten since (back from the dead).

Now each commit line logs the stamp (inode, mtime, size) of every file it replaces or
removes (``replaces``, ``removes``), and a recovery leaves an id whose file is no longer
that one (:func:`md_cg.journal._later_ids`). Lines without them (earlier versions) keep
the 2 s ctime rule. A writer killed (SIGKILL) after its unlinks is not the same bug: the
other process's ``add`` finishes the dead commit before it writes (checked below).
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
from stresslib import stress
from test_add_race_s35 import _ENV
from test_fsync_after_apply_s37 import remove_h1
from test_sweep_race_s34 import _store as expired_store

from md_cg import MdCG, fsops, journal, paths, was_logged

#: Another process's write of ``h1``, acknowledged (exit 0): argv[2] is the operation.
_WRITE = """
import sys
from md_cg import MdCG
with MdCG(sys.argv[1], auto_compact=None) as m:
    if sys.argv[2] == "add":
        m.add(id="h1", body="NEW h1 added by another process", layer="contextual")
    elif sys.argv[2] == "update":
        m.update("h1", body="h1 as another process updated it")
    else:
        m.forget("h1", "forgotten by another process")
"""


def _other(root: Path, op: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _WRITE, str(root), op], env=_ENV, capture_output=True, text=True
    )
    assert (done.returncode, done.stderr) == (0, "")


def _files(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "contextual").glob("*.md"))


def _body(root: Path, node_id: str) -> str:
    return (root / "contextual" / f"{node_id}.md").read_text().split("---\n", 2)[2].strip()


def _store(root: Path) -> None:
    with MdCG(root) as m:
        m.add(id="h1", body="old h1", layer="contextual")
        m.add(id="other", body="other", layer="contextual")


def _fail_closing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The second fsync (the folders, after the renames and unlinks) fails with EIO, and
    then every ``done`` line fails with ENOSPC: the commit stays open, its process alive."""
    real_fsync, real_append, calls = fsops.fsync_all, fsops.ShardWriter.append, []

    def fsync(work: object) -> None:
        calls.append(work)
        if len(calls) == 2:
            raise OSError(errno.EIO, "EIO (injected)")
        real_fsync(work)  # type: ignore[arg-type]

    def append(self: fsops.ShardWriter, records: Iterable[dict], **kw: bool) -> tuple[int, int]:
        records = list(records)  # an audit log's are a generator (a rename's record: session 39)
        if len(calls) >= 2 and records and records[0].get("op") == "done":
            raise OSError(errno.ENOSPC, "No space left on device (injected)")
        return real_append(self, records, **kw)

    monkeypatch.setattr(fsops, "fsync_all", fsync)
    monkeypatch.setattr(fsops.ShardWriter, "append", append)


@pytest.mark.parametrize("recovered_by", ["itself", "another"])
@pytest.mark.parametrize("op", ["forget", "delete", "rename"])
def test_an_add_after_a_write_left_open_survives_the_recovery(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, op: str, recovered_by: str
) -> None:
    root = tmp_path / "m"
    _store(root)
    w = MdCG(root, durable=True, auto_compact=None)
    _fail_closing(monkeypatch)
    with pytest.raises(OSError, match="EIO") as raised:
        remove_h1(w, op)
    monkeypatch.undo()
    assert was_logged(raised.value)
    # a forget's scrub compacts, and its recovery closes the commit (session 39): the add comes
    # after a forget closed (tests/test_forget_twofault_s39.py: one left open by the scrub)
    failed = [] if op == "forget" else [{"h1", "h9"} if op == "rename" else {"h1"}]
    assert [c.ids for c in w._engine.journal.failed] == failed
    assert _files(root) == (["h9.md", "other.md"] if op == "rename" else ["other.md"])
    _other(root, "add")
    assert _files(root) == (["h1.md", "h9.md", "other.md"] if op == "rename" else ["h1.md", "other.md"])
    if recovered_by == "itself":
        w.compact_index()  # before: its own recovery removed the new h1.md (no time known: no slack)
        w.close()
    else:
        w.close()  # its commit stays open in the log, with the line's time
        with MdCG(root, auto_compact=None) as c:
            c.compact_index()  # before: removed the new h1.md, changed within 2 s of the line
    assert _files(root) == (["h1.md", "h9.md", "other.md"] if op == "rename" else ["h1.md", "other.md"])
    assert _body(root, "h1") == "NEW h1 added by another process"
    with MdCG(root) as fresh:
        assert fresh.health().by_kind("open_commit") == []
        assert sorted(fresh.ids()) == (["h1", "h9", "other"] if op == "rename" else ["h1", "other"])
        report = fresh.sync()
        assert (report.added, report.deleted, report.changed, report.recovered) == ((), (), (), 0)
        assert fresh.get("h1").body.strip() == "NEW h1 added by another process"


def left_open(
    root: Path, monkeypatch: pytest.MonkeyPatch, write: Callable[[MdCG], object]
) -> tuple[MdCG, BaseException]:
    """A fresh store at ``root`` and a handle whose ``write`` failed open (its renames into
    place fail: :func:`_failing_rename`), the faults taken off; the handle and the error."""
    _store(root)
    w = MdCG(root, auto_compact=None)
    _failing_rename(w, monkeypatch)
    with pytest.raises(OSError, match="EIO") as raised:
        write(w)
    monkeypatch.undo()
    w._engine.journal.fault = None
    return w, raised.value


def _failing_rename(w: MdCG, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every rename into place fails (EIO) once the commit line is written: the commit
    stays open with its temp files, its process alive. (Session 41: a file an update read
    is put in place by an exchange, which fails alike.)"""
    real, armed = fsops.Dir.replace, []

    def replace(self: fsops.Dir, src: str, dst: str) -> None:
        if armed:
            raise OSError(errno.EIO, "EIO (injected)")
        real(self, src, dst)

    real_exchange = fsops.Dir.exchange

    def exchange(self: fsops.Dir, a: str, b: str) -> bool:
        if armed:
            raise OSError(errno.EIO, "EIO (injected)")
        return real_exchange(self, a, b)

    real_new = fsops.Dir.rename_new

    def rename_new(self: fsops.Dir, src: str, dst: str) -> bool:  # a put to a new path (session 43)
        if armed:
            raise OSError(errno.EIO, "EIO (injected)")
        return real_new(self, src, dst)

    w._engine.journal.fault = lambda step: armed.append(step) if step == "logged" else None
    monkeypatch.setattr(fsops.Dir, "replace", replace)
    monkeypatch.setattr(fsops.Dir, "exchange", exchange)
    monkeypatch.setattr(fsops.Dir, "rename_new", rename_new)


@pytest.mark.parametrize("then", ["update", "forget"])
def test_a_write_after_an_update_left_open_survives_the_recovery(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, then: str
) -> None:
    """The puts side: the open update's temp file is not renamed over another process's later
    update, nor brings back the memory another process forgot since."""
    root = tmp_path / "m"
    w, error = left_open(root, monkeypatch, lambda w: w.update("h1", body="h1 as the failed update has it"))
    assert was_logged(error)
    assert [c.ids for c in w._engine.journal.failed] == [{"h1"}]
    assert _body(root, "h1") == "old h1"
    _other(root, then)
    w.compact_index()  # before: the failed update's temp file was renamed into place here
    assert _files(root) == (["h1.md", "other.md"] if then == "update" else ["other.md"])
    assert [p.name for p in (root / "contextual").iterdir() if p.name.startswith(".")] == []  # temp gone
    if then == "update":
        assert _body(root, "h1") == "h1 as another process updated it"
    w.close()
    with MdCG(root) as fresh:
        assert sorted(fresh.ids()) == (["h1", "other"] if then == "update" else ["other"])
        report = fresh.sync()
        assert (report.added, report.deleted, report.changed, report.recovered) == ((), (), (), 0)


def test_an_update_left_open_is_still_finished_when_nothing_changed_since(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "m"
    w, _ = left_open(root, monkeypatch, lambda w: w.update("h1", body="h1 as the failed update has it"))
    w.compact_index()
    assert _body(root, "h1") == "h1 as the failed update has it"
    assert w.get("h1").body.strip() == "h1 as the failed update has it"
    w.close()


def _forget_and_die(root: str, step: str) -> None:
    m = MdCG(root, durable=True, auto_compact=None)
    m._engine.journal.fault = lambda name: os.kill(os.getpid(), signal.SIGKILL) if name == step else None
    m.forget("h1", "done with it")


@pytest.mark.parametrize("step", ["logged", "deleted"])
def test_an_add_after_a_killed_forget_survives(tmp_path: Path, step: str) -> None:
    """The same shape with a SIGKILL instead of the faults is not lost (before either): the
    other process's add finds the commit's writer dead and finishes it before writing."""
    root = tmp_path / "m"
    _store(root)
    assert stress.wait(stress.fork(_forget_and_die, str(root), step)) == -signal.SIGKILL
    _other(root, "add")
    with MdCG(root, auto_compact=None) as m:
        m.compact_index()
        assert _files(root) == ["h1.md", "other.md"]
        assert _body(root, "h1") == "NEW h1 added by another process"
        report = m.sync()
        assert (report.added, report.deleted, report.changed, report.recovered) == ((), (), (), 0)


def _save_by_hand(path: Path, body: str) -> None:
    """An editor's save: a new file renamed over the old one."""
    tmp = path.with_name(f".{path.name}.swp")
    tmp.write_text(path.read_text().replace("old h1", body))
    os.replace(tmp, path)


def _strip_stamps(root: Path) -> None:
    """Rewrite the log's commit lines as an earlier version wrote them (no stamps)."""
    for shard in (root / paths.META_DIR / paths.LOG_DIR).glob("*.jsonl"):
        lines = []
        for line in shard.read_text().splitlines():
            rec = json.loads(line)
            rec.pop("replaces", None)
            rec.pop("removes", None)
            lines.append(json.dumps(rec))
        shard.write_text("".join(f"{line}\n" for line in lines))


@pytest.mark.parametrize("old_format", [False, True])
def test_a_file_saved_by_hand_after_a_killed_forget(tmp_path: Path, old_format: bool) -> None:
    """A forget killed after its line, then ``h1.md`` saved by hand at once (a new inode):
    the recovery keeps it (before: removed within the 2 s of slack). A line of an earlier
    version (no stamps) is recovered as before: by the file's ctime alone, so the save
    within 2 s is removed -- old logs still read and act."""
    root = tmp_path / "m"
    _store(root)
    assert stress.wait(stress.fork(_forget_and_die, str(root), "logged")) == -signal.SIGKILL
    if old_format:
        _strip_stamps(root)
    _save_by_hand(root / "contextual" / "h1.md", "h1 saved by hand after the crash")
    with MdCG(root, auto_compact=None) as m:
        report = m.sync()
        assert report.recovered == 1
        if old_format:
            assert (report.left_as_edited, report.finished_deletes) == ((), (("h1", "contextual/h1.md"),))
            assert _files(root) == ["other.md"]
        else:
            assert (report.left_as_edited, report.finished_deletes) == (("h1",), ())
            assert _files(root) == ["h1.md", "other.md"]
            assert _body(root, "h1") == "h1 saved by hand after the crash"


def test_a_killed_forget_unchanged_is_finished_and_old_lines_too(tmp_path: Path) -> None:
    """Nothing changed after the kill: the recovery removes the file, with stamps or without."""
    for old_format in (False, True):
        root = tmp_path / f"m{old_format}"
        _store(root)
        assert stress.wait(stress.fork(_forget_and_die, str(root), "logged")) == -signal.SIGKILL
        if old_format:
            _strip_stamps(root)
        os.chmod(root / "contextual" / "h1.md", 0o600)  # moves the ctime, not the stamp
        with MdCG(root, auto_compact=None) as m:
            report = m.sync()
            assert (report.recovered, report.finished_deletes) == (1, (("h1", "contextual/h1.md"),))
            assert _files(root) == ["other.md"]


def test_a_commit_line_logs_the_stamps_of_the_files_it_replaces_and_removes(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _store(root)
    h1 = os.lstat(root / "contextual" / "h1.md")
    with MdCG(root, auto_compact=None) as m:
        m.rename("h1", "h9")
    (shard,) = (root / paths.META_DIR / paths.LOG_DIR).glob("*.jsonl")
    commits = [r for r in map(json.loads, shard.read_text().splitlines()) if r["op"] == "commit"]
    assert [(r["put"][0][:2], r["del"], r["replaces"], r["removes"]) for r in commits[-1:]] == [
        (
            ["h9", "contextual/h9.md"],
            [["h1", "contextual/h1.md"]],
            [None],
            [[h1.st_ino, h1.st_mtime_ns, h1.st_size]],
        )
    ]
    parsed = journal.parse_commit("x.jsonl", commits[-1])
    assert parsed is not None
    assert (parsed.replaces, parsed.removes) == ((None,), ((h1.st_ino, h1.st_mtime_ns, h1.st_size),))
    for bad in ([[1, 2]], [["1", 2, 3]], [None, None], "x"):
        assert journal.parse_commit("x.jsonl", {**commits[-1], "removes": bad}).removes is None  # type: ignore[union-attr]


#: The sweeper: saves two expired memories by hand once the sweep's renames are done (its
#: unlinks next), and is killed after its unlinks, before its ``done`` line.
def _sweep_and_die(root: str, saved: list[str]) -> None:
    m = MdCG(root, auto_compact=None)

    def fault(step: str) -> None:
        if step == "renamed":
            for i in saved:
                p = Path(root) / "knowledge" / "orphan" / f"{i}.md"
                tmp = p.with_name(f".{p.name}.swp")
                tmp.write_bytes(p.read_bytes().replace(b'retention_tier: "temp"', b'retention_tier: "long"'))
                os.replace(tmp, p)
        elif step == "deleted":
            os.kill(os.getpid(), signal.SIGKILL)

    m._engine.journal.fault = fault
    m.sweep(dry_run=False)


def test_a_sweep_killed_after_its_unlinks_keeps_the_files_saved_meanwhile(tmp_path: Path) -> None:
    """docs/retention.md's window (attack a3 of session 34: 150 of 150 saves lost): the sweep
    spared the files saved after it read them, then was killed before its ``done``; the
    recovery removed them (within 2 s of the line). Now it compares the stamps as read."""
    root = tmp_path / "m"
    expired_store(root, 5)  # e000...e004 expired, and future, kept_long and plain
    assert stress.wait(stress.fork(_sweep_and_die, str(root), ["e001", "e003"])) == -signal.SIGKILL
    orphan = root / "knowledge" / "orphan"
    left = ["e001", "e003", "future", "kept_long", "plain"]
    assert sorted(p.stem for p in orphan.glob("*.md")) == left
    with MdCG(root, auto_compact=None) as m:
        report = m.sync()
        assert (report.recovered, report.left_as_edited) == (1, ("e001", "e003"))
        assert sorted(p.stem for p in orphan.glob("*.md")) == left  # before: e001 and e003 removed
        for i in ("e001", "e003"):
            assert b'retention_tier: "long"' in (orphan / f"{i}.md").read_bytes()
        assert sorted(m.ids()) == left


@pytest.mark.parametrize("killed", [False, True])
def test_a_hard_linked_copy_goes_with_the_memory(tmp_path: Path, killed: bool) -> None:
    """Attack a5 of session 34 on the stamps tried then (they held the ctime, which moves
    when the other link goes): a hard-linked copy was left behind by every forget. The
    stamps logged now are (inode, mtime, size): the copy goes, killed or not."""
    root = tmp_path / "m"
    _store(root)
    copy = root / "knowledge" / "orphan" / "h1.md"
    copy.parent.mkdir(parents=True)
    os.link(root / "contextual" / "h1.md", copy)
    if killed:
        assert stress.wait(stress.fork(_forget_and_die, str(root), "logged")) == -signal.SIGKILL
        with MdCG(root, auto_compact=None) as m:
            report = m.sync()
            assert (report.recovered, report.left_as_edited) == (1, ())
    else:
        with MdCG(root, auto_compact=None) as m:
            (gone,) = m.forget_many(["h1"], "done with it")
            assert gone.copies == ("knowledge/orphan/h1.md",)
    assert _files(root) == ["other.md"]
    assert not copy.exists()
