"""Session 29: memories in files with Windows line ends (an editor, git's ``core.autocrlf``).

A file whose lines end in ``\\r\\n`` was read with a ``\\r`` at the end of every line of its
body (``'first line\\r\\nsecond line\\r'``), which ``get``, search results and MCP replies
passed on, and the next write kept. Its body is now read by its ``\\n`` lines.
"""

from __future__ import annotations

from pathlib import Path

from md_cg import MdCG


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
