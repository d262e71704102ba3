"""Session 42 (attack atk11, F4 and F9): a copy's fate told to its own scope alone, and a
move as a move, whichever scope's fresh process syncs first.

Two files hold one id (agent a's ``d`` at ``contextual/d.md`` and a hand copy of it made
agent b's at ``knowledge/copied/d.md``, stamped later so that it stands for an unscoped
handle), each scope's process having synced once (``_two_copies``); every handle below is
a process of its own, a fresh one per sync, and each sync's report is checked whole.

F4: b's copy removed by hand and a's edited: a's process syncing first was told ``moved d
knowledge/copied/d.md -> contextual/d.md`` -- b's file, and no move -- and never its own
copy's change (the last sync line, b's, put ``d`` at b's path alone and logged a's copy
under ``copies`` only: ``journal._synced_copies`` now reads those).
F9: a's copy moved by hand to another folder: a's process syncing first was told ``added
d`` (the copy standing for it at its open was b's), in the other orders nothing; it is
told ``moved`` from its own old path, once (``copyfate._moved``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_copies_fresh_s40 import A_FILE, B_FILE, NOTHING, SYNC, _edit, _two_copies
from test_shadow_s40 import _as

from md_cg import MdCG, Scope

M_FILE = "contextual/moved/d.md"
ORDERS = [("a", "b", ""), ("b", "a", ""), ("", "a", "b"), ("", "b", "a")]
_IDS = [" ".join(w or "unscoped" for w in o) for o in ORDERS]
_WHERE = "out['g'] = s.get('d').body; out['p'] = str(s.path_of('d'))"


def _told(root: Path, order: tuple[str, ...]) -> list[tuple[str, dict[str, list[object]]]]:
    """Each scope's fresh process syncing in ``order``, then again."""
    return [(who, _as(root, who, SYNC)) for who in (*order, *order)]


def _expected(order: tuple[str, ...], first: dict[str, dict[str, list[object]]]) -> list[tuple[str, object]]:
    return [(who, first.get(who, NOTHING)) for who in order] + [(who, NOTHING) for who in order]


@pytest.mark.parametrize("order", ORDERS, ids=_IDS)
def test_other_copy_removed_own_edited_told_changed_no_leak(tmp_path: Path, order: tuple[str, ...]) -> None:
    """F4's variant: b's copy removed, a's edited: a told ``changed`` and b ``deleted``, each
    once; no report of a's names b's path (before, a syncing first was told a move from
    it, and never its change)."""
    root = _two_copies(tmp_path)
    (root / B_FILE).unlink()
    _edit(root / A_FILE)
    told = _told(root, order)
    assert told == _expected(order, {"a": {**NOTHING, "c": ["d"]}, "b": {**NOTHING, "d": ["d"]}})
    here = str(root / A_FILE)
    assert _as(root, "a", _WHERE) == {"g": "d of agent a\nedited", "p": here}
    assert _as(root, "", _WHERE) == {"g": "d of agent a\nedited", "p": here}


def _move_a(root: Path) -> None:
    (root / M_FILE).parent.mkdir(parents=True, exist_ok=True)
    (root / A_FILE).rename(root / M_FILE)


MOVED = {**NOTHING, "m": [["d", A_FILE, M_FILE]]}


@pytest.mark.parametrize("order", ORDERS, ids=_IDS)
def test_own_copy_moved_to_another_folder_told_moved_once(tmp_path: Path, order: tuple[str, ...]) -> None:
    """F9: a's copy moved by hand to another folder: a is told ``moved`` from its old path,
    once, whichever scope syncs first (before: ``added`` when a's process synced first,
    nothing in the other orders); b and an unscoped process are told nothing (b's copy
    stands where it was)."""
    root = _two_copies(tmp_path)
    _move_a(root)
    assert _told(root, order) == _expected(order, {"a": MOVED})
    assert _as(root, "a", _WHERE) == {"g": "d of agent a", "p": str(root / M_FILE)}
    assert _as(root, "b", _WHERE) == {"g": "d of agent b", "p": str(root / B_FILE)}
    assert _as(root, "", _WHERE) == {"g": "d of agent b", "p": str(root / B_FILE)}


def test_own_copy_moved_long_lived_handle_told_once(tmp_path: Path) -> None:
    """a's handle opened before the move (this process) is told the same move, and a fresh
    process of a after it nothing; b's process nothing."""
    root = _two_copies(tmp_path)
    with MdCG(str(root), scope=Scope(agent="a")) as a:
        assert a.get("d").body == "d of agent a"
        _move_a(root)
        r = a.sync()
        told = [r.added, r.changed, r.deleted, [(m.node_id, m.old_path, m.new_path) for m in r.moved]]
        assert told == [(), (), (), [("d", A_FILE, M_FILE)]]
    assert [_as(root, who, SYNC) for who in ("a", "b", "")] == [NOTHING] * 3
