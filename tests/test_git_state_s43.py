"""Session 43 (usersim M2): a store made in a folder with a ``.gitignore`` of its own gets
md-cg's lines put first by ``init`` (its own kept; idempotent), and ``health`` reports the
files of ``.mdcg/`` git tracks (``tracked_state``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from typer.testing import CliRunner

from md_cg import MdCG
from md_cg.cli import app
from md_cg.engine import GITIGNORE


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def test_init_puts_mdcg_lines_first_in_an_existing_gitignore_once(tmp_path: Path) -> None:
    root = tmp_path / "app"
    root.mkdir()
    (root / ".gitignore").write_text("secrets.env\n", encoding="utf-8")
    with MdCG(root) as s:
        s.add(id="m1", body="first memory")
    out = CliRunner().invoke(app, ["init", "--root", str(root)])
    assert out.exit_code == 0, out.output
    assert f"{root / '.gitignore'}: md-cg's lines put first (.mdcg/* ignored), yours kept" in out.output
    assert (root / ".gitignore").read_text(encoding="utf-8") == GITIGNORE + "\nsecrets.env\n"
    again = CliRunner().invoke(app, ["init", "--root", str(root)])
    assert "put first" not in again.output
    assert (root / ".gitignore").read_text(encoding="utf-8") == GITIGNORE + "\nsecrets.env\n"
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    assert _git(root, "ls-files", ".mdcg") == ""


def test_a_gitignore_already_ignoring_mdcg_is_left_as_it_is(tmp_path: Path) -> None:
    root = tmp_path / "app"
    root.mkdir()
    (root / ".gitignore").write_text("/.mdcg/\n*.log\n", encoding="utf-8")
    with MdCG(root) as s:
        s.init_folder()
    assert (root / ".gitignore").read_text(encoding="utf-8") == "/.mdcg/\n*.log\n"


def test_health_reports_mdcg_files_git_tracks(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    with MdCG(root / "mem") as s:
        s.add(id="m1", body="first memory")
        assert [f.kind for f in s.health().findings] == []
        _git(root, "add", "-f", "mem/.mdcg/lock")
        h = s.health()
    assert [(f.kind, f.severity, f.path) for f in h.findings] == [("tracked_state", "warning", ".mdcg")]
    assert h.ok is False
    detail = h.findings[0].detail
    assert detail.startswith("md-cg: git tracks files of mem/.mdcg/ that are each clone's own state")
    assert "\n  mem/.mdcg/lock\n" in detail
    assert detail.endswith(
        "git rm -r -q --cached -- ':(literal)mem/.mdcg' ':(exclude,literal)mem/.mdcg/synonyms.json' "
        "':(exclude,literal)mem/.mdcg/retention.json' ':(exclude,literal)mem/.mdcg/retention_markers.json' "
        "(docs/git.md)"
    )
