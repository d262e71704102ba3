"""Session 32 (review r5): an entry named like md-cg's temp files that is not a regular
file (a folder, a symlink) made every ``mdcg sync`` stop with "Is a directory" while
``health`` said "sync() removes it". Sync now leaves it (md-cg never removes what it did
not write) and health says so."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from md_cg import MdCG
from md_cg.maintenance import NOT_A_TEMP_FILE

_NAME = ".e1.md.99999999.abcd.tmp"


def _store(tmp_path: Path) -> Path:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="e1", layer="knowledge", body="one")
    (root / "knowledge" / "h1.md").write_text("---\nid: h1\nlayer: knowledge\n---\nhand made\n")
    return root


def test_a_folder_named_like_a_temp_file_does_not_stop_sync(tmp_path: Path) -> None:
    root = _store(tmp_path)
    odd = root / "knowledge" / _NAME
    odd.mkdir()
    (odd / "inside.txt").write_text("mine")
    os.utime(odd, (1, 1))  # long stale, as a dead writer's temp would be
    with MdCG(root) as s:
        report = s.sync()
        assert report.added == ("h1",) and report.temp_removed == ()
        assert s.get("h1").body.strip() == "hand made"
        found = [(f.kind, f.detail, f.path) for f in s.health().findings if f.kind == "temp_file"]
        assert found == [("temp_file", NOT_A_TEMP_FILE, f"knowledge/{_NAME}")]
    assert (odd / "inside.txt").read_text() == "mine"
    out = subprocess.run(
        [sys.executable, "-m", "md_cg.cli", "sync", "--root", str(root)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr


def test_a_symlink_named_like_a_temp_file_is_left_and_a_real_one_removed(tmp_path: Path) -> None:
    root = _store(tmp_path)
    target = tmp_path / "outside.txt"
    target.write_text("outside")
    link = root / "knowledge" / _NAME
    link.symlink_to(target)
    os.utime(link, (1, 1), follow_symlinks=False)
    real = root / "knowledge" / ".h9.md.99999998.abcd.tmp"
    real.write_text("torn")
    os.utime(real, (1, 1))
    with MdCG(root) as s:
        report = s.sync()
        assert report.temp_removed == ("knowledge/.h9.md.99999998.abcd.tmp",)
    assert link.is_symlink() and target.read_text() == "outside" and not real.exists()
