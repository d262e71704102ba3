"""The pick-up's last look must not drop a memory another process is moving (session 43).

A pick-up (``sync_if_changed``, run by the MCP server before every tool call) that looks at
a memory's files while another process re-tags it -- its commit line appended after the
pick-up followed the log, the new file renamed in between the pick-up's look at the new
path and its look at the old one -- finds the id nowhere. It looks again once that write
closed (``maintenance._looked_again``), but at most ``RELOOKS`` times: against writers that
never pause the looks run out and the last one stands. Before, that last look dropped the
id from the index untold (the write's line was past the followed log, so the change was
md-cg's, not a person's), and the next search found nothing: session 42's CI saw it once,
one search of about 100 missing one of six memories two processes kept moving
(tests/test_pickup_wait_s35.py). Now a look settles an id it found nowhere again with the
paths the log past its follow names for it, as a follow of the log does
(``engine.moved_on``): it is found where the write put it, and nothing is told.

The exact interleaving is made with the harness of tests/test_pickup_wait_s35.py (the
writer is a real process, moving on command at the moment the race needs it); the looks
running out is set by ``RELOOKS = 0`` (one look, which stands)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_pickup_wait_s35 import (  # the writer process and the look harness
    COMPUTING,
    ID,
    PHYSICS,
    _during_the_pickups_look,
    _found,
    _moved_to,
    _Mover,
    _not_noted,
    _store,
    _where,
)

from md_cg import MdCG, maintenance


@pytest.fixture
def mover(tmp_path: Path) -> _Mover:
    m = _Mover(_store(tmp_path))
    yield m  # type: ignore[misc]
    assert m.proc.stdin is not None
    m.proc.stdin.close()
    assert m.proc.wait(timeout=30) == 0


@pytest.mark.parametrize("held", [False, True])
def test_a_move_landing_inside_the_last_look_keeps_the_memory(
    mover: _Mover, monkeypatch: pytest.MonkeyPatch, held: bool
) -> None:
    """The writer moved the file to physics; the pick-up follows that move, looks at
    computing (nothing), then the writer moves it back to computing before the look at
    physics (nothing either). That look is the last one. The move back's commit line is
    appended after the pick-up's follow, or (``held``) logged before it and held there
    (open, no file changed) until it finishes between the two looks. Before: the id was
    dropped from the index -- untold (the line unread: md-cg's write), or told ``deleted``
    by hand and logged so (the commit followed open) -- and the search after the pick-up
    found nothing (its refresh interval not passed)."""
    monkeypatch.setattr(maintenance, "RELOOKS", 0)
    with MdCG(mover.root, refresh_interval=3600) as s:
        assert s.sync_if_changed(min_interval=0) is None
        assert mover.move() == PHYSICS
        if held:
            mover.hold()
        back = mover.release if held else mover.move
        armed = _during_the_pickups_look(s, monkeypatch, lambda: _moved_to(back(), COMPUTING), before=False)
        assert s.sync_if_changed(min_interval=0) is None
        assert not armed[0]
        assert _where(mover.root) == [COMPUTING]
        assert s._engine.state.entries[ID].path == COMPUTING
        assert _found(s) == [ID]
        _not_noted(s, mover.root, lines=False)


def test_a_file_removed_by_hand_is_still_told_deleted_by_the_last_look(mover: _Mover) -> None:
    """The re-settling waits for nothing and finds nothing when no write of the id is in the
    log: a person's ``rm`` after the writer's moves is told ``deleted`` and the memory is
    no longer found."""
    with MdCG(mover.root, refresh_interval=3600) as s:
        assert s.sync_if_changed(min_interval=0) is None
        assert mover.move() == PHYSICS
        (mover.root / PHYSICS).unlink()
        report = s.sync_if_changed(min_interval=0)
        assert report is not None
        assert (report.added, report.changed, report.deleted, report.moved) == ((), (), (ID,), ())
        assert _found(s) == []
        assert ID not in s._engine.state.entries
