"""A memory another process only re-tags -- which moves its file between bucket folders --
must be found by every search, ``inject`` and ``get`` of a long-lived handle, and never be
noted as removed by hand (session 34, review rD: movemiss.py, race4b.py). Before the fix
1 search in 463 (default ``refresh_interval``), 3 in 329 (``refresh_interval=0``) and 1 in
168 through the MCP server found nothing (tier T3): ``search`` saw the hit's file gone,
refreshed, then looked at the one path the refresh gave -- which the next move had taken
away already -- and dropped the id as a person's removal; a refresh that settled the id
while a move ran between its two looks (the new file, then the old one) dropped it too,
and noted it ``gone``; ``get`` looked once after one refresh. Now each of them looks at
the log past what it read: a line naming the id means md-cg moved it meanwhile, and the
id is settled again. A file removed by hand is still dropped and told.

The writer is a real process (``_MOVER``): it moves the memory on command (a line on its
standard input) or in a loop; the three exact interleavings are made by the reader
calling for a move at the moment the race needs one."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_hand_moved_s31 import _moved

import md_cg
from md_cg import MdCG, Node, index
from md_cg.errors import DuplicateIdError, NodeNotFoundError

_ENV = {**os.environ, "PYTHONPATH": str(Path(md_cg.__file__).resolve().parent.parent)}

ID = "mm_target"
QUERY = "quasarflux calibration"
BODY = "# quasarflux calibration\n\nThe quasarflux calibration constant is 42.\n"
COMPUTING = "knowledge/cond_computing_2ddeaa83/mm_target.md"
PHYSICS = "knowledge/cond_physics_742b2745/mm_target.md"

#: The other process: re-tags ID (so moves its file) once per line read ("move"), or in a
#: loop ("loop": until the file ``stop`` exists, ``ready`` written after its first move);
#: prints the path each move put the file at.
_MOVER = """
import os, sys
from md_cg import MdCG
root, mode = sys.argv[1], sys.argv[2]
k = 0
with MdCG(root) as m:
    def move():
        global k
        k += 1
        return m.update("mm_target", tags=["domain:physics"] if k % 2 else ["domain:computing"])
    if mode == "loop":
        move()
        open(os.path.join(root, "..", "ready"), "w").close()
        while not os.path.exists(os.path.join(root, "..", "stop")):
            move()
        print(k, flush=True)
    else:
        for line in sys.stdin:
            move()
            print(m._engine.entry("mm_target").path, flush=True)
"""


def _store(tmp_path: Path, node_id: str = ID) -> Path:
    """A store with ``node_id`` in the computing bucket and two other memories
    (test_pickup_move_s34 uses it too, with its own id)."""
    root = tmp_path / "s"
    with MdCG(root) as m:
        m.add(id=node_id, body=BODY, tags=["domain:computing"], verification_basis="test")
        m.add(id="other1", body="# tea\n\nThe user prefers green tea.\n")
        m.add(id="other2", body="# Berlin\n\nThe meeting is in Berlin.\n")
    assert _where(root, node_id) == [COMPUTING.replace(ID, node_id)]
    return root


def _where(root: Path, node_id: str = ID) -> list[str]:
    return sorted(
        p.relative_to(root).as_posix() for p in root.rglob(f"{node_id}.md") if ".mdcg" not in p.parts
    )


@pytest.fixture
def mover(tmp_path: Path) -> Iterator[Callable[[], str]]:
    """The writer process on command: each call moves ID once and returns its new path."""
    root = _store(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-c", _MOVER, str(root), "step"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=_ENV,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None

    def move() -> str:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("move\n")
        proc.stdin.flush()
        return proc.stdout.readline().strip()

    move.root = root  # type: ignore[attr-defined]
    yield move
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0


def _found(s: MdCG) -> list[str]:
    results, _meta = s.search(QUERY, k=5, record=False)
    return [r.id for r in results if not r.filler]


def _not_noted(s: MdCG, root: Path) -> None:
    """ID was not noted as moved or removed by hand: ``add`` of it is the plain duplicate
    error naming its file (a note makes it the "moved or deleted outside md-cg" refusal),
    and a sync tells nothing."""
    with pytest.raises(DuplicateIdError) as dup:
        s.add(Node(id=ID, layer="knowledge", body="again"))
    [path] = _where(root)
    assert str(dup.value) == (
        f"node id {ID!r} already exists at {path}; update that node, "
        "or add again with overwrite to replace it"
    )
    report = s.sync()
    assert (report.deleted, report.moved, report.duplicates) == ((), (), ())


def _after_refreshes(s: MdCG, moves: dict[int, Callable[[], Any]]) -> list[int]:
    """Patch the handle's refresh: after its n-th call (from 1), run ``moves[n]``; return
    the list the calls are counted in."""
    eng = s._engine
    real = eng.refresh
    calls: list[int] = []

    def refresh(*args: Any, **kwargs: Any) -> list[str]:
        changed = real(*args, **kwargs)
        calls.append(1)
        if len(calls) in moves:
            moves[len(calls)]()
        return changed

    eng.refresh = refresh  # type: ignore[method-assign]
    return calls


def test_search_after_the_refresh_the_file_moved_again_finds_it(mover: Callable[[], str]) -> None:
    """The search's freshness refresh holds the computing path; the writer moves the file
    to physics; the search sees the hit's file gone and refreshes (physics now); the writer
    moves it back before the search looks at that path. Before: dropped, T3, and noted as
    gone by hand (``add`` then said the file was moved outside md-cg)."""
    root: Path = mover.root  # type: ignore[attr-defined]
    with MdCG(root, refresh_interval=0) as s:
        assert _found(s) == [ID]
        calls = _after_refreshes(s, {1: mover, 2: mover})
        assert _found(s) == [ID]
        assert len(calls) == 3  # the search's refresh, the one at the gone hit, one after the move
        assert _where(root) == [COMPUTING]
        assert s.get(ID).tags == ["domain:computing"]
        _not_noted(s, root)


def test_a_refresh_that_looks_between_the_two_steps_of_a_move_keeps_the_memory(
    mover: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log holds two moves the handle has not followed (computing -> physics ->
    computing); its refresh looks for the file at physics (not there), then the writer
    moves it to physics, then the refresh looks at computing (not there either). Before:
    the refresh dropped the id and noted it gone by hand, and the search found nothing."""
    root: Path = mover.root  # type: ignore[attr-defined]
    with MdCG(root, refresh_interval=0) as s:
        assert _found(s) == [ID]
        assert mover() == PHYSICS
        assert mover() == COMPUTING
        real = index._stat_and_parse
        armed = [True]

        def stat_and_parse(root_str: str, rel: str, node_id: str, *args: Any) -> Any:
            parsed = real(root_str, rel, node_id, *args)
            if armed[0] and node_id == ID and rel == PHYSICS:
                assert parsed is None  # the file is at computing
                armed[0] = False
                assert mover() == PHYSICS
            return parsed

        monkeypatch.setattr(index, "_stat_and_parse", stat_and_parse)
        assert _found(s) == [ID]
        assert not armed[0]
        assert _where(root) == [PHYSICS]
        assert s.get(ID).tags == ["domain:physics"]
        _not_noted(s, root)


def test_get_after_the_refresh_the_file_moved_again_reads_it(mover: Callable[[], str]) -> None:
    """``get`` finds the file gone from the path it holds (the writer moved it), refreshes,
    and the writer moves it back before the read. Before: "moved or deleted outside
    md-cg"."""
    root: Path = mover.root  # type: ignore[attr-defined]
    with MdCG(root, refresh_interval=None) as s:
        assert s.get(ID).tags == ["domain:computing"]
        assert mover() == PHYSICS
        calls = _after_refreshes(s, {1: mover})
        node = s.get(ID)
        assert (node.id, node.tags, node.body) == (ID, ["domain:computing"], BODY)
        assert len(calls) == 2
        _not_noted(s, root)


@pytest.mark.parametrize("interval", [0, 1.0])
def test_every_read_finds_a_memory_another_process_keeps_moving(tmp_path: Path, interval: float) -> None:
    """The review's run: a writer process re-tags the memory in a tight loop while this
    handle searches, injects and gets it for 4 s. Every search finds exactly it, every
    inject gives exactly it, every get reads it; nothing is noted by hand. Before (with
    ``refresh_interval=0``): about 1 search in 130 found nothing here."""
    root = _store(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-c", _MOVER, str(root), "loop"], stdout=subprocess.PIPE, env=_ENV, text=True
    )
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "ready").exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        searches, misses = 0, []
        with MdCG(root, refresh_interval=interval) as s:
            end = time.monotonic() + 4
            while time.monotonic() < end:
                searches += 1
                found = _found(s)
                injected = [i.id for i in s.inject(QUERY)]
                node = s.get(ID)
                if (found, injected, node.body) != ([ID], [ID], BODY):
                    misses.append((searches, found, injected, node.body))
            (tmp_path / "stop").touch()
            out, _ = proc.communicate(timeout=30)
            assert proc.returncode == 0
            assert misses == []
            assert searches > 30 and int(out) > 30  # both ran (94 in 4 s seen under load)
            _not_noted(s, root)
    finally:
        (tmp_path / "stop").touch()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_file_removed_by_hand_is_still_dropped_and_told(mover: Callable[[], str]) -> None:
    """After the writer's moves, ``rm`` of the file: the search drops it (filler only), the
    id is refused to ``add`` as moved or deleted outside md-cg, and the sync tells it."""
    root: Path = mover.root  # type: ignore[attr-defined]
    with MdCG(root, refresh_interval=0) as s:
        assert _found(s) == [ID]
        assert mover() == PHYSICS
        assert mover() == COMPUTING
        (root / COMPUTING).unlink()
        assert _found(s) == []
        with pytest.raises(NodeNotFoundError) as err:
            s.add(Node(id=ID, layer="knowledge", body="again"))
        assert str(err.value) == _moved(ID).replace("knowledge/orphan/", "knowledge/cond_computing_2ddeaa83/")
        assert s.sync().deleted == (ID,)
        assert _where(root) == []
