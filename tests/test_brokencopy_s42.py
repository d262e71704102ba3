"""Session 42: an unscoped single read of an id one of whose files is broken by hand picks
no copy.

Two files hold one id (agent a's ``d`` and a hand copy of it made agent b's, stamped later
so that it stands for an unscoped handle); one is broken by hand (a YAML typo); every
handle is a process of its own. Before, an unscoped ``get`` served the other copy without
a word -- b's while a's was broken, and a's (the older) while b's, the newest, was --
whereas a scoped handle is served no other scope's copy when its own is broken. Now an
unscoped ``get`` / ``read_text`` is refused naming the broken file (as for an id whose only
file is broken), in a fresh process (the losing copy is read) and after a sync (the file
listed as malformed); scoped handles answer as before (session 43: the broken copy's own scope
is told its file); once the file is fixed, the memory
is served again.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_copies_fresh_s40 import A_FILE, B_FILE, SYNC, _two_copies
from test_copyfate_s41 import BROKEN
from test_shadow_s40 import _as

_ASK = """
for k, f in [('get', lambda: s.get('d').body), ('text', lambda: s.read_text('d').split('---')[-1]),
             ('ids', lambda: sorted(s.ids()))]:
    try:
        out[k] = f()
    except MdcgError as exc:
        out[k] = type(exc).__name__ + ': ' + str(exc)
"""
WHY = (
    "the YAML frontmatter does not parse: did not find expected ',' or ']' (column 1), "
    "while parsing a flow sequence from line 2, column 5"
)


def _refused(broken: str, other: str) -> str:
    return (
        f"MalformedNodeFileError: {broken}: {WHY}; its id cannot be read, and memory 'd' is also in {other}, "
        "which reads, but which "
        f"file holds it cannot be told while this one cannot be read -- fix or remove {broken}, then run "
        "`mdcg sync` (MdCG.sync())"
    )


def _named(broken: str) -> str:
    """What a scoped handle whose own copy is broken is told (session 43: tests/test_brokenname_s43.py)."""
    return (
        f"MalformedNodeFileError: {broken}: {WHY}; its id cannot be read, and it held this scope's memory "
        f"'d' when last read -- fix or remove {broken}, then run `mdcg sync` (MdCG.sync())"
    )


@pytest.mark.parametrize("synced", [False, True], ids=["fresh", "after-sync"])
@pytest.mark.parametrize(
    ("broken", "other"), [(A_FILE, B_FILE), (B_FILE, A_FILE)], ids=["a-broken", "b-broken"]
)
def test_unscoped_read_names_the_broken_copy(tmp_path: Path, broken: str, other: str, synced: bool) -> None:
    root = _two_copies(tmp_path)
    whole = (root / broken).read_text(encoding="utf-8")
    (root / broken).write_text(BROKEN, encoding="utf-8")
    if synced:
        _as(root, "", SYNC)
    refused = _refused(broken, other)
    served = {"a": "d of agent a\n", "b": "d of agent b\n"}
    own = "a" if broken == A_FILE else "b"
    expected = {
        "": {"get": refused, "text": refused, "ids": ["d", "x"]},  # before: the other copy
        own: {"get": _named(broken), "text": _named(broken), "ids": ["x"]},  # session 43 (was 'no node')
        ("b" if own == "a" else "a"): {
            "get": served["b" if own == "a" else "a"].strip(),
            "text": "\n" + served["b" if own == "a" else "a"],
            "ids": ["d", "x"],
        },
    }
    assert {who: _as(root, who, _ASK) for who in ("", "a", "b")} == expected
    (root / broken).write_text(whole, encoding="utf-8")  # fixed: served again
    assert _as(root, "", "out['g'] = s.get('d').body") == {"g": "d of agent b"}
