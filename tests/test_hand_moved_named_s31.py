"""``forget``, ``add`` and ``edit_text`` name the file a person moved (session 31): the
writes that find the id dropped under its lock (the open followed the log and found the
file gone) said only "its file was moved, deleted or changed outside md-cg" without the
path, while every other command named it; a scoped handle still names no file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_hand_moved_s31 import _moved
from typer.testing import CliRunner

from md_cg import MdCG, Scope
from md_cg.cli import app
from md_cg.errors import NodeNotFoundError


def _store(tmp_path: Path) -> Path:
    root = tmp_path / "m"
    runner = CliRunner(env={"MDCG_ROOT": None})
    assert runner.invoke(app, ["init", "--root", str(root)]).exit_code == 0
    assert runner.invoke(app, ["--root", str(root), "add", "--id", "hm", "--body", "moved"]).exit_code == 0
    shutil.move(root / "knowledge/orphan/hm.md", root / "self/hm.md")
    return root


def test_library_writes_name_the_moved_file(tmp_path: Path) -> None:
    root = _store(tmp_path)
    calls = {
        "forget": lambda s: s.forget("hm", reason="x"),
        "add": lambda s: s.add(id="hm", body="again"),
        "edit_text": lambda s: s.edit_text("hm", lambda t: t + "more\n"),
    }
    for name, call in calls.items():
        with MdCG(root) as s, pytest.raises(NodeNotFoundError) as err:
            call(s)
        assert (name, str(err.value), err.value.hidden) == (name, _moved("hm"), "lost")
    with MdCG(root, scope=Scope()) as s, pytest.raises(NodeNotFoundError) as err:
        s.forget("hm", reason="x")
    assert "knowledge/orphan/hm.md" not in str(err.value)
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md")) == ["self/hm.md"]
