"""A scoped handle's health counts an untracked file it is not told of (session 30, r2
finding 3): bob's hand-written ``self/dx.md`` shared its id with alice's memory; after
alice forgot hers, bob's file was on disk and in no index, and bob's ``health()`` had no
finding at all -- not even ``withheld`` -- while bob saw no memory."""

from __future__ import annotations

from pathlib import Path

from md_cg import MdCG, Scope


def test_an_untracked_file_is_counted_to_a_scope_not_named(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="dx", layer="knowledge", body="alice's note", agent_scope="alice")
    (root / "self").mkdir(exist_ok=True)
    (root / "self" / "dx.md").write_text(
        "---\nid: dx\nlayer: self\nagent_scope: bob\n---\nbob's copy SECRETWORD\n", encoding="utf-8"
    )
    with MdCG(root, scope=Scope(agent="alice")) as alice:
        alice.forget("dx", reason="done")
    with MdCG(root, read_only=True) as whole:
        assert [(f.kind, f.path) for f in whole.health().findings] == [("untracked_file", "self/dx.md")]
    with MdCG(root, scope=Scope(agent="bob"), read_only=True) as bob:
        assert bob.ids() == []
        found = bob.health().findings
        assert [(f.kind, f.path, f.node_id) for f in found] == [("withheld", None, None)]
        assert (
            found[0].detail == "1 file problem(s) not named to this scope: run `mdcg health` without a scope"
        )
        assert "SECRETWORD" not in repr(found) and "self/dx.md" not in repr(found)
