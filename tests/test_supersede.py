"""Supersession: the old node stops being valid, the new one links to it, nothing is deleted."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from md_cg import MdCG
from md_cg.errors import InvalidArgumentError, NodeNotFoundError


def _pair(root: Path) -> MdCG:
    s = MdCG(root)
    s.add(id="old", layer="self", body="The user lives in Porto")
    s.add(id="new", layer="self", body="The user lives in Lisbon now, moved from Porto")
    s.add(id="other", layer="self", body="The user likes Porto wine")
    return s


def test_supersede_marks_the_old_node_and_links_the_new_one(tmp_path: Path) -> None:
    with _pair(tmp_path / "m") as s:
        before = time.time()
        s.supersede("old", "new", reason="moved house")
        old = s.get("old")  # get still shows it, marked
        assert old.valid_until is not None and before <= old.valid_until <= time.time()
        assert [(e.target, e.type, e.extra) for e in s.get("new").edges] == [
            ("old", "supersedes", {"reason": "moved house"})
        ]
        assert s.superseded_by("old") == "new" and s.superseded_by("new") is None
        assert s.ids() == ["new", "old", "other"]  # nothing is deleted or hidden from listing
        assert {e.id for e in s.list_nodes(include_superseded=False)} == {"new", "other"}
        s.supersede("old", "new")  # idempotent: no second edge
        assert len(s.get("new").edges) == 1


def test_search_hides_superseded_nodes_by_default(tmp_path: Path) -> None:
    with _pair(tmp_path / "m") as s:
        s.supersede("old", "new")
        results, _ = s.search("user lives Porto", record=False)
        assert "old" not in {r.id for r in results}
        assert {r.id: r.superseded_by for r in results} == {"new": None, "other": None}
        shown, _ = s.search("user lives Porto", record=False, include_superseded=True)
        marks = {r.id: r.superseded_by for r in shown}
        assert marks["old"] == "new" and marks["new"] is None
        assert [r.to_dict()["superseded_by"] for r in shown if r.id == "old"] == ["new"]


def test_supersession_survives_reopening_and_rebuild(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with _pair(root) as s:
        s.supersede("old", "new")
        s.compact_index()
    with MdCG(root) as s:
        assert s.loaded_from == "snapshot" and s.superseded_by("old") == "new"
        assert "old" not in {r.id for r in s.search("Porto", record=False)[0]}
        s.rebuild_index()
        assert s.superseded_by("old") == "new"
        s.delete("new", force=True)  # the edge is gone with it; valid_until still closes the old node
        assert s.superseded_by("old") is None
        assert "old" not in {r.id for r in s.search("Porto", record=False)[0]}


def test_supersede_refuses_bad_ids(tmp_path: Path) -> None:
    with _pair(tmp_path / "m") as s:
        with pytest.raises(InvalidArgumentError, match="itself"):
            s.supersede("old", "old")
        with pytest.raises(NodeNotFoundError, match="ghost"):
            s.supersede("ghost", "new")
        with pytest.raises(NodeNotFoundError, match="ghost"):
            s.supersede("old", "ghost")
        assert s.get("old").valid_until is None and s.get("new").edges == []
