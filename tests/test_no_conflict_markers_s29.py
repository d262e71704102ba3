"""Session 29: no file of the repository's docs or code holds a git merge's conflict markers.

A merge of two branches once committed ``docs/api.md`` with its two conflict hunks, and
every docs test still passed: this one fails on such a file. Markers inside a fenced code
block of a Markdown file are examples (docs/git.md shows what a merge leaves).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^(?:<{7} |>{7} |={7}$)")


def _marker_lines(path: Path) -> list[int]:
    out, fenced = [], False
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if path.suffix == ".md" and line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and MARKER.match(line):
            out.append(n)
    return out


def test_no_conflict_markers_in_docs_or_code() -> None:
    files = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "md_cg").rglob("*.py")]
    for folder in ("migrate", "census", "bench"):
        files += (ROOT / folder).rglob("*.py")
    hits = [f"{p.relative_to(ROOT)}:{n}" for p in files for n in _marker_lines(p)]
    assert hits == []


def test_a_conflict_hunk_outside_a_code_block_is_found(tmp_path: Path) -> None:
    doc = tmp_path / "api.md"
    doc.write_text(
        "text\n<<<<<<< HEAD\na\n=======\nb\n>>>>>>> branch\n```\n<<<<<<< ours\n```\n", encoding="utf-8"
    )
    assert _marker_lines(doc) == [2, 4, 6]
