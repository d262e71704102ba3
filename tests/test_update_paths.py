"""An update keeps a person's file where it is; ``misplaced_file`` only for a wrong layer or bucket."""

from __future__ import annotations

from pathlib import Path

from md_cg import MdCG


def _note(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_update_keeps_a_hand_placed_file_while_the_layer_stays(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        _note(root, "self/journal/2024/monday.md", "---\nid: mon\nlayer: self\n---\nwent running\n")
        _note(root, "contextual/Meeting Notes.md", "met the team\n")  # no frontmatter: id from the stem
        s.sync()
        s.update("mon", body="went running twice")
        s.update("Meeting Notes", importance=0.7)
        assert s.entry("mon").path == "self/journal/2024/monday.md"
        assert s.entry("Meeting Notes").path == "contextual/Meeting Notes.md"
        assert "went running twice" in (root / "self/journal/2024/monday.md").read_text()
        assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md")) == [
            "contextual/Meeting Notes.md",
            "self/journal/2024/monday.md",
        ]
        assert s.health().by_kind("misplaced_file") == []
        s.move("mon", "contextual")  # a layer change does move it, to the engine's place
        assert s.entry("mon").path == "contextual/mon.md"
        assert not (root / "self/journal/2024/monday.md").exists()


def test_misplaced_only_for_a_wrong_layer_folder_or_bucket(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        _note(root, "self/x.md", "---\nid: x\nlayer: contextual\n---\nin the self folder\n")
        _note(root, "knowledge/topics/y.md", "---\nid: y\nlayer: knowledge\n---\nmy own topic folder\n")
        _note(root, "knowledge/cond_zzz_12345678/z.md", "---\nid: z\nlayer: knowledge\n---\nwrong bucket\n")
        s.sync()
        found = {f.node_id for f in s.health().by_kind("misplaced_file")}
        assert found == {"x", "z"}
