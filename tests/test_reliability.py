"""No acknowledged write is lost: races, kills at every step, leftovers, forget, twins.

The short versions of ``bench/stress.py`` (the same functions, smaller
numbers). Everything concurrent or crash-related runs real processes: forked
children killed with SIGKILL, at a chosen step of the commit protocol
(``journal.fault``) or at a random moment.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from stresslib import stress
from typer.testing import CliRunner

from md_cg import MdCG, Node, Scope, fsops
from md_cg.cli import app
from md_cg.errors import (
    DuplicateIdError,
    IdCollisionError,
    InvalidArgumentError,
    LockTimeoutError,
)
from md_cg.script import twin_labels

# -- 1. the existence check and the write of one id are atomic across processes ------------------


def test_two_handles_reproduction_from_the_issue(tmp_path: Path) -> None:
    R = tmp_path / "m"
    a, b = MdCG(R), MdCG(R)
    a.add(Node(id="X", layer="self", body="x"))
    with pytest.raises(DuplicateIdError, match=r"node id 'X' already exists at self/X\.md"):
        b.add(Node(id="X", layer="contextual", body="x"))
    a.add(Node(id="O", layer="structural", body="v1"))
    b.refresh()
    b.add(Node(id="O", layer="knowledge", body="v2"), overwrite=True)
    v3 = a.add(Node(id="O", layer="structural", body="v3"), overwrite=True)  # returns normally
    a.close()
    b.close()
    with MdCG(R) as fresh:
        assert fresh.get("O").body == "v3"
        assert fresh.get("O").updated_at == v3.updated_at
        report = fresh.sync()
        assert report.clean, report
        assert fresh.entry("O").path == "structural/O.md"
    assert sorted(p.relative_to(R).as_posix() for p in R.rglob("*.md")) == ["self/X.md", "structural/O.md"]


def test_same_id_race_eight_processes(tmp_path: Path) -> None:
    """8 processes add and overwrite the same 50 ids (moving them between layers)."""
    r = stress.same_id_race(tmp_path / "m", procs=8, n_ids=50, rounds=3)
    assert r.writes == 8 * 50 * 3
    assert r.other_outcomes == []  # every write returned, or was a plain add that raised DuplicateIdError
    assert set(r.files_per_id.values()) == {1}  # exactly one file per id
    assert r.plain_adds_ok == {f"race-{i:03d}": 1 for i in range(50)}  # one plain add per id succeeded
    assert r.repeated_stamps == []  # updated_at strictly increases over one id's writes
    assert r.disk_body == r.last_ok_body  # the file holds the last write that returned
    assert r.problems == []


def test_writers_and_overwriters_with_a_compactor(tmp_path: Path) -> None:
    row = stress.writers(tmp_path / "m", procs=8, ops=40, rounds=2)
    assert (row.lost, row.extra, row.corrupt, row.errors, row.notes) == (0, 0, 0, 0, [])


# -- 10. a batch killed at any step is all or nothing after recovery ----------------------------

CASES = [
    (step, mode)
    for step in stress.batch_steps(200)
    for mode in ("new", "overwrite", "move")
    if step != "deleted" or mode == "move"
]


@pytest.mark.parametrize(("step", "mode"), CASES, ids=[f"{s}-{m}" for s, m in CASES])
def test_killed_batch_is_all_or_nothing(tmp_path: Path, step: str, mode: str) -> None:
    r = stress.batch_fault(tmp_path / "m", step, mode=mode, n=200)
    assert r["exit"] == -signal.SIGKILL  # the child really died at that step
    ids = sorted(r["bodies"])
    old = {i: (None if mode == "new" else f"old {i}") for i in ids}
    new = {i: f"new {i}" for i in ids}
    # Killed before the commit line: nothing happened. After it: rolled forward whole.
    assert r["bodies"] == (old if step == "temps" else new)
    assert r["recovered"] == (0 if step == "temps" else 1)
    assert (r["doubled"], r["unreadable"], r["temps"], r["problems"]) == ([], [], [], [])
    # The kill really hit where it should: k of the 200 renames had landed before recovery.
    landed = (
        int(step.split("-")[1]) if step.startswith("rename-") else {"temps": 0, "logged": 0}.get(step, 200)
    )
    assert r["landed_before_sync"] == landed


def _add_batch_then_crash(root: str) -> None:
    s = MdCG(root, auto_compact=None)
    stress.crash_at(s, "rename-50")
    s.add_many([Node(id=f"b{i:03d}", layer="self", body=f"new {i}") for i in range(200)])


def test_the_next_write_of_one_id_finishes_a_killed_batch(tmp_path: Path) -> None:
    root = tmp_path / "m"
    MdCG(root).close()
    assert stress.wait(stress.fork(_add_batch_then_crash, str(root))) == -signal.SIGKILL
    assert len(stress.read_disk(root).ids) == 50
    with MdCG(root, auto_compact=None) as s:
        s.update("b150", body="edited")  # its stripe meets the dead commit: rolled forward first
        assert s.health().by_kind("open_commit") == []
    disk = stress.read_disk(root)
    assert disk.ids == {f"b{i:03d}" for i in range(200)}
    assert disk.body("b150") == "edited" and disk.body("b007") == "new 7"


def test_random_sigkills_on_every_write_path(tmp_path: Path) -> None:
    rows = stress.kill_rounds(tmp_path, 10, batch=50, kinds=stress.KILL_KINDS)
    assert set(rows) == set(stress.KILL_KINDS)
    for kind, row in rows.items():
        assert (row.lost, row.extra, row.corrupt, row.outside, row.errors, row.notes) == (
            0,
            0,
            0,
            0,
            0,
            [],
        ), kind


# -- 5. scan races -----------------------------------------------------------------------------------


def test_health_sync_and_open_while_files_move(tmp_path: Path) -> None:
    row = stress.scan_races(tmp_path / "m", rounds=40, movers=2)
    assert (row.errors, row.notes, row.lost, row.corrupt) == (0, [], 0, 0)


def test_scan_treats_a_vanishing_entry_as_absent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Deterministic: entries vanish between listing their folder and looking at them."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="a", layer="self", body="a"))
        s.add(Node(id="k", layer="knowledge", tags=["domain:d"], body="k"))
    real_lstat, real_open = os.lstat, os.open

    def lstat(path, *args, dir_fd=None, **kw):  # type: ignore[no-untyped-def]
        if dir_fd is not None and str(path).endswith(".md"):
            raise FileNotFoundError(2, "vanished", str(path))
        return real_lstat(path, *args, dir_fd=dir_fd, **kw)

    def open_(path, flags, *args, dir_fd=None, **kw):  # type: ignore[no-untyped-def]
        if dir_fd is not None and str(path).startswith("cond_"):
            raise FileNotFoundError(2, "vanished", str(path))  # a bucket folder moved away
        return real_open(path, flags, *args, dir_fd=dir_fd, **kw)

    monkeypatch.setattr(os, "lstat", lstat)
    monkeypatch.setattr(os, "open", open_)
    for layer in ("self", "knowledge"):
        found = fsops.scan(str(root), layer)
        assert (found.files, found.symlinks, found.other, found.too_deep) == ({}, [], [], [])


# -- 6. maintenance is not starved by writers -----------------------------------------------------


def test_compaction_and_rebuild_get_the_lock_within_5s_under_8_writers(tmp_path: Path) -> None:
    """Durable writers hold the store lock long enough that, without the gate, maintenance
    gives up (bench/stress.py measures that); with it, it waits milliseconds."""
    r = stress.maintenance_waits(tmp_path / "m", writers_=8, compactions=3, rebuilds=2, durable=True)
    assert r["errors"] == []
    assert len(r["waits"]["compact"]) == 3 and len(r["waits"]["rebuild"]) == 2
    assert max(r["waits"]["compact"] + r["waits"]["rebuild"]) < 5.0
    assert r["nodes"] > 300  # the writers did write meanwhile


def test_a_waiting_maintenance_closes_the_gate_to_new_writers(tmp_path: Path) -> None:
    """While maintenance waits for running writers, a new writer waits behind it."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="a", layer="self", body="a"))
    first = _maint_lock(root)
    maint = _maint_lock(root)
    with first.shared(1.0):  # a running writer
        assert maint.gate.try_acquire()  # maintenance closes the gate, then waits for the writer
        later = _maint_lock(root)
        with pytest.raises(Exception, match="maintenance gate"), later.shared(0.05):
            pass
        maint.gate.release()
    for lock in (first, maint, later):
        lock.close()


# -- 9. forget ----------------------------------------------------------------------------------------


def test_forget_leaves_no_byte_of_the_node_under_the_root(tmp_path: Path) -> None:
    root = tmp_path / "m"
    (root / ".mdcg" / "trash" / "old").mkdir(parents=True)
    (root / ".mdcg" / "trash" / "old" / "secret.md").write_text(stress.secret_node().body)
    found = stress.forget_scrub(root)
    assert found == {}
    needles = stress.secret_needles()
    assert {"zorbifi", "quuxplorbl", "xylophon", "password"} <= set(needles)  # the index's own forms
    with MdCG(root) as s:
        assert [(t["id"], t["reason"]) for t in s.tombstones()] == [("secret", "the user asked")]
        assert "secret" not in s and s.search("zorbified password")[0][0].id == "other"


def test_the_grep_would_see_a_left_copy(tmp_path: Path) -> None:
    """The check above can fail: before forget, the secret is in files, log and snapshot."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(stress.secret_node())
        s.compact_index()
        s.add(Node(id="after", layer="self", body="after the snapshot"))
        s.update("secret", body=stress.secret_node().body + "zorbified again")
        found = stress.grep_root(root, stress.secret_needles())
    assert {"knowledge/cond_xylophonic_e74a5777/secret.md", ".mdcg/index.snapshot"} <= set(found)
    assert any(k.startswith(".mdcg/log/") for k in found)


FORGET_STEPS = ("before-tombstone", "after-tombstone", "logged", "deleted", "scrub")


def _forget_and_crash(root: str, step: str) -> None:
    from md_cg import logs, maintenance

    s = MdCG(root, auto_compact=None)
    die = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)  # noqa: E731
    if step == "before-tombstone":
        logs.AppendLog.append = die  # type: ignore[method-assign]
    elif step == "after-tombstone":
        stress.crash_at(s, "temps")  # the first step of the removal
    elif step == "scrub":
        maintenance.compact = die  # type: ignore[assignment]
    else:
        stress.crash_at(s, step)
    s.forget("secret", "asked")


@pytest.mark.parametrize("step", FORGET_STEPS)
def test_a_killed_forget_leaves_the_node_or_its_tombstone(tmp_path: Path, step: str) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(stress.secret_node())
    assert stress.wait(stress.fork(_forget_and_crash, str(root), step)) == -signal.SIGKILL
    with MdCG(root, auto_compact=None) as s:
        s.sync()
        present = "secret" in s
        tombstoned = [t["id"] for t in s.tombstones()] == ["secret"]
    assert present or tombstoned
    expected = {
        "before-tombstone": (True, False),
        "after-tombstone": (True, True),
        "logged": (False, True),  # the removal was logged: sync rolled it forward
        "deleted": (False, True),
        "scrub": (False, True),
    }
    assert (present, tombstoned) == expected[step]


# -- 11. leftovers, synonyms, duplicates ------------------------------------------------------------


def _compact_and_crash(root: str) -> None:
    s = MdCG(root, auto_compact=None)
    real = fsops.Dir.replace

    def replace(self: fsops.Dir, src: str, dst: str) -> None:
        if dst == "index.snapshot":
            os.kill(os.getpid(), signal.SIGKILL)  # the temp snapshot is written, not renamed
        real(self, src, dst)

    fsops.Dir.replace = replace  # type: ignore[method-assign]
    s.compact_index()


def _add_and_crash(root: str) -> None:
    s = MdCG(root, auto_compact=None)
    stress.crash_at(s, "temps")
    s.add(Node(id="half", layer="self", body="never logged"))


def test_temp_leftovers_of_killed_processes_are_reported_and_removed(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="a", layer="self", body="a"))
        s.search("a")
    for child in (_compact_and_crash, _add_and_crash):
        assert stress.wait(stress.fork(child, str(root))) == -signal.SIGKILL
    (root / ".mdcg" / "access").mkdir(exist_ok=True)
    (root / ".mdcg" / "access" / f".{4194303}_dead.creating.tmp").write_bytes(b"")
    with MdCG(root, auto_compact=None) as s:
        temps = sorted(f.path for f in s.health().findings if f.kind == "temp_file")
        assert len(temps) == 3, temps
        assert temps[0] == ".mdcg/.index.snapshot." + temps[0].split("snapshot.", 1)[1]
        assert re.fullmatch(r"\.mdcg/\.index\.snapshot\.\d+\.[0-9a-f]+\.tmp", temps[0])
        assert temps[1] == ".mdcg/access/.4194303_dead.creating.tmp"
        assert re.fullmatch(r"self/\.half\.md\.\d+\.[0-9a-f]+\.tmp", temps[2])
        assert sorted(s.sync().temp_removed) == temps
        assert s.health().ok
        assert "half" not in s
    assert list(root.rglob(".*.tmp")) == []


def test_compaction_removes_temp_leftovers_too(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="a", layer="self", body="a"))
    assert stress.wait(stress.fork(_compact_and_crash, str(root))) == -signal.SIGKILL
    assert len(list((root / ".mdcg").glob(".index.snapshot.*.tmp"))) == 1
    with MdCG(root, auto_compact=None) as s:
        s.compact_index()
        assert s.health().ok
    assert list((root / ".mdcg").glob(".index.snapshot.*.tmp")) == []


def test_a_live_writers_temp_file_is_kept(tmp_path: Path) -> None:
    root = tmp_path / "m"
    MdCG(root).close()
    mine = root / "self" / fsops.temp_name("x.md")
    mine.write_bytes(b"being written")
    with MdCG(root, auto_compact=None) as s:
        assert s.sync().temp_removed == ()
        assert [f.path for f in s.health().findings] == [mine.relative_to(root).as_posix()]
    assert mine.exists()


def test_conflicted_synonyms_file_keeps_search_working(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="n1", layer="self", body="the deadline is friday"))
    (root / ".mdcg" / "synonyms.json").write_text(
        '<<<<<<< HEAD\n{"groups": [["deadline", "due date"]]}\n=======\n{"groups": []}\n>>>>>>> theirs\n'
    )
    with MdCG(root) as s:
        assert [r.id for r in s.search("deadline")[0]] == ["n1"]
        findings = s.health().by_kind("synonyms_file")
    assert len(findings) == 1
    detail = findings[0].detail
    assert "synonyms.json" in detail and "searching with the shipped synonym table instead" in detail


def test_the_same_new_id_in_two_layers_is_reported_never_trashed(tmp_path: Path) -> None:
    root = tmp_path / "m"
    MdCG(root).close()
    for layer in ("self", "contextual"):
        (root / layer / "dup.md").write_text(f"---\nid: dup\nlayer: {layer}\n---\nin {layer}\n")
    with MdCG(root) as s:
        report = s.sync()
        assert len(report.duplicates) == 1 and report.duplicates[0][0] == "dup"
        assert report.problems
        assert [f.node_id for f in s.health().by_kind("duplicate_id")] == ["dup"]
        s.compact_index()
        s.rebuild_index()
    assert (root / "self" / "dup.md").exists() and (root / "contextual" / "dup.md").exists()
    assert not (root / ".mdcg" / "trash").exists()


# -- 14. ids that collide on case-insensitive, normalising file systems -------------------------------


@pytest.mark.parametrize(
    ("first", "second"), [("Foo", "foo"), ("caf\u00e9", "cafe\u0301")], ids=["case", "nfd"]
)
def test_a_twin_id_is_refused(tmp_path: Path, first: str, second: str) -> None:
    with MdCG(tmp_path / "m") as s:
        s.add(Node(id=first, layer="self", body="first"))
        for call in (
            lambda: s.add(Node(id=second, layer="contextual", body="second")),
            lambda: s.add(Node(id=second, layer="self", body="second"), overwrite=True),
            lambda: s.add_many([Node(id=second, layer="self", body="second")]),
        ):
            # an NFC/NFD pair is printed escaped, 'caf\\u00e9' (session 33)
            with pytest.raises(
                IdCollisionError, match=re.escape(f"with the existing id {twin_labels(second, first)[1]}")
            ):
                call()
        assert s.ids() == [first]


def test_a_twin_already_on_disk_is_reported_by_health_and_sync(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="Foo", layer="self", body="upper"))
        s.add(Node(id="caf\u00e9", layer="self", body="nfc"))
    (root / "contextual" / "foo.md").write_text("---\nid: foo\nlayer: contextual\n---\nlower\n")
    (root / "contextual" / "cafe\u0301.md").write_text("---\nid: cafe\u0301\nlayer: contextual\n---\nnfd\n")
    with MdCG(root) as s:
        report = s.sync()
        assert sorted(report.twins) == sorted([("Foo", "foo"), ("cafe\u0301", "caf\u00e9")])
        twins = sorted((f.node_id, f.path) for f in s.health().by_kind("twin_id"))
    assert twins == sorted(
        [
            ("Foo", "self/Foo.md"),
            ("foo", "contextual/foo.md"),
            ("caf\u00e9", "self/caf\u00e9.md"),
            ("cafe\u0301", "contextual/cafe\u0301.md"),
        ]
    )


def _maint_lock(root: Path) -> fsops.MaintenanceLock:
    return fsops.MaintenanceLock(str(root), ".mdcg/lock", ".mdcg/gate", ".mdcg/waiting")


_WAIT_AT_THE_GATE = """
import sys, time
from md_cg import fsops
lock = fsops.MaintenanceLock(sys.argv[1], ".mdcg/lock", ".mdcg/gate", ".mdcg/waiting")
with lock.shared(30.0):
    print(time.monotonic(), flush=True)
"""


class _PauseClock:
    """fsops' ``time`` with its sleeps recorded: a maintenance lock's pause is its only
    sleep longer than a lock poll (5 ms). ``on_pause`` runs as a pause starts."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []
        self.on_pause: Callable[[], None] = lambda: None

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if seconds > 0.005:
            self.on_pause()
        time.sleep(seconds)


def test_back_to_back_maintenance_leaves_waiting_writers_their_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether a hold paused is read from the sleeps it made, not from a wall-clock bound (a
    loaded machine can stall any step for 0.1 s). The waiting writer is stopped (SIGSTOP)
    from the end of the hold until the next hold's pause starts: left running, it could
    slip in during the few microseconds between the two holds on a loaded machine, and the
    next hold rightly found nobody waiting and did not pause."""
    root = tmp_path / "m"
    MdCG(root).close()
    maint = _maint_lock(root)
    clock = _PauseClock()
    monkeypatch.setattr(fsops, "time", clock)
    with maint.exclusive(5.0):
        time.sleep(0.3)
    clock.sleeps.clear()
    with maint.exclusive(5.0):  # nobody waits for the lock: no pause
        assert clock.sleeps == []
        # a writer process finds the gate closed and waits, marked as waiting
        writer = subprocess.Popen(
            [sys.executable, "-c", _WAIT_AT_THE_GATE, str(root)], stdout=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 120
        while not maint._writer_waiting():
            assert writer.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.3)
        os.kill(writer.pid, signal.SIGSTOP)  # marked as waiting until the pause starts
    try:
        released = time.monotonic()
        clock.sleeps.clear()
        clock.on_pause = lambda: os.kill(writer.pid, signal.SIGCONT)
        with maint.exclusive(5.0):
            waited = time.monotonic() - released
            assert not maint._writer_waiting()
    finally:
        os.kill(writer.pid, signal.SIGCONT)
    out, _ = writer.communicate(timeout=60)
    got_in = float(out.split()[0])
    # one pause, as long as the last hold lasted (from 0.3 s, at most MAINTENANCE_YIELD_MAX),
    # then at most lock polls; the writer got its turn during the pause
    pause, *polls = clock.sleeps
    assert 0.28 <= pause <= fsops.MAINTENANCE_YIELD_MAX and all(p <= 0.005 for p in polls)
    assert released <= got_in < released + waited
    assert pause <= waited < pause + 1.0
    other = _maint_lock(root)
    with other.waiting.hold(shared=True):  # a writer waiting
        clock.sleeps.clear()
        with maint.exclusive(0.0):  # a caller that cannot wait (close() compacts with timeout 0) does not
            assert clock.sleeps == []
    maint.close()
    other.close()


def test_a_folder_planted_at_the_waiting_mark_breaks_no_lock(tmp_path: Path) -> None:
    root = tmp_path / "m"
    MdCG(root).close()
    (root / ".mdcg" / "waiting").mkdir()
    maint, writer = _maint_lock(root), _maint_lock(root)
    assert maint._writer_waiting()  # it cannot tell: it leaves writers their pause, as before
    # the gate closed: the writer cannot mark itself, and still waits, then times out
    with maint.exclusive(5.0), pytest.raises(LockTimeoutError, match="maintenance gate"), writer.shared(0.05):
        pass
    with writer.shared(1.0):
        pass
    maint.close()
    writer.close()
    with MdCG(root) as s:
        s.add(Node(id="a", layer="self", body="a"))
        s.compact_index()
        assert s.get("a").body == "a"


def _log_a_commit_and_die(root: str) -> None:
    s = MdCG(root, auto_compact=None)
    stress.crash_at(s, "logged")
    s.add(Node(id="late", layer="self", body="logged, not renamed"))


def test_temp_removal_reads_the_log_after_finding_the_writer_dead(tmp_path: Path) -> None:
    """A writer killed after logging its commit: its temp file is needed for recovery, even if
    the remover's view of the log predates the commit."""
    from md_cg import maintenance

    root = tmp_path / "m"
    MdCG(root).close()
    with MdCG(root, refresh_interval=None, auto_compact=None) as s:
        s.ids()  # the view of the log is taken now
        assert stress.wait(stress.fork(_log_a_commit_and_die, str(root))) == -signal.SIGKILL
        assert len(list((root / "self").glob(".late.md.*.tmp"))) == 1
        assert maintenance._remove_abandoned_temps(s._engine) == []
        assert s.sync().recovered == 1
        assert s.get("late").body == "logged, not renamed"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="zombies are read from /proc")
def test_a_killed_writer_not_yet_reaped_is_dead(tmp_path: Path) -> None:
    """A zombie (exited, not reaped: a container whose PID 1 does not reap) owns no temp file."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    try:
        deadline = time.monotonic() + 10
        while not Path(f"/proc/{pid}/stat").read_bytes().split(b") ")[1].startswith(b"Z"):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        os.kill(pid, 0)  # the pid still exists
        assert fsops.pid_alive(pid) is False
        assert fsops.temp_is_abandoned(f".n.md.{pid}.abc.tmp", time.time()) is True
        assert fsops.pid_alive(os.getpid()) is True
        assert fsops.temp_is_abandoned(f".n.md.{os.getppid()}.abc.tmp", time.time()) is False
    finally:
        os.waitpid(pid, 0)
    assert fsops.pid_alive(pid) is False


def test_health_names_a_duplicate_copy_after_sync_chose_the_other(tmp_path: Path) -> None:
    """After `mdcg sync` listed a copy as a duplicate, the next process's health() called
    it an untracked file and said "run sync()": a loop that led nowhere."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="d", body="orig")
        s.compact_index()
    copy = root / "self" / "d.md"
    original = (root / "knowledge" / "orphan" / "d.md").read_text("utf-8")
    copy.write_text(original.replace("orig", "copy"), "utf-8")
    with MdCG(root) as s:
        assert s.sync().duplicates == (("d", "self/d.md"),)
    with MdCG(root) as s:  # a fresh process: the duplicate list is not kept
        findings = [(f.kind, f.path, f.node_id, f.detail) for f in s.health().findings]
    assert findings == [
        (
            "duplicate_id",
            "self/d.md",
            "d",
            "another file holds this id (knowledge/orphan/d.md stands); give this file its own id: "
            "mdcg rename d NEW_ID --path self/d.md (or remove one copy)",
        )
    ]


def test_forget_removes_every_copy_sync_found_of_the_id(tmp_path: Path) -> None:
    """A copy of a memory (a cp, a merge) is a losing duplicate: forget removes it too, or the
    next sync would take it in and bring the forgotten text back."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="pw", layer="self", body="the wifi password is hunter2"))
        s.add(Node(id="other", layer="self", body="kept"))
    (root / "contextual").mkdir(exist_ok=True)
    copy = root / "contextual" / "pw.md"
    copy.write_bytes((root / "self" / "pw.md").read_bytes())
    with MdCG(root) as s:
        assert s.sync().duplicates == (("pw", "contextual/pw.md"),)
        s.forget("pw", "delete it")
        assert not copy.exists() and not (root / "self" / "pw.md").exists()
        assert s.sync().added == () and "pw" not in s
        assert [r.id for r in s.search("hunter2")[0] if not r.filler] == []
        assert [f.kind for f in s.health().findings] == []
    assert b"hunter2" not in b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())


def test_delete_removes_the_copies_and_rename_refuses_an_id_held_twice(tmp_path: Path) -> None:
    """A merge left an id in two files: ``delete`` removed one, said "deleted", and the next
    sync brought the memory back from the other; ``rename`` moved one, and the next sync
    brought the old id back beside the new one. Found by the session's git reviewer."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="cache", layer="self", body="Redis caches the session tokens."))
        s.add(Node(id="other", layer="self", body="kept"))
    copy = root / "knowledge" / "cond_infra_eb0de251" / "cache.md"
    copy.parent.mkdir(parents=True)
    copy.write_bytes((root / "self" / "cache.md").read_bytes().replace(b"session", b"login"))
    with MdCG(root) as s:
        assert s.sync().duplicates == (("cache", "knowledge/cond_infra_eb0de251/cache.md"),)
        held = r"cannot rename 'cache': it is also held by knowledge/cond_infra_eb0de251/cache.md \(a copy"
        with pytest.raises(InvalidArgumentError, match=held):
            s.rename("cache", "cache2")
        assert s.ids() == ["cache", "other"] and copy.exists()
        # the copy's text differs ("login"): another memory, not removed unasked (session 41)
        with pytest.raises(InvalidArgumentError, match="other files hold this id with a different memory"):
            s.delete("cache")
        assert copy.exists() and (root / "self" / "cache.md").exists()
        gone = s.delete("cache", all_copies=True)
        assert gone.copies == ("knowledge/cond_infra_eb0de251/cache.md",) and gone.node.body.startswith(
            "Redis"
        )
        assert not copy.exists() and not (root / "self" / "cache.md").exists()
        assert s.sync().added == () and s.ids() == ["other"]
    with MdCG(root) as s:  # a fresh handle: the copy found on disk, without a sync
        s.add(Node(id="n2", layer="self", body="two"))
        (root / "contextual").mkdir(exist_ok=True)
        (root / "contextual" / "n2.md").write_bytes((root / "self" / "n2.md").read_bytes())
    result = CliRunner().invoke(app, ["--root", str(root), "delete", "n2"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1] == "its copies removed too: contextual/n2.md"
    with MdCG(root) as s:
        assert s.sync().added == () and s.ids() == ["other"]


def test_a_scoped_forget_leaves_another_scope_s_file_of_that_id(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root, scope=Scope(agent="a")) as a:
        a.add(Node(id="note", layer="self", body="a's note"))
    (root / "contextual").mkdir(exist_ok=True)
    theirs = root / "contextual" / "note.md"
    theirs.write_text('---\nid: "note"\nlayer: "contextual"\nagent_scope: "b"\n---\nb\'s note\n')
    with MdCG(root) as s:
        assert [d[0] for d in s.sync().duplicates] == ["note"]
    with MdCG(root, scope=Scope(agent="a")) as a:
        a.forget("note", "mine goes")
    assert theirs.read_text().endswith("b's note\n") and not (root / "self" / "note.md").exists()


@pytest.mark.parametrize("synced", ["elsewhere", "never"])
def test_a_fresh_handle_s_forget_finds_the_copies_on_disk(tmp_path: Path, synced: str) -> None:
    """The copy was seen by another process's sync (or by none): a new handle (the CLI, a new
    MCP session) must still find it, or the next sync brings the text back."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="x1", layer="self", body="secret x1 text"))
    copy = root / "knowledge" / "x1.md"
    copy.parent.mkdir(exist_ok=True)
    copy.write_bytes((root / "self" / "x1.md").read_bytes())
    archived = root / "archive" / "contextual" / "x1.md"
    archived.parent.mkdir(parents=True)
    archived.write_bytes((root / "self" / "x1.md").read_bytes())
    if synced == "elsewhere":
        with MdCG(root) as other:
            assert other.sync().duplicates != ()
    with MdCG(root) as s:
        s.forget("x1", "delete it")
    assert not copy.exists() and not archived.exists()
    with MdCG(root) as s:
        assert s.sync().added == () and "x1" not in s
    assert b"secret x1" not in b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())


def test_forget_finds_copies_in_sub_folders_and_unknown_buckets(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add_many([Node(id=i, layer="self", body=f"SECRET-{i} text") for i in ("x", "y", "w")])
    for rel, node_id in [
        ("self/notes/x.md", "x"),
        ("knowledge/newtopic/y.md", "y"),
        ("archive/self/old/w.md", "w"),
    ]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes((root / "self" / f"{node_id}.md").read_bytes())
    with MdCG(root) as other:
        assert len(other.sync().duplicates) == 3
    with MdCG(root) as s:
        s.forget_many(["x", "y", "w"], "privacy")
    with MdCG(root) as s:
        assert s.sync().added == () and s.ids() == []
    assert b"SECRET-" not in b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())


def test_a_duplicate_finding_clears_once_the_copy_is_gone(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="b", layer="self", body="b text"))
    copy = root / "contextual" / "b.md"
    copy.parent.mkdir(exist_ok=True)
    copy.write_bytes((root / "self" / "b.md").read_bytes())
    with MdCG(root) as s:
        assert [d[0] for d in s.sync().duplicates] == ["b"]
        copy.unlink()
        assert s.sync().duplicates == () and s.health().findings == ()
    with MdCG(root) as s, MdCG(root, scope=Scope()) as scoped:
        assert s.sync().duplicates == () and scoped.sync().withheld == 0


def _add_then_die_mid_line(root: str) -> None:
    """A writer that logs one whole commit, then is killed while appending a long line."""
    s = MdCG(root, auto_compact=None)
    s.add(id="y", body="whole")
    fh = s._engine.journal.writer._fh
    fh.write(b'{"ts":1,"seq":9,"op":"commit","put":[' + b'["z","knowledge/z.md",".z.md.1.a.tmp"],' * 2000)
    os._exit(0)


def test_compaction_removes_a_dead_shard_that_ends_in_a_torn_line(tmp_path: Path) -> None:
    """A dead writer's shard ending in a torn line was kept by every compaction (its size
    never matched the covered offset) and its torn tail re-read on every freshness check."""
    root = tmp_path / "m"
    MdCG(root).close()
    assert stress.wait(stress.fork(_add_then_die_mid_line, str(root))) == 0
    shard = next((root / ".mdcg" / "log").glob("*.jsonl"))
    assert shard.stat().st_size > 78_000
    with MdCG(root, auto_compact=None) as s:
        report = s.compact_index()
        assert report.shards_removed == (shard.name,)
        assert report.shards_kept == ()
        assert not shard.exists()
        assert s.ids() == ["y"]
        assert s.get("y").body == "whole"
        assert s.compact_index().shards_removed == ()
    with MdCG(root) as s:
        assert s.ids() == ["y"]
