"""``archive`` and ``unarchive`` of a file broken by hand name the file where it is
(session 31, review r6: ``archive/knowledge/orphan/sy.md:4: ...``, the path it would
have been moved to, which does not exist)."""

from __future__ import annotations

from pathlib import Path

import pytest

from md_cg import MdCG
from md_cg.errors import MalformedNodeFileError

BROKEN = '---\nid: "sy"\nbroken: [\n---\nwords\n'


def test_archive_names_the_broken_file_where_it_is(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="sy", layer="knowledge", body="hello there")
        path = s.path_of("sy")
    path.write_text(BROKEN, encoding="utf-8")
    with MdCG(root) as s, pytest.raises(MalformedNodeFileError) as err:
        s.archive(["sy"])
    assert str(err.value.path) == "knowledge/orphan/sy.md"
    assert str(err.value).startswith("knowledge/orphan/sy.md:4: the YAML frontmatter does not parse")
    assert path.read_text(encoding="utf-8") == BROKEN and not (root / "archive").exists()


def test_unarchive_names_the_broken_file_where_it_is(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="sy", layer="knowledge", body="hello there")
        s.archive(["sy"])
        path = root / "archive" / "knowledge" / "orphan" / "sy.md"
        assert path.exists()
    path.write_text(BROKEN, encoding="utf-8")
    with MdCG(root) as s, pytest.raises(MalformedNodeFileError) as err:
        s.unarchive(["sy"])
    assert str(err.value).startswith("archive/knowledge/orphan/sy.md:4: the YAML frontmatter does not parse")
