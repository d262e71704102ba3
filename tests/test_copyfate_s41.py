"""Session 41: a fresh process is told its own copy's fate.

Two files hold one id (agent a's ``d`` and a hand copy of it made agent b's, stamped later
so that it stands for an unscoped handle); every handle is a process of its own. A
``sync`` line now logs every copy of a duplicated id it names (path, stat, CRC-32, scope
fields, and whether the line's sync found it new: ``copyfate.COPIES``), so that a later
process of each scope tells its own copy's change, removal or arrival exactly once
(``md_cg.copyfate``; the cases of ``test_copies_fresh_s40.py`` no longer ``xfail``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_copies_fresh_s40 import A_FILE, B_FILE, NOTHING, SYNC, _edit, _two_copies
from test_shadow_s40 import _as

from md_cg import MdCG

BROKEN = "---\nid: [d\n---\nbroken by hand\n"
_BREAK = "open(sys.argv[1] + '/" + A_FILE + "', 'w').write(" + repr(BROKEN) + ")"

#: what a process of each scope answers about ``d``: a get, an add of the id, and (in the
#: scopes that do not see ``d``: refused, nothing written) an update and a delete
_ASK = """
asks = [('get', lambda: s.get('d').body), ('add', lambda: s.add(id='d', body='new d'))]
if sys.argv[2] in ('a', 'c'):
    asks += [('upd', lambda: s.update('d', importance=0.5)), ('del', lambda: s.delete('d'))]
for k, f in asks:
    try:
        out[k] = f()
    except MdcgError as exc:
        out[k] = type(exc).__name__ + ': ' + str(exc)
out['notes'] = sorted(s._engine.hand_after)  # the changes by hand it holds for a sync to tell
"""
NOT_HERE = "NodeNotFoundError: no node with id 'd' in this store"
OUTSIDE = "DuplicateIdError: node id 'd' is taken by a memory outside this handle's scope; choose another id"
AT_B = (
    f"DuplicateIdError: node id 'd' already exists at {B_FILE}; "
    "update that node, or add again with overwrite to replace it"
)


def _answers(root: Path) -> dict[str, dict[str, Any]]:
    return {who: _as(root, who, _ASK) for who in ("a", "b", "", "c")}


def test_own_copy_broken_by_hand_while_another_scope_copy_stands(tmp_path: Path) -> None:
    """a's long-lived process holds its copy, a person breaks the file, its sync runs: the
    file is not deleted (it is listed as malformed, its memory back once fixed), and no
    ``gone`` note of ``d`` goes to the other processes -- b's copy stands. Before,
    ``_seen_first`` made it ``deleted`` to a, ``_told_deletions`` dropped that (broken),
    and ``_leave_untold`` logged ``d`` untold ``gone`` from a's path: every process
    following the line held a note of ``d`` gone while b's copy stood, and an unscoped
    handle's, or a third scope's, answers about ``d`` named a removal by hand that never
    happened (the same answers are asked of a store where no sync ran after the break)."""
    root = _two_copies(tmp_path)
    plain = _two_copies(tmp_path / "plain")
    (plain / A_FILE).write_text(BROKEN, encoding="utf-8")
    told = _as(root, "a", "s.sync(); " + _BREAK + "; " + SYNC)
    assert told == NOTHING  # broken, not deleted: a is told nothing of a file it may not be shown
    hidden = {"get": NOT_HERE, "add": OUTSIDE, "upd": NOT_HERE, "del": NOT_HERE, "notes": []}
    seen = {"get": "d of agent b", "add": AT_B, "notes": []}
    # session 42: an unscoped get picks no copy while one is broken (test_brokencopy_s42)
    from test_brokencopy_s42 import _named, _refused

    unscoped = {**seen, "get": _refused(A_FILE, B_FILE)}
    # session 43: a's get names its own broken copy (test_brokenname_s43)
    expected = {"a": {**hidden, "get": _named(A_FILE)}, "b": seen, "": unscoped, "c": hidden}
    assert _answers(plain) == expected
    assert _answers(root) == expected  # before: c's and a's processes held d noted gone
    log = [
        json.loads(x) for p in sorted((root / ".mdcg" / "log").glob("*")) for x in p.read_text().splitlines()
    ]
    assert [rec.get("untold") for rec in log if rec.get("op") == "sync"] == [None, None, None]
    for who in ("b", "", "c", "a"):
        assert _as(root, who, SYNC) == NOTHING, who


def test_each_scope_told_its_own_copy_change_once(tmp_path: Path) -> None:
    """Both copies edited by hand, then each scope's process twice and an unscoped one:
    a told ``changed`` of a's copy, b of b's, each once, whichever runs first."""
    for order in (("a", "b"), ("b", "a")):
        root = _two_copies(tmp_path / "".join(order))
        _edit(root / A_FILE)
        _edit(root / B_FILE)
        told = [(who, _as(root, who, SYNC)) for who in (*order, *order)]
        assert told == [
            (order[0], {**NOTHING, "c": ["d"]}),
            (order[1], {**NOTHING, "c": ["d"]}),
            (order[0], NOTHING),
            (order[1], NOTHING),
        ]
        with MdCG(str(root)) as h:
            assert h.get("d").body == "d of agent b\nedited"


def test_line_of_an_earlier_version_read_as_before(tmp_path: Path) -> None:
    """A sync line without ``copies`` (written by session 40's code, copied here verbatim
    but for its stamps) is read as before: no copy's fate is told from it, no move."""
    root = _two_copies(tmp_path, copy=False)
    from test_shadow_s40 import _copy_as

    _copy_as(root, A_FILE, B_FILE, "b", "d of agent b")
    shard = root / ".mdcg" / "log" / "1_0123456789abcdef0123456789abcdef.jsonl"
    a_st, b_st = (root / A_FILE).stat(), (root / B_FILE).stat()
    line = {
        "ts": b_st.st_mtime_ns + 1_000_000,
        "seq": 1,
        "op": "sync",
        "put": [["d", B_FILE], ["d", A_FILE]],
        "del": [],
        "stat": [None, [a_st.st_mtime_ns, a_st.st_size]],
        "crc": [None, None],
    }
    shard.write_text(json.dumps(line) + "\n", encoding="utf-8")
    (root / A_FILE).unlink()
    for who in ("a", "b", ""):
        assert _as(root, who, SYNC) == NOTHING, who


def test_copy_found_by_an_unscoped_sync_told_added_to_its_scope_once(tmp_path: Path) -> None:
    """b's copy made after every scope synced, an unscoped sync taking it in first: b's
    process is told ``added`` (the unscoped sync tells no scope its own copy), once."""
    from test_shadow_s40 import _copy_as

    root = _two_copies(tmp_path, copy=False)
    _copy_as(root, A_FILE, B_FILE, "b", "d of agent b")
    told = [(who, _as(root, who, SYNC)) for who in ("", "a", "b", "b", "a", "")]
    assert [t for who, t in told if who] == [NOTHING, {**NOTHING, "a": ["d"]}, NOTHING, NOTHING]
    assert [t["a"] + t["c"] + t["d"] for who, t in told if not who] == [[], []]


def test_own_copy_removed_told_deleted_once(tmp_path: Path) -> None:
    """a's copy removed by hand: a's next process is told ``deleted``, and no process of any
    scope after it; b's copy removed after that: b's told ``deleted`` once."""
    root = _two_copies(tmp_path)
    (root / A_FILE).unlink()
    told = [(who, _as(root, who, SYNC)) for who in ("b", "a", "a", "b", "")]
    assert told == [
        ("b", NOTHING),
        ("a", {**NOTHING, "d": ["d"]}),
        ("a", NOTHING),
        ("b", NOTHING),
        ("", NOTHING),
    ]
    (root / B_FILE).unlink()
    assert [_as(root, who, SYNC) for who in ("a", "b", "b")] == [NOTHING, {**NOTHING, "d": ["d"]}, NOTHING]
