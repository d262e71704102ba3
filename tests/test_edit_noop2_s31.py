"""An edit is "no change" only when the file it would write is the file stored
(session 31, review r6): the check compared nodes with ``==``, which takes ``1`` for
``true`` (``[1, 0]`` for ``[true, false]``) and ignores the order of the keys md-cg does
not know, so such edits were dropped with "no change"."""

from __future__ import annotations

from pathlib import Path

import pytest

from md_cg import MdCG


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("reviewed: 1\n", "reviewed: true\n"),
        ("flags: [1, 0]\n", "flags: [true, false]\n"),
        ("score: 1\n", "score: 1.0\n"),
        ("zeta: 2\nalpha: 3\n", "alpha: 3\nzeta: 2\n"),
    ],
)
def test_an_edit_equal_only_to_python_is_written(tmp_path: Path, before: str, after: str) -> None:
    with MdCG(tmp_path / "m") as s:
        s.add(id="e", layer="knowledge", body="# e\n\nedit me\n")
        s.edit_text("e", lambda t: t.replace("---\n# e", before + "---\n# e", 1))
        path = s.path_of("e")
        old = path.read_bytes()
        assert before.encode() in old
        out = s.edit_text("e", lambda t: t.replace(before, after, 1))
        new = path.read_bytes()
        assert after.encode() in new and before.encode() not in new
        assert out.updated_at is not None and out.updated_at > s.get("e").created_at  # type: ignore[operator]
        assert (
            new.replace(after.encode(), b"").split(b"updated_at")[0]
            == old.replace(before.encode(), b"").split(b"updated_at")[0]
        )


def test_a_requoted_value_is_still_no_change(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as s:
        s.add(id="e", layer="knowledge", body="# e\n\nedit me")
        path = s.path_of("e")
        old, mtime = path.read_bytes(), path.stat().st_mtime_ns
        s.edit_text("e", lambda t: t.replace('id: "e"', "id: e", 1)[:-1])
        assert (path.read_bytes(), path.stat().st_mtime_ns) == (old, mtime)


def test_a_comment_removed_from_a_hand_written_file_is_written(tmp_path: Path) -> None:
    """Review r7: the check compared the edited node with the stored one, so removing a
    frontmatter comment (a secret pasted there) from a file written by hand was "no
    change" and the comment stayed; md-cg would write another file than it holds."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="n1", layer="knowledge", body="heron body")
        path = s.path_of("n1")
    path.write_text(path.read_text().replace("layer:", "# secret: api key 1234\nlayer:", 1))
    with MdCG(root) as s:
        s.sync()
        s.edit_text("n1", lambda t: t.replace("# secret: api key 1234\n", ""))
    assert "secret" not in path.read_text()
