"""Session 29: memories in files with Windows line ends (an editor, git's ``core.autocrlf``).

A file whose lines end in ``\\r\\n`` was read with a ``\\r`` at the end of every line of its
body (``'first line\\r\\nsecond line\\r'``), which ``get``, search results and MCP replies
passed on, and the next write kept. Its body is now read by its ``\\n`` lines.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from md_cg import MdCG
from md_cg.transfer import export_nodes, import_nodes


def _windows_store(root: Path) -> None:
    with MdCG(root) as s:
        s.add(id="keep", body="written by md-cg", layer="knowledge")
    folder = root / "knowledge"
    (folder / "win.md").write_bytes(
        b'---\r\nid: "win"\r\nlayer: "knowledge"\r\ntags: ["tea"]\r\n---\r\n'
        b"The user drinks green tea.\r\nNever coffee after noon.\r\n"
    )
    (folder / "plain.md").write_bytes("一条手写的笔记\r\nsecond line\r\n".encode())


def test_a_windows_file_is_read_by_its_lines(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _windows_store(root)
    with MdCG(root) as s:
        assert sorted(s.sync().added) == ["plain", "win"]
        assert s.get("win").body == "The user drinks green tea.\nNever coffee after noon."
        assert s.get("plain").body == "一条手写的笔记\nsecond line"
        hits, _ = s.search("coffee after noon", record=False)
        assert hits[0].node.id == "win" and hits[0].node.body.endswith("noon.")


def test_the_next_write_writes_the_file_with_lf_ends(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _windows_store(root)
    with MdCG(root) as s:
        s.sync()
        s.update("win", tags=["tea", "drinks"])
        data = (root / s.entry("win").path).read_bytes()
    assert b"\r" not in data
    assert data.endswith(b"---\nThe user drinks green tea.\nNever coffee after noon.\n")
    with MdCG(root) as s:
        assert s.get("win").body == "The user drinks green tea.\nNever coffee after noon."


def _crlf_copy(path: Path) -> bytes:
    """Rewrite ``path`` with ``\\r\\n`` line ends, as a git checkout with ``core.autocrlf``
    does; returns the new bytes."""
    data = path.read_bytes().replace(b"\n", b"\r\n")
    path.write_bytes(data)
    return data


@pytest.mark.parametrize("stamp", [True, False], ids=["add_many", "import (stamp=False)"])
def test_reimporting_an_unchanged_memory_leaves_its_crlf_file_as_it_is(tmp_path: Path, stamp: bool) -> None:
    """Review 4 (r6_crlf_reimport.py): ``_unchanged`` compared the file's bytes with the
    node's dump, so a file with ``\\r\\n`` ends never matched and every migrate or import
    re-run on an autocrlf checkout rewrote every file (as LF) and stamped ``updated_at``."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="src", body="elsewhere")
        s.add(
            id="a",
            layer="knowledge",
            body="# Title\n\nline1\nline2 ends in a CR\r\n\n  indented",
            tags=["x", "y"],
            importance=0.7,
            edges=[{"target": "src", "type": "similar"}],
        )
        path = s.path_of("a")
    data = _crlf_copy(path)
    mtime = path.stat().st_mtime_ns
    with MdCG(root) as s:
        assert s.sync().changed == ("a",)
        before = s.get("a")
        assert before.body == "# Title\n\nline1\nline2 ends in a CR\r\n\n  indented"
        (out,) = s.add_many([copy.deepcopy(before)], overwrite=True, stamp=stamp)
        assert out.to_dict() == before.to_dict()
        assert s.get("a").updated_at == before.updated_at
    assert path.read_bytes() == data
    assert path.stat().st_mtime_ns == mtime


def test_a_changed_memory_in_a_crlf_file_is_still_written(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="a", layer="knowledge", body="line1\nline2")
        path = s.path_of("a")
    _crlf_copy(path)
    with MdCG(root) as s:
        s.sync()
        node = s.get("a")
        node.body = "line1\nline2, changed"
        (out,) = s.add_many([node], overwrite=True)
        assert out.updated_at is not None and out.updated_at > s.get("a").created_at
    data = path.read_bytes()
    assert b"\r" not in data
    assert data.endswith(b"---\nline1\nline2, changed\n")


def test_an_lf_file_whose_body_holds_crlf_is_compared_byte_for_byte(tmp_path: Path) -> None:
    """md-cg writes ``\\n`` fences: a body given with ``\\r\\n`` is its text, so a re-import
    that gives the body with ``\\n`` ends is a change (written), and the same body is not."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="a", layer="knowledge", body="line1\r\nline2")
        path = s.path_of("a")
        data, mtime = path.read_bytes(), path.stat().st_mtime_ns
        s.add_many([copy.deepcopy(s.get("a"))], overwrite=True)
        assert (path.read_bytes(), path.stat().st_mtime_ns) == (data, mtime)
        node = s.get("a")
        node.body = "line1\nline2"
        s.add_many([node], overwrite=True)
        assert s.get("a").body == "line1\nline2"
    assert path.read_bytes().endswith(b"---\nline1\nline2\n")


def test_an_import_rerun_reports_a_crlf_file_unchanged_and_leaves_it(tmp_path: Path) -> None:
    """``write_outcome`` (what an import or a migration plans with) said ``updated`` for a
    file with ``\\r\\n`` ends, and the import rewrote it; an archived one was refused as
    ``archived here with other content``."""
    root = tmp_path / "m"
    dump = tmp_path / "dump.jsonl"
    with MdCG(root) as s:
        s.add(id="a", layer="knowledge", body="line1\nline2", tags=["t"])
        s.add(id="z", layer="knowledge", body="archived one\nsecond line")
        s.archive(["z"])
        export_nodes(s, dump, include_archived=True)
        paths = [s.path_of("a"), s.path_of("z", include_archived=True)]
    datas = [_crlf_copy(p) for p in paths]
    mtimes = [p.stat().st_mtime_ns for p in paths]
    with MdCG(root) as s:
        s.sync()
        assert s.write_outcome(s.get("a")) == "unchanged"
        report = import_nodes(s, dump, overwrite=True)
        assert (report.created, report.updated, report.unchanged) == (0, 0, 2)
    assert [p.read_bytes() for p in paths] == datas
    assert [p.stat().st_mtime_ns for p in paths] == mtimes
