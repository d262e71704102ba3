"""Two files holding one id (agent a's ``d`` and a hand copy of it made agent b's, stamped
later so that it stands for an unscoped handle), every handle a process of its own: a
copy's file changed by hand after each scope's process synced once.

Session 40: a fresh process following a ``sync`` line that named both copies compared the
file at the one path it kept per id (the last put of the line: a's) with where the id
stands now -- a's copy removed by hand, b's process told ``moved d contextual/d.md ->
knowledge/copied/d.md``, a move between two copies' files, which a sync never tells
(docs/reliability.md row 27). The cases marked ``xfail`` are the limit left (Known limits):
a fresh process is not told its own copy's fate when the other copy stands."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from test_shadow_s40 import _as, _copy_as

from md_cg import MdCG

SYNC = (
    "r = s.sync(); out.update(a=list(r.added), c=list(r.changed), d=list(r.deleted), "
    "m=[[x.node_id, x.old_path, x.new_path] for x in r.moved])"
)
NOTHING = {"a": [], "c": [], "d": [], "m": []}
A_FILE, B_FILE = "contextual/d.md", "knowledge/copied/d.md"


def _two_copies(tmp_path: Path, copy: bool = True) -> Path:
    """The store, a's ``d`` (and b's copy unless ``copy`` is False), each of a's, b's and an
    unscoped process having synced once."""
    root = tmp_path / "m"
    with MdCG(str(root)) as h:
        h.add(id="d", body="d of agent a", agent_scope="a", layer="contextual")
        h.add(id="x", body="x shared", layer="contextual")
    assert (root / A_FILE).is_file()
    if copy:
        _copy_as(root, A_FILE, B_FILE, "b", "d of agent b")
    for who in ("a", "b", ""):
        # b's copy is new to b: told once, to b's process, whichever scope's sync took it in
        # (session 41; session 40 told it to no fresh process once a's sync had run)
        assert _as(root, who, SYNC) == ({**NOTHING, "a": ["d"]} if copy and who == "b" else NOTHING), who
    return root


@pytest.mark.parametrize("order", [("a", "b", ""), ("b", "a", ""), ("", "b", "a")])
def test_own_copy_removed_is_no_move_between_copies(tmp_path: Path, order: tuple[str, ...]) -> None:
    root = _two_copies(tmp_path)
    (root / A_FILE).unlink()
    told = {who: _as(root, who, SYNC) for who in order}
    for who in order:
        assert told[who]["m"] == [], who
    assert told["b"] == NOTHING  # b's own copy is where it was
    assert _as(root, "b", "out['g'] = s.get('d').body") == {"g": "d of agent b"}
    assert _as(root, "", "out['g'] = s.get('d').body") == {"g": "d of agent b"}
    assert _as(root, "a", "out['ids'] = sorted(s.ids())") == {"ids": ["x"]}


def test_other_copy_removed_then_each_process_again(tmp_path: Path) -> None:
    root = _two_copies(tmp_path)
    (root / A_FILE).unlink()
    for who in ("a", "b", "", "a", "b"):
        assert _as(root, who, SYNC)["m"] == [], who


def _edit(path: Path) -> None:
    path.write_text(path.read_text(encoding="utf-8") + "edited\n", encoding="utf-8")


@pytest.mark.parametrize(
    ("who", "rel", "change", "told"),
    [
        ("a", A_FILE, Path.unlink, {**NOTHING, "d": ["d"]}),
        ("b", B_FILE, _edit, {**NOTHING, "c": ["d"]}),
        ("b", B_FILE, Path.unlink, {**NOTHING, "d": ["d"]}),
    ],
    ids=["a-removed", "b-edited", "b-removed"],
)
def test_own_copy_changed_told_to_its_scope(
    tmp_path: Path, who: str, rel: str, change: Callable[[Path], None], told: dict[str, list[str]]
) -> None:
    root = _two_copies(tmp_path)
    change(root / rel)
    assert _as(root, who, SYNC) == told


def test_copy_made_after_the_syncs_told_added_to_its_scope(tmp_path: Path) -> None:
    root = _two_copies(tmp_path, copy=False)
    _copy_as(root, A_FILE, B_FILE, "b", "d of agent b")
    assert _as(root, "a", SYNC) == NOTHING
    assert _as(root, "b", SYNC) == {**NOTHING, "a": ["d"]}
