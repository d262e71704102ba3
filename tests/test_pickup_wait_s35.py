"""A memory another process only re-tags -- which moves its file between bucket folders --
must stay found through a long-lived handle's pick-up of hand edits (``sync_if_changed``,
which the MCP server runs before every tool call), and never be told, nor logged, as
deleted, moved or duplicated by hand (session 35). Before, with another process
re-tagging the memory in a loop, 3-12 in about 300 searches after a pick-up found
nothing, and a pick-up now and then told such a move: its look at the files fell inside
the other process's move (its commit line written, the new file renamed in, then the old
one removed). Now the pick-up waits until such a write closes, follows the log and looks
again (session 34's fix, 23a466c, skipped those ids instead, and hid a person's ``mv``
made while the write was open: reverted). A file removed or moved by hand -- after the
write, or while it was open -- is still told.

The writer is a real process (``_MOVER``): it moves the memory on command, holds a move
inside its commit on command, or moves it in a loop; the exact interleavings are made by
the reader calling for (or releasing) a move at the moment the race needs one. Each case
runs with inotify and with the stat-scan fallback (``md_cg.watch._libc`` patched to
return None)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import md_cg
from md_cg import MdCG, Node, index
from md_cg.errors import DuplicateIdError

_ENV = {**os.environ, "PYTHONPATH": str(Path(md_cg.__file__).resolve().parent.parent)}

ID = "pw_target"
QUERY = "quasarflux calibration"
BODY = "# quasarflux calibration\n\nThe quasarflux calibration constant is 42.\n"
COMPUTING = f"knowledge/cond_computing_2ddeaa83/{ID}.md"
PHYSICS = f"knowledge/cond_physics_742b2745/{ID}.md"

#: The other process: re-tags ID (so moves its file) once per line read: "move" moves it
#: and prints the path it put the file at; "hold <step>" stops the move at that step of its
#: commit (``logged``: its commit line written, no file changed yet; ``renamed``: the new
#: file renamed in, the old one not yet removed), prints "held", and finishes it at the
#: next line read, printing the path. "loop": moves it until the file ``stop`` exists (``ready``
#: written after its first move), then prints the number of moves.
_MOVER = """
import os, sys
from md_cg import MdCG
root, mode = sys.argv[1], sys.argv[2]
k = 0
hold = [""]
def fault(step):
    if step == hold[0]:
        hold[0] = ""
        print("held", flush=True)
        sys.stdin.readline()
with MdCG(root) as m:
    m._engine.journal.fault = fault
    def move():
        global k
        k += 1
        return m.update("pw_target", tags=["domain:physics"] if k % 2 else ["domain:computing"])
    if mode == "loop":
        move()
        open(os.path.join(root, "..", "ready"), "w").close()
        while not os.path.exists(os.path.join(root, "..", "stop")):
            move()
        print(k, flush=True)
    else:
        for line in sys.stdin:
            hold[0] = line.split()[1] if line.startswith("hold") else ""
            move()
            print(m._engine.entry("pw_target").path, flush=True)
"""


def _store(tmp_path: Path) -> Path:
    """A store with ID in the computing bucket and two other memories."""
    root = tmp_path / "s"
    with MdCG(root) as m:
        m.add(id=ID, body=BODY, tags=["domain:computing"], verification_basis="test")
        m.add(id="other1", body="# tea\n\nThe user prefers green tea.\n")
        m.add(id="other2", body="# Berlin\n\nThe meeting is in Berlin.\n")
    assert _where(root) == [COMPUTING]
    return root


def _where(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob(f"{ID}.md") if ".mdcg" not in p.parts)


def _sync_lines(root: Path) -> list[dict[str, Any]]:
    """Every ``sync`` line of the log."""
    lines = []
    for shard in sorted((root / ".mdcg" / "log").iterdir()):
        lines += [orjson.loads(x) for x in shard.read_bytes().splitlines() if x.strip()]
    return [r for r in lines if r.get("op") == "sync"]


class _Mover:
    """The writer process on command."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _MOVER, str(root), "step"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=_ENV,
            text=True,
        )

    def _say(self, line: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def move(self) -> str:
        """Move ID once; its new path."""
        return self._say("move")

    def hold(self, step: str = "logged") -> None:
        """Start a move and stop it at ``step`` (``logged``: its commit line written, no
        file changed yet; ``renamed``: the new file in, the old one still there)."""
        assert self._say(f"hold {step}") == "held"

    def release(self) -> str:
        """Finish the move :meth:`hold` started; its new path."""
        return self._say("go")


@pytest.fixture(params=["inotify", "scan"])
def mover(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[_Mover]:
    """The writer process, with this process's pick-up watching by inotify or, patched
    as on a platform without it, by stat scans."""
    if request.param == "scan":
        monkeypatch.setattr("md_cg.watch._libc", lambda: None)
    m = _Mover(_store(tmp_path))
    yield m
    assert m.proc.stdin is not None
    m.proc.stdin.close()
    assert m.proc.wait(timeout=30) == 0


def _found(s: MdCG) -> list[str]:
    results, _meta = s.search(QUERY, k=5, record=False)
    return [r.id for r in results if not r.filler]


def _during_the_pickups_look(
    s: MdCG, monkeypatch: pytest.MonkeyPatch, action: Callable[[], None], *, before: bool
) -> list[bool]:
    """Run ``action`` when the pick-up, after it followed the log, looks at COMPUTING for
    ID -- just before the look (``before``), else just after it found nothing there.
    Returns the flag that is true until it ran."""
    eng = s._engine
    real_refresh, real_parse = eng.refresh, index._stat_and_parse
    followed, armed = [False], [True]

    def refresh(*args: Any, **kwargs: Any) -> list[str]:
        changed = real_refresh(*args, **kwargs)
        followed[0] = True
        return changed

    def stat_and_parse(root_str: str, rel: str, node_id: str, *args: Any) -> Any:
        fire = followed[0] and armed[0] and node_id == ID and rel == COMPUTING
        if fire and before:
            armed[0] = False
            action()
        parsed = real_parse(root_str, rel, node_id, *args)
        if fire and not before:
            assert parsed is None  # the file is at physics
            armed[0] = False
            action()
        return parsed

    monkeypatch.setattr(eng, "refresh", refresh)
    monkeypatch.setattr(index, "_stat_and_parse", stat_and_parse)
    return armed


def _not_noted(s: MdCG, root: Path, *, lines: bool = True) -> None:
    """ID is where the writer put it, as it wrote it, not noted as moved or removed by
    hand (``add`` of it is the plain duplicate error naming its file), and (``lines``) no
    sync line names it; the next pick-up and a sync tell nothing of it."""
    assert s.sync_if_changed(min_interval=0) is None
    [path] = _where(root)
    node = s.get(ID)
    assert (node.body, node.tags) == (BODY, ["domain:computing" if path == COMPUTING else "domain:physics"])
    with pytest.raises(DuplicateIdError) as dup:
        s.add(Node(id=ID, layer="knowledge", body="again"))
    assert str(dup.value) == (
        f"node id {ID!r} already exists at {path}; update that node, "
        "or add again with overwrite to replace it"
    )
    if lines:
        assert [r for r in _sync_lines(root) if ID in str(r["put"]) + str(r["del"])] == []
    report = s.sync()
    assert (report.added, report.changed, report.deleted, report.moved) == ((), (), (), ())


def test_a_move_logged_while_the_pickup_looks_keeps_the_memory(
    mover: _Mover, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer moved the file to physics (the watch names both paths); the pick-up
    follows that move, looks at computing (nothing), then the writer moves it back to
    computing -- its commit line written after the pick-up followed the log -- before the
    pick-up looks at physics (nothing either). Before: the pick-up dropped the id and
    logged a sync line deleting it; a search found nothing."""
    with MdCG(mover.root, refresh_interval=None) as s:
        assert s.sync_if_changed(min_interval=0) is None
        assert mover.move() == PHYSICS
        armed = _during_the_pickups_look(
            s, monkeypatch, lambda: _moved_to(mover.move(), COMPUTING), before=False
        )
        assert s.sync_if_changed(min_interval=0) is None
        assert not armed[0]
        assert _where(mover.root) == [COMPUTING]
        assert _found(s) == [ID]  # no refresh (refresh_interval=None): the pick-up's view
        _not_noted(s, mover.root)


def test_an_open_commit_landing_while_the_pickup_looks_is_not_told_deleted(
    mover: _Mover, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer moved the file to physics, then logged a move back to computing and
    stopped before changing any file; the pick-up follows both lines (the second commit
    still open: the file is at physics), looks at computing (nothing), then the writer
    finishes its move before the pick-up looks at physics. Before: told ``deleted`` by
    hand, logged so, and dropped."""
    with MdCG(mover.root, refresh_interval=None) as s:
        assert s.sync_if_changed(min_interval=0) is None
        assert mover.move() == PHYSICS
        mover.hold()
        armed = _during_the_pickups_look(
            s, monkeypatch, lambda: _moved_to(mover.release(), COMPUTING), before=False
        )
        assert s.sync_if_changed(min_interval=0) is None
        assert not armed[0]
        assert _where(mover.root) == [COMPUTING]
        assert _found(s) == [ID]
        _not_noted(s, mover.root)


def test_an_open_commit_landing_before_the_pickup_looks_is_not_told_moved(
    mover: _Mover, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As above, but the writer finishes its move just before the pick-up's look at
    computing: the pick-up finds the file there, not at physics, where the followed log
    had it. Before: told ``moved`` by hand (physics -> computing) and logged so."""
    with MdCG(mover.root, refresh_interval=None) as s:
        assert s.sync_if_changed(min_interval=0) is None
        assert mover.move() == PHYSICS
        mover.hold()
        armed = _during_the_pickups_look(
            s, monkeypatch, lambda: _moved_to(mover.release(), COMPUTING), before=True
        )
        assert s.sync_if_changed(min_interval=0) is None
        assert not armed[0]
        assert _found(s) == [ID]
        _not_noted(s, mover.root)


def test_both_files_of_an_open_move_are_not_told_a_duplicate(mover: _Mover) -> None:
    """The writer moved the file to physics, then stopped its move back to computing with
    the new file renamed in and the old one not yet removed: the pick-up finds two files
    of the id; it waits for the write, which closes 0.3 s later, and looks again: one
    file. Before: told under ``duplicates`` (and again when the next move left two files
    for a moment: one pick-up in about 15 of a loop of re-tags)."""
    with MdCG(mover.root, refresh_interval=None) as s:
        assert s.sync_if_changed(min_interval=0) is None
        assert mover.move() == PHYSICS
        mover.hold("renamed")
        assert _where(mover.root) == [COMPUTING, PHYSICS]
        t, got = _released_in(mover, 0.3)  # while the pick-up waits for the write
        assert s.sync_if_changed(min_interval=0) is None
        t.join()
        assert got == [COMPUTING]
        assert _where(mover.root) == [COMPUTING]
        assert _found(s) == [ID]
        assert _found(s) == [ID]
        _not_noted(s, mover.root)


def test_a_logged_move_moved_on_before_the_pickup_judges_it_is_not_told(
    mover: _Mover, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer moved the file to physics; the pick-up follows that move. Then, while
    it looks, the writer moves the file to computing (just before the look at computing,
    which finds it there: physics is empty then) and back to physics (after the looks) --
    both commit lines appended after the pick-up followed the log. The pick-up checks the
    computing file against the line that wrote it, and finds it gone. Before: told
    ``moved`` by hand (physics -> computing) and logged so."""
    with MdCG(mover.root, refresh_interval=None) as s:
        assert s.sync_if_changed(min_interval=0) is None
        assert mover.move() == PHYSICS
        eng = s._engine
        real_refresh, real_parse, real_resolve = eng.refresh, index._stat_and_parse, index.resolve_ids
        followed, steps = [False], ["to computing", "back"]

        def refresh(*args: Any, **kwargs: Any) -> list[str]:
            changed = real_refresh(*args, **kwargs)
            followed[0] = True
            return changed

        def stat_and_parse(root_str: str, rel: str, node_id: str, *args: Any) -> Any:
            if followed[0] and node_id == ID and rel == COMPUTING and steps[:1] == ["to computing"]:
                steps.pop(0)
                assert mover.move() == COMPUTING
            return real_parse(root_str, rel, node_id, *args)

        def resolve_ids(*args: Any) -> list[str]:
            changed = real_resolve(*args)
            if len(args) == 4 and steps == ["back"]:  # the pick-up's look (a follow passes no ``before``)
                assert args[1].entries[ID].path == COMPUTING
                steps.pop(0)
                assert mover.move() == PHYSICS
            return changed

        monkeypatch.setattr(eng, "refresh", refresh)
        monkeypatch.setattr(index, "_stat_and_parse", stat_and_parse)
        monkeypatch.setattr(index, "resolve_ids", resolve_ids)
        assert s.sync_if_changed(min_interval=0) is None
        assert steps == []
        assert _where(mover.root) == [PHYSICS]
        assert _found(s) == [ID]
        _not_noted(s, mover.root)


def _moved_to(got: str, want: str) -> None:
    assert got == want


def test_a_file_removed_or_moved_by_hand_after_the_writers_moves_is_still_told(mover: _Mover) -> None:
    """After the writer's moves (followed or not), a hand ``mv`` of the file is told
    ``moved`` and a hand ``rm`` ``deleted``, each logged in a sync line, as before."""
    with MdCG(mover.root, refresh_interval=None) as s:
        assert s.sync_if_changed(min_interval=0) is None
        assert mover.move() == PHYSICS
        assert mover.move() == COMPUTING
        assert s.sync_if_changed(min_interval=0) is None
        assert mover.move() == PHYSICS
        hand = "knowledge/by_hand.md"
        os.rename(mover.root / PHYSICS, mover.root / hand)
        report = s.sync_if_changed(min_interval=0)
        assert report is not None
        assert (report.added, report.changed, report.deleted) == ((), (), ())
        assert [(m.node_id, m.old_path, m.new_path) for m in report.moved] == [(ID, PHYSICS, hand)]
        (mover.root / hand).unlink()
        report = s.sync_if_changed(min_interval=0)
        assert report is not None
        assert (report.added, report.changed, report.deleted, report.moved) == ((), (), (ID,), ())
        assert _found(s) == []
        lines = [(r["put"], r["del"]) for r in _sync_lines(mover.root)]
        assert lines == [([[ID, hand]], [[ID, PHYSICS]]), ([], [[ID, hand]])]


@pytest.mark.parametrize("watch", ["inotify", "scan"])
def test_every_pickup_and_search_keeps_a_memory_another_process_keeps_moving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, watch: str
) -> None:
    """A writer process re-tags the memory in a tight loop for 4 s while this handle picks
    up hand edits before each search and get, as the MCP server does. Every search finds
    exactly the memory and every get reads it; a pick-up now and then still tells the move
    (at most one in 20 here). Before: searches found nothing (12-18 of ~450 with a stat
    scan), and a pick-up told the move ``moved`` by hand far more often."""
    if watch == "scan":
        monkeypatch.setattr("md_cg.watch._libc", lambda: None)
    root = _store(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-c", _MOVER, str(root), "loop"], stdout=subprocess.PIPE, env=_ENV, text=True
    )
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "ready").exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        searches, wrong = 0, []
        with MdCG(root) as s:
            end = time.monotonic() + 4
            while time.monotonic() < end:
                searches += 1
                told = s.sync_if_changed(min_interval=0)
                found = _found(s)
                told2 = s.sync_if_changed(min_interval=0)
                node = s.get(ID)
                if (told, found, told2, node.body) != (None, [ID], None, BODY):
                    wrong.append((searches, told, found, told2, node.body))
            (tmp_path / "stop").touch()
            out, _ = proc.communicate(timeout=30)
            assert proc.returncode == 0
            assert [w for w in wrong if (w[2], w[4]) != ([ID], BODY)] == []  # never missed
            # A pick-up can still take a move for a hand's now and then (told, and a sync
            # line logged): on a quiet machine 0-2 of ~450 pick-up pairs, 0-5 sync lines
            # (12e1643: 31-130 of 350-725, 126-378 lines, 12-18 searches missed with a scan).
            assert len(wrong) <= searches // 20
            assert searches > 30 and int(out) > 100  # both sides did run (a loaded 2-core VM: 60-900)
            _not_noted(s, root, lines=False)
    finally:
        (tmp_path / "stop").touch()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _released_in(mover: _Mover, seconds: float) -> tuple[threading.Thread, list[str]]:
    """Release the held move from another thread after ``seconds`` (the pick-up is waiting
    for it then); the list gets the path the writer put the file at."""
    got: list[str] = []
    t = threading.Thread(target=lambda: (time.sleep(seconds), got.append(mover.release())))
    t.start()
    return t, got


def test_a_hand_move_while_a_write_is_open_is_told_once_it_closes(mover: _Mover) -> None:
    """The writer logged a move to physics and stopped before changing a file; a person
    then moves the computing file to ``knowledge/by_hand.md``. The pick-up, whose look
    finds the id at the person's path while the write is open, waits for the write to
    close (released 0.3 s later: the writer puts its file at physics) and looks again: two
    files hold the id, the writer's (newer) stands and the person's copy is told under
    ``duplicates`` -- what a pick-up made after the write tells, and what ``sync`` tells.
    (The reverted fix of session 34 told nothing here, and never did.)"""
    hand = "knowledge/by_hand.md"
    with MdCG(mover.root, refresh_interval=None) as s:
        assert s.sync_if_changed(min_interval=0) is None
        mover.hold()
        os.rename(mover.root / COMPUTING, mover.root / hand)
        t, got = _released_in(mover, 0.3)
        report = s.sync_if_changed(min_interval=0)
        t.join()
        assert got == [PHYSICS]
        assert report is not None
        assert (report.added, report.changed, report.deleted, report.moved) == ((), (), (), ())
        assert report.duplicates == ((ID, hand),)
        assert _where(mover.root) == [PHYSICS]
        assert sorted(p.relative_to(mover.root).as_posix() for p in mover.root.rglob("by_hand.md")) == [hand]
        assert s.get(ID).tags == ["domain:physics"]
        assert _found(s) == [ID]
        assert s.sync_if_changed(min_interval=0) is None
        report = s.sync()
        assert (report.added, report.changed, report.deleted, report.moved) == ((), (), (), ())
        assert report.duplicates == ((ID, hand),)


def test_a_hand_move_right_after_a_write_the_pickup_did_not_follow_is_told_moved(mover: _Mover) -> None:
    """The writer stops its move to physics after its commit line, then finishes it; a
    person moves the physics file to ``knowledge/by_hand.md`` before the pick-up follows
    the write: told ``moved`` from physics and logged in a sync line, as after any write
    (the wait for writes changes nothing here)."""
    hand = "knowledge/by_hand.md"
    with MdCG(mover.root, refresh_interval=None) as s:
        assert s.sync_if_changed(min_interval=0) is None
        mover.hold()
        assert mover.release() == PHYSICS
        os.rename(mover.root / PHYSICS, mover.root / hand)
        report = s.sync_if_changed(min_interval=0)
        assert report is not None
        assert (report.added, report.changed, report.deleted) == ((), (), ())
        assert [(m.node_id, m.old_path, m.new_path) for m in report.moved] == [(ID, PHYSICS, hand)]
        assert [(r["put"], r["del"]) for r in _sync_lines(mover.root)] == [([[ID, hand]], [[ID, PHYSICS]])]
        assert _found(s) == [ID]


#: Re-tags the memories named after the root (comma-separated) in turn until the file
#: ``stop`` exists (``ready-<n>`` written after its first round); prints its number of moves.
_MOVERS = """
import os, sys
from md_cg import MdCG
root, ids, n = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
k = 0
with MdCG(root) as m:
    while not os.path.exists(os.path.join(root, "..", "stop")):
        for i in ids:
            k += 1
            m.update(i, tags=["domain:physics"] if (k // len(ids)) % 2 else ["domain:computing"])
        if k == len(ids):
            open(os.path.join(root, "..", "ready-" + n), "w").close()
    print(k, flush=True)
"""

SIX = [f"pw_six{i}" for i in range(6)]


@pytest.mark.parametrize("watch", ["inotify", "scan"])
def test_every_search_finds_six_memories_two_processes_keep_moving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, watch: str
) -> None:
    """Two writer processes re-tag six memories (three each) in a tight loop for 4 s while
    this handle picks up hand edits before each search, as the MCP server does: every
    search finds exactly the six; a pick-up now and then still tells a move or a copy
    (at most one in five here). Before: more often, and the search after it missed one."""
    if watch == "scan":
        monkeypatch.setattr("md_cg.watch._libc", lambda: None)
    root = tmp_path / "s"
    with MdCG(root) as m:
        for i in SIX:
            m.add(id=i, body=f"# zephyrine {i}\n\nThe zephyrine note {i}.\n", tags=["domain:computing"])
        m.add(id="other1", body="# tea\n\nThe user prefers green tea.\n")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _MOVERS, str(root), ",".join(SIX[n::2]), str(n)],
            stdout=subprocess.PIPE,
            env=_ENV,
            text=True,
        )
        for n in range(2)
    ]
    try:
        deadline = time.monotonic() + 30
        while not all((tmp_path / f"ready-{n}").exists() for n in range(2)):
            assert all(p.poll() is None for p in procs) and time.monotonic() < deadline
            time.sleep(0.01)
        searches, wrong = 0, []
        with MdCG(root) as s:
            end = time.monotonic() + 4
            while time.monotonic() < end:
                searches += 1
                told = s.sync_if_changed(min_interval=0)
                results, _meta = s.search("zephyrine note", k=10, record=False)
                found = sorted(r.id for r in results if not r.filler)
                if (told, found) != (None, SIX):
                    wrong.append((searches, told, found))
            (tmp_path / "stop").touch()
            moves = [int(p.communicate(timeout=30)[0]) for p in procs]
            assert [p.returncode for p in procs] == [0, 0]
            assert [w for w in wrong if w[2] != SIX] == []  # never missed
            # told now and then, and a sync line logged: on a quiet machine 0-10 of ~90-210
            # pick-ups, 1-21 lines (12e1643: 4-22 of 129-189, 25-85 lines, 1-2 searches missed)
            assert len(wrong) <= searches // 5
            assert searches > 10 and min(moves) > 100  # every side did run
            assert s.sync_if_changed(min_interval=0) is None
            report = s.sync()
            assert (report.added, report.changed, report.deleted, report.moved) == ((), (), (), ())
            assert report.duplicates == ()
    finally:
        (tmp_path / "stop").touch()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
