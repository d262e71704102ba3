"""A file that cannot be created for want of permission names its folder (session 38's
migration simulation, F3): as a user who may not write a bucket folder, ``mdcg migrate``
and ``mdcg add`` said ``error: .k1.md.3007.2962988f1.tmp: Permission denied`` -- a bare
temp file name (md-cg opens files through folder descriptors), no folder, against
docs/cli.md's "the file refused, relative to the store". Now the folder is named. The
tests run as root, where modes do not refuse: the refusal is the system call's own
``PermissionError``, raised where the temp file is created."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from md_cg import MdCG, fsops
from md_cg.cli import app


def _deny_creating(monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.open

    def deny(path: str, flags: int, *args: object, **kw: object) -> int:
        if flags & os.O_CREAT and str(path).endswith(".tmp") and fsops.is_temp_name(str(path)):
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return real(path, flags, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(fsops.os, "open", deny)


def test_add_names_the_folder_it_may_not_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="k0", layer="knowledge", body="# K0\nkept\n")
    before = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md"))
    _deny_creating(monkeypatch)
    result = CliRunner().invoke(
        app, ["add", "--id", "k1", "--layer", "knowledge", "a fact", "--root", str(root)]
    )
    monkeypatch.undo()
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        "error: knowledge/orphan: Permission denied: a file cannot be created in this folder\n"
    )
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md")) == before


def test_the_library_error_names_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        _deny_creating(monkeypatch)
        with pytest.raises(PermissionError) as raised:
            s.add(id="c1", layer="contextual", body="a context")
        monkeypatch.undo()
        assert (raised.value.errno, raised.value.filename) == (errno.EACCES, "contextual")
        assert "c1" not in s


def test_export_names_the_folder_of_its_out_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="c1", layer="contextual", body="a context")
    out = tmp_path / "backup" / "all.jsonl"
    out.parent.mkdir()
    _deny_creating(monkeypatch)
    result = CliRunner().invoke(app, ["export", "--out", str(out), "--root", str(root)])
    monkeypatch.undo()
    assert result.exit_code == 2, result.output
    assert (
        result.stderr == f"error: {out.parent}: Permission denied: a file cannot be created in this folder\n"
    )
    assert list(out.parent.iterdir()) == []
