"""Findings and errors name what they are about (session 27 review: a damaged index log
shard's ``log_damage`` finding had no path; a read-only open of a missing folder said to
pass create=True, which had been passed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from md_cg import MdCG, Node
from md_cg.errors import NotAStoreError
from md_cg.reports import Finding


def test_garbage_in_an_index_log_shard_is_named_by_its_path(tmp_path: Path) -> None:
    root = tmp_path / "m"
    writer = MdCG(root)
    try:
        writer.add(Node(id="a1", layer="knowledge", body="okapi grazing"))
        (shard,) = sorted((root / ".mdcg" / "log").iterdir())
        with shard.open("a", encoding="utf-8") as fh:
            fh.write("garbage line\nmore garbage\n")
        with MdCG(root) as s:
            assert s.health().by_kind("log_damage") == [
                Finding(
                    "log_damage",
                    "2 unreadable line(s) or unusable record(s) in this index log shard (ignored); "
                    "rebuild_index() recovers from the files",
                    f".mdcg/log/{shard.name}",
                )
            ]
            assert s.ids() == ["a1"]
    finally:
        writer.close()


def test_a_read_only_handle_on_a_missing_folder_says_it_never_creates_one(tmp_path: Path) -> None:
    """Session 27 review: the message said "pass create=True" to a caller that had."""
    missing = tmp_path / "missing"
    for create in (True, False):
        with pytest.raises(NotAStoreError) as info:
            MdCG(missing, read_only=True, create=create)
        assert str(info.value) == (
            f"{missing}: no such folder (a read-only handle never creates a store: "
            "open it once without read_only=True to create it)"
        )
    with pytest.raises(NotAStoreError) as info:
        MdCG(missing, create=False)
    assert str(info.value) == f"{missing}: no such folder (pass create=True to make one)"
    assert not missing.exists()


SYMLINK = "a symlink (md-cg never follows symlinks below the store root)"


def test_a_symlinked_archive_folder_is_one_finding_and_nothing_outside_is_read(tmp_path: Path) -> None:
    """Session 27 review: ``archive`` a symlink gave seven findings, one per layer folder
    below it (archive/anchor ... archive/unresolved); it is one, for ``archive``."""
    root = tmp_path / "m"
    outside = tmp_path / "outside"
    (outside / "self").mkdir(parents=True)
    planted = "---\nid: x\nlayer: self\n---\nplanted outside the store\n"
    (outside / "self" / "x.md").write_text(planted, encoding="utf-8")
    with MdCG(root) as s:
        s.add(Node(id="a1", layer="knowledge", body="okapi grazing"))
    (root / "archive").symlink_to(outside, target_is_directory=True)
    with MdCG(root) as s:
        assert s.sync().refused == (("archive", SYMLINK),)
        assert s.health().by_kind("unsafe_path") == [Finding("unsafe_path", f"{SYMLINK}; ignored", "archive")]
        assert s.ids() == ["a1"]
    assert (outside / "self" / "x.md").read_text(encoding="utf-8") == planted
    assert sorted(p.name for p in outside.rglob("*")) == ["self", "x.md"]


def test_a_symlinked_layer_folder_inside_archive_is_named_itself(tmp_path: Path) -> None:
    root = tmp_path / "m"
    outside = tmp_path / "outside"
    outside.mkdir()
    with MdCG(root) as s:
        s.add(Node(id="a1", layer="knowledge", body="okapi grazing"))
    (root / "archive").mkdir(exist_ok=True)
    (root / "archive" / "self").symlink_to(outside, target_is_directory=True)
    with MdCG(root) as s:
        assert s.sync().refused == (("archive/self", SYMLINK),)
    assert list(outside.iterdir()) == []
