"""``inject`` when one hit's file holds another memory now (attack a3 of session 36).

A person moved another memory's file over ``contextual/n0.md``: every read of ``n0`` is told
its file was changed outside md-cg (``hidden`` "lost"; a scoped handle without names), and
a search still lists ``n0`` (the index has its text) until a sync. ``inject`` -- scoped or
not -- failed as a whole with that error; now the hit is left out, as a hit whose file is
gone is, and the other memories are injected."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from md_cg import MdCG, Node, Scope


@pytest.mark.parametrize("scope", [None, Scope()], ids=["unscoped", "scoped"])
def test_inject_leaves_out_a_hit_whose_file_holds_another_memory(tmp_path: Path, scope: Scope | None) -> None:
    root = tmp_path / "s"
    with MdCG(root, create=True) as s:
        for i in reversed(range(5)):  # the notes tie: the most recently changed first (session 43)
            s.add(Node(id=f"n{i}", layer="contextual", body=f"apples note {i}"))
        s.add(Node(id="other", layer="contextual", body="unrelated pears"))
        assert [i.id for i in s.inject("apples", max_items=5)] == ["n0", "n1", "n2"]
    os.replace(root / "contextual/other.md", root / "contextual/n0.md")
    with MdCG(root, scope=scope) as s:
        items = s.inject("apples", max_items=5)
        assert [(i.id, i.text) for i in items] == [("n1", "apples note 1"), ("n2", "apples note 2")]
        assert "pears" not in repr(items)
