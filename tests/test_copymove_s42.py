"""Session 42: the standing copy of a duplicated id removed by hand is no move onto the
other copy's file, for any process opened after it.

Two files hold one id (agent a's ``d`` and a hand copy of it made agent b's, stamped later
so that it stands for an unscoped handle); every handle is a process of its own. The last
sync line naming ``d`` (b's, telling b its copy ``added``) put ``d`` at b's path alone and
logged a's copy under ``copies`` (``md_cg.copyfate``); following it, a process opened after
b's file was removed held a ``moved`` note from b's path (``journal.synced_edits_after``
took a's file for the same memory moved), and told it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_copies_fresh_s40 import B_FILE, NOTHING, SYNC, _two_copies
from test_shadow_s40 import _as


@pytest.mark.parametrize("order", [("a", "", "b"), ("", "a", "b"), ("b", "a", "")])
def test_standing_copy_removed_is_no_move_onto_the_other(tmp_path: Path, order: tuple[str, ...]) -> None:
    """b's copy (the one standing for an unscoped handle) removed by hand: no process is
    told a move onto a's file -- before, every process opening first (a's, an unscoped one)
    held a ``moved`` note from the last sync line, which put ``d`` at b's path alone and
    logged a's copy under ``copies``, and a's process was told ``moved d
    knowledge/copied/d.md -> contextual/d.md``, another scope's file. b is told ``deleted``
    once; a's copy is served to a and to an unscoped handle."""
    root = _two_copies(tmp_path)
    (root / B_FILE).unlink()
    told = {who: _as(root, who, SYNC) for who in order}
    assert told == {"a": NOTHING, "": NOTHING, "b": {**NOTHING, "d": ["d"]}}
    assert [_as(root, w, SYNC) for w in ("a", "", "b")] == [NOTHING] * 3
    assert _as(root, "", "out['g'] = s.get('d').body") == {"g": "d of agent a"}
