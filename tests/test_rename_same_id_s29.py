"""Session 29: ``rename(x, x, layer=...)`` (a move through rename) never writes over another file.

A file placed by hand at ``self/a.md`` holding the id ``zzz`` was overwritten by
``rename("a", "a", layer="self")``: the memory ``zzz`` was lost without a word. The move
now goes through the same check as ``update(layer=...)``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from md_cg import DuplicateIdError, MdCG


def test_a_same_id_rename_onto_another_memorys_file_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="a", body="memory a", layer="knowledge")
    (root / "self").mkdir(exist_ok=True)
    hand = root / "self" / "a.md"
    hand.write_text('---\nid: "zzz"\nlayer: "self"\n---\nmemory zzz placed by hand\n', encoding="utf-8")
    before = hand.read_bytes()
    with MdCG(root) as s:
        assert s.sync().added == ("zzz",)
        a_path = s.entry("a").path
        a_bytes = (root / a_path).read_bytes()
        with pytest.raises(DuplicateIdError) as caught:
            s.rename("a", "a", layer="self")
        assert str(caught.value) == (
            "node id 'a': the file self/a.md holds memory 'zzz' (edited by hand, or placed there); "
            "it is not written over -- move that file to its own name, or rename one of them"
        )
        assert sorted(n.id for n in s.iter_nodes()) == ["a", "zzz"]
        assert s.entry("a").path == a_path
    assert hand.read_bytes() == before
    assert (root / a_path).read_bytes() == a_bytes


def test_a_same_id_rename_to_a_free_path_moves_the_file(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as s:
        s.add(id="a", body="memory a", layer="knowledge")
        s.rename("a", "a", layer="self")
        assert s.entry("a").path == "self/a.md"
        assert s.get("a").body == "memory a"
