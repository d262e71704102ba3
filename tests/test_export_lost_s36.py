"""``export_nodes`` of a store where a person moved one memory's file over another's
(attack a3 of session 36): ``y.md`` moved over ``x.md`` left both ``x`` and ``y`` out of the
export with ``unreadable`` empty -- a backup lost ``y``'s text without a word. Now both are
named in ``unreadable`` with their errors; a scoped handle still gets ``[]`` (it is told of
no file)."""

from __future__ import annotations

import io
import os
from pathlib import Path

from md_cg import MdCG, Node, Scope, transfer

X = (
    "no node with id 'x' in this store (its file contextual/x.md was changed outside md-cg and is "
    "unusable: it holds memory 'y' now; fix it, then run `mdcg sync` (MdCG.sync()))"
)
Y = (
    "no node with id 'y' in this store (its file contextual/y.md was moved or deleted outside md-cg "
    "since the last sync; run `mdcg sync` (MdCG.sync()) to take that in, then try again)"
)


def _store(root: Path) -> None:
    with MdCG(root, create=True) as s:
        for name in "xyz":
            s.add(Node(id=name, layer="contextual", body=f"{name.upper()} body"))
    os.replace(root / "contextual/y.md", root / "contextual/x.md")


def test_an_export_names_the_memories_whose_files_a_person_moved(tmp_path: Path) -> None:
    root = tmp_path / "s"
    _store(root)
    with MdCG(root) as s:
        report = transfer.export_nodes(s, io.BytesIO())
    assert (report.count, report.ids, report.unreadable) == (1, ["z"], [("x", X), ("y", Y)])


def test_a_scoped_export_is_told_of_no_file(tmp_path: Path) -> None:
    root = tmp_path / "s"
    _store(root)
    with MdCG(root, scope=Scope()) as s:
        report = transfer.export_nodes(s, io.BytesIO())
    assert (report.count, report.ids, report.unreadable) == (1, ["z"], [])
