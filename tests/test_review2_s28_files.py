"""Review round 2, session 28: a read-only file system's error names the path; a binary
``.md`` file is no note; the ``misplaced_file`` wording of a note without frontmatter."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from md_cg import MdCG, fsops
from md_cg.cli import app, os_error_message
from md_cg.errors import MalformedNodeFileError
from md_cg.nodefile import loads

RO = (
    "the store's file system is read-only; nothing was changed: reading commands work, "
    "writing ones need it mounted writable"
)


def test_the_read_only_message_names_the_path() -> None:
    exc = OSError(errno.EROFS, "Read-only file system", ".mdcg/locks/10.lock")
    assert os_error_message(exc, "add") == f".mdcg/locks/10.lock: {RO}"
    assert os_error_message(OSError(errno.EROFS, "Read-only file system"), "add") == RO


def test_a_write_refused_by_a_read_only_file_system_names_the_file_below_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The system call opens a bare name in a folder fd (``10.lock``): md-cg names it
    relative to the store."""
    runner = CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "200"})
    root = tmp_path / "m"
    assert runner.invoke(app, ["--root", str(root), "add", "--id", "kept", "binary search"]).exit_code == 0
    real_open = os.open

    def read_only(path, flags, mode=0o777, *, dir_fd=None):  # type: ignore[no-untyped-def]
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(errno.EROFS, "Read-only file system", path)
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(fsops.os, "open", read_only)
    out = runner.invoke(app, ["--root", str(root), "add", "--id", "lost", "x"])
    assert out.exit_code == 2
    first, rest = out.stderr.split(": the store's", 1)
    assert first.startswith("error: .mdcg/") and first.endswith(".lock")
    assert f"the store's{rest}" == RO + "\n"


def test_a_temp_file_refused_is_named_with_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "self").mkdir()
    real_open = os.open

    def read_only(path, flags, mode=0o777, *, dir_fd=None):  # type: ignore[no-untyped-def]
        if flags & os.O_CREAT:
            raise OSError(errno.EROFS, "Read-only file system", path)
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(fsops.os, "open", read_only)
    with fsops.Dir(str(tmp_path), "self") as d, pytest.raises(OSError) as caught:
        d.write_temp("x.md", b"text")
    assert caught.value.errno == errno.EROFS
    assert str(caught.value.filename).startswith("self/.x.md.")


@pytest.mark.parametrize("data", [b"\x00" * 5000, b"some text\x00more\n"])
def test_a_file_without_frontmatter_holding_nul_is_binary_not_a_note(tmp_path: Path, data: bytes) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(body="a real memory", id="real")
    folder = root / "knowledge" / "orphan"
    (folder / "nullbytes.md").write_bytes(data)
    at = data.index(b"\x00")
    why = f"a binary file, not a note: no frontmatter and a NUL byte at byte {at}"
    with MdCG(root) as s:
        report = s.sync()
        assert report.malformed == (("knowledge/orphan/nullbytes.md", why),)
        assert sorted(s.ids()) == ["real"]
        found = [(f.kind, f.path, f.detail) for f in s.health().findings]
        assert found == [("unreadable_file", "knowledge/orphan/nullbytes.md", why)]


def test_a_nul_in_the_body_of_a_file_with_frontmatter_is_still_read() -> None:
    """docs/format.md: imports carry their sources as they are, and such a file is read."""
    node = loads("---\nid: n\nlayer: self\n---\nab\x00c\n", "self/n.md", default_id="n", default_layer="self")
    assert node.body == "ab\x00c"
    with pytest.raises(MalformedNodeFileError, match="a binary file, not a note"):
        loads("ab\x00c\n", "self/n.md", default_id="n", default_layer="self")


def test_misplaced_wording_of_a_note_without_frontmatter(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(body="python sorting", id="k1", tags=["domain:python"])
        bucket = s.entry("k1").path.split("/")[1]
    (root / "knowledge" / bucket / "plain.md").write_text("a plain note\n")
    (root / "knowledge" / "orphan").mkdir(exist_ok=True)
    (root / "knowledge" / "orphan" / "tagged.md").write_text(
        "---\nid: tagged\nlayer: knowledge\ntags: [domain:python]\n---\nmore python\n"
    )
    (root / "self").mkdir(exist_ok=True)
    (root / "self" / "wrong.md").write_text("---\nid: wrong\nlayer: contextual\n---\nwrong layer\n")
    with MdCG(root) as s:
        s.sync()
        found = {f.node_id: f.detail for f in s.health().by_kind("misplaced_file")}
    assert found == {
        "plain": "it has no bucket key (no domain: tag, no condition space; a note without frontmatter "
        "has neither), so it belongs at knowledge/orphan/plain.md",
        "tagged": "its bucket key (a domain: tag or its condition space) puts it at "
        f"knowledge/{bucket}/tagged.md",
        "wrong": "its frontmatter's layer (contextual) puts it at contextual/wrong.md",
    }
