"""Two leftovers of git-merge conflicts (attack atk10, session 41).

F9: ``mdcg edit`` (``MdCG.edit_text``) of a memory a git merge left conflicted, the markers
taken out of the body but the ``merge_conflict`` line left as the editor showed it: the
memory stayed "unresolved" -- ``sync`` exited 1 and ``health`` said both versions were in
a file holding one -- where ``update --body`` settled it. Now an edit of the whole text
settles what it changed, as ``update`` does.

F10: a migrated row naming ``merge_conflict`` (an ``extra`` key or a column) was stored,
and the memory counted as an unresolved merge for ever; a body with markers was a bad row
for exactly that reason. Now such a row is a bad row too."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import python_env

from md_cg import InvalidNodeError, MdCG
from md_cg.migrate import migrate
from md_cg.sqlite_source import SCHEMA_SQL

CONFLICTED = (
    "---\n"
    'id: "c1"\n'
    'layer: "knowledge"\n'
    'created_at: "2026-12-07T18:42:05.898821Z"\n'
    'updated_at: "2026-12-07T18:42:30.893288Z"\n'
    "importance: 0.3\n"
    "merge_conflict: {body}\n"
    "---\n"
    "<<<<<<< ours\n会议时间：周三 A\n||||||| base\n会议时间：original\n"
    "=======\n会议时间：周五 B\n>>>>>>> theirs\n"
)
BODY_ONLY = '{"fields": {}, "body": true}'
WITH_FIELD = '{"fields": {"importance": {"ours": 0.3, "base": 0.5, "theirs": 0.9}}, "body": true}'
RESOLVED_BODY = "会议时间：周五 B\n"


def _store(tmp_path: Path, record: str) -> Path:
    root = tmp_path / "m"
    MdCG(root).close()
    f = root / "knowledge" / "orphan" / "c1.md"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(CONFLICTED.format(body=record), encoding="utf-8")
    with MdCG(root) as s:
        s.sync()
        assert [x.kind for x in s.health().findings] == ["merge_conflict"]
    return root


def _resolve_body(text: str) -> str:
    """What a person does in an editor: keep one side, leave the frontmatter as shown."""
    return re.sub(r"<<<<<<< ours\n.*?>>>>>>> theirs\n", RESOLVED_BODY, text, flags=re.S)


def test_an_edit_taking_the_markers_out_settles_the_body(tmp_path: Path) -> None:
    root = _store(tmp_path, BODY_ONLY)
    with MdCG(root) as s:
        node = s.edit_text("c1", _resolve_body)
        assert (node.body, "merge_conflict" in node.extra) == (RESOLVED_BODY.rstrip(), False)
        assert s.health().findings == ()
        assert s.sync().conflicts == ()
    text = (root / "knowledge" / "orphan" / "c1.md").read_text(encoding="utf-8")
    assert "merge_conflict" not in text and text.endswith("---\n" + RESOLVED_BODY)


def test_an_edit_settles_only_what_it_changed(tmp_path: Path) -> None:
    root = _store(tmp_path, WITH_FIELD)
    with MdCG(root) as s:
        node = s.edit_text("c1", _resolve_body)  # the body resolved, importance untouched
        assert node.extra["merge_conflict"] == {
            "fields": {"importance": {"ours": 0.3, "base": 0.5, "theirs": 0.9}},
            "body": False,
        }
        assert [x.kind for x in s.health().findings] == ["merge_conflict"]
        node = s.edit_text("c1", lambda t: t.replace("importance: 0.3\n", "importance: 0.9\n"))
        assert (node.importance, "merge_conflict" in node.extra) == (0.9, False)
        assert s.health().findings == ()


def test_an_edit_leaving_a_marker_is_refused_as_before(tmp_path: Path) -> None:
    root = _store(tmp_path, BODY_ONLY)
    f = root / "knowledge" / "orphan" / "c1.md"
    before = f.read_bytes()
    with MdCG(root) as s, pytest.raises(InvalidNodeError, match="the body holds git conflict markers"):
        s.edit_text("c1", lambda t: t.replace("会议时间：周三 A\n", "会议时间：周四 A\n"))
    assert f.read_bytes() == before


def test_mdcg_edit_settles_the_conflict_and_sync_exits_0(tmp_path: Path) -> None:
    root = _store(tmp_path, BODY_ONLY)
    editor = tmp_path / "editor.py"
    editor.write_text(
        "import re, sys\np = sys.argv[-1]\ns = open(p, encoding='utf-8').read()\n"
        f"s = re.sub(r'<<<<<<< ours\\n.*?>>>>>>> theirs\\n', {RESOLVED_BODY!r}, s, flags=re.S)\n"
        "open(p, 'w', encoding='utf-8').write(s)\n",
        encoding="utf-8",
    )
    env = {**python_env(), "EDITOR": f"{sys.executable} {editor}", "VISUAL": ""}
    cli = [sys.executable, "-m", "md_cg.cli", "--root", str(root)]
    run = subprocess.run([*cli, "edit", "c1"], capture_output=True, text=True, env=env, check=False)
    assert run.returncode == 0, run.stderr
    sync = subprocess.run([*cli, "sync", "--json"], capture_output=True, text=True, env=env, check=False)
    assert sync.returncode == 0, sync.stdout + sync.stderr
    assert json.loads(sync.stdout).get("conflicts", []) == []


def test_a_migrated_row_naming_merge_conflict_is_a_bad_row(tmp_path: Path) -> None:
    src = tmp_path / "src.sqlite"
    conn = sqlite3.connect(src)
    conn.executescript(SCHEMA_SQL)
    conn.execute("ALTER TABLE nodes ADD COLUMN merge_conflict TEXT")
    rows = [
        ("ok", None, None),
        ("x_mc", json.dumps({"merge_conflict": {"fields": {}, "body": True}}), None),
        ("col_mc", None, "yes"),
    ]
    for node_id, extra, column in rows:
        conn.execute(
            "INSERT INTO nodes (id, layer, content, extra, merge_conflict) VALUES (?, ?, ?, ?, ?)",
            (node_id, "knowledge", f"body of {node_id}", extra, column),
        )
    conn.commit()
    conn.close()
    report = migrate(src, tmp_path / "m")
    why = (
        "the row names 'merge_conflict', md-cg's record of an unresolved git merge (docs/git.md): "
        "a migrated memory cannot carry one; rename that key or column in the source"
    )
    assert [(r.rowid, r.node_id, r.reason) for r in report.bad_rows] == [(2, "x_mc", why), (3, "col_mc", why)]
    with MdCG(tmp_path / "m") as s:
        assert sorted(s.ids()) == ["ok"]
        assert s.health().findings == ()
