"""Session 43: the snapshot's copies (``md_cg.snapshot.COPIES``) are decoded at their first
use, not at every open.

Session 42 kept in the snapshot the copies the last sync line naming each duplicated id
logged, and every open decoded and checked them all (``copyfate.copies_in``), whether or
not the process ever needed one -- a ``get``, a search, a write of another id. Now an open
keeps them undecoded (``Engine.copies_pending``); they are decoded when a sync tells or
logs copies, a compaction keeps them, a scoped read names a broken copy, or a line followed
or a write touches one of their ids -- with the same records, in the same order, as
decoding them first. Each process below is a process of its own.
"""

from __future__ import annotations

from pathlib import Path

from test_copies_fresh_s40 import A_FILE, NOTHING, SYNC, _two_copies
from test_shadow_s40 import _as

#: copyfate.copies_in counted (``calls``), and the records the process holds (``held``)
_COUNTED = """
from md_cg import copyfate, engine as engine_mod
calls = []
_real = copyfate.copies_in
def _counted(rec):
    calls.append(len(rec.get(copyfate.COPIES) or ()))
    return _real(rec)
copyfate.copies_in = _counted
"""
_HELD = (
    "out['held'] = {i: {r: [c.mtime_ns > 0, list(c.fields), c.found] for r, c in v.items()} "
    "for i, v in s._engine.copies_logged.items()}"
)


def _compacted(tmp_path: Path) -> Path:
    root = _two_copies(tmp_path)
    assert _as(root, "", "out['n'] = s.compact_index().nodes") == {"n": 2}
    return root


def _run(root: Path, who: str, steps: str) -> dict[str, object]:
    """A process of ``who`` opening the store after :data:`_COUNTED` (``_as``'s handle closed
    first) and running ``steps``: ``marks``, the number of decodes of the snapshot's copies
    after the open and at each ``mark()``, then the records it holds (``held``)."""
    mark = "marks.append(sum(1 for c in calls if c))"
    code = "\n".join(
        [
            "s.close()",
            _COUNTED,
            "marks = []",
            "s = MdCG(sys.argv[1], scope=scope)",
            mark,
            steps.replace("mark()", mark),
            "out['marks'] = marks",
            _HELD,
            "s.close()",
        ]
    )
    return _as(root, who, code)


HELD = {
    "d": {A_FILE: [True, ["a", None, None], False], "knowledge/copied/d.md": [True, ["b", None, None], False]}
}


def test_open_read_and_unrelated_write_decode_nothing(tmp_path: Path) -> None:
    root = _compacted(tmp_path)
    got = _run(
        root,
        "a",
        "s.get('x'); s.search('shared'); mark()\n"
        "try:\n    s.get('nope')\nexcept MdcgError:\n    mark()\n"
        "s.add(id='y', body='y of a', agent_scope='a'); mark()\n"
        "s.refresh(); mark()",
    )
    # before: decoded at the open (1, 1, 1, 1, 1); a scoped get of an unknown id looks for
    # a broken copy of its own (test_brokenname_s43) without decoding them
    assert got["marks"] == [0, 0, 0, 0, 0]
    assert got["held"] == HELD  # decoded when read, as the snapshot holds them


def test_a_line_followed_of_another_id_decodes_nothing(tmp_path: Path) -> None:
    root = _compacted(tmp_path)
    assert _as(root, "b", "s.add(id='z', body='z of b', agent_scope='b')") == {}
    got = _run(root, "a", "mark()")
    assert got["marks"] == [0, 0]  # before: [1, 1]
    assert got["held"] == HELD


def test_a_write_of_a_copied_id_decodes_and_forgets_it(tmp_path: Path) -> None:
    root = _compacted(tmp_path)
    got = _run(root, "a", "s.update('d', importance=0.5); mark()")
    assert got["marks"] == [0, 1]  # before: [1, 1]
    assert got["held"] == {}  # md-cg wrote d: its copies are its own to tell (as before)


def test_a_line_followed_of_a_copied_id_decodes(tmp_path: Path) -> None:
    root = _compacted(tmp_path)
    assert _as(root, "b", "s.update('d', importance=0.5)") == {}
    got = _run(root, "a", "mark()")
    assert got["marks"] == [1, 1]  # the open's follow of b's line: decoded (as before)
    assert got["held"] == {}


def test_fate_told_after_a_lazy_open(tmp_path: Path) -> None:
    """a's copy edited by hand after the compaction: a's sync decodes and tells it once."""
    root = _compacted(tmp_path)
    path = root / A_FILE
    path.write_text(path.read_text(encoding="utf-8") + "edited\n", encoding="utf-8")
    got = _run(root, "a", "s.get('x'); mark()\n" + SYNC + "\nmark()")
    assert got["marks"] == [0, 0, 1]
    assert {k: got[k] for k in NOTHING} == {**NOTHING, "c": ["d"]}
    assert _as(root, "a", SYNC) == NOTHING  # once
