"""Session 33 (review r3): a memory whose file grew past the size limit by hand.

``fsops.read_file(..., max_bytes=...)`` gives a larger file's bytes as empty and leaves
the size check to the caller. ``read_text`` (``mdcg show``), ``edit_text``, the move of a
file to another layer or to ``archive/``, and a few probes did not check: ``mdcg show``
of a 5.4 MB memory printed nothing and exited 0 (``show ID > backup.md`` made an empty
backup), ``show --json`` gave ``"text": ""`` and ``archive`` said the file was empty.
Every read of a node file now goes through ``index.read_limited``, which names the file
and its size, as ``get`` did.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from md_cg import MdCG
from md_cg.cli import app
from md_cg.errors import MalformedNodeFileError

_LIMIT = "the file is 5,400,130 bytes, more than the 4,194,304-byte limit"


def _grown(tmp_path: Path) -> tuple[Path, Path, str]:
    """A store with memory ``big`` whose file a hand edit grew to 5,400,130 bytes."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="big", layer="knowledge", body="a memory")
        s.add(id="small", layer="knowledge", body="another memory")
        rel = s._engine.state.entries["big"].path
    path = root / rel
    with path.open("a", encoding="utf-8") as f:
        f.write("hand-written line\n" * 300_000)
    assert path.stat().st_size == 5_400_130
    return root, path, rel


def _digest(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*.md")
        if ".mdcg" not in p.parts
    }


def test_cli_show_get_and_archive_name_the_file_and_its_size(tmp_path: Path) -> None:
    root, _path, rel = _grown(tmp_path)
    before = _digest(root)
    runner = CliRunner(env={"MDCG_ROOT": None})
    expected = f"error: {rel}: {_LIMIT}\n"
    for command in (["show", "big"], ["show", "big", "--json"], ["get", "big"], ["archive", "big"]):
        result = runner.invoke(app, [*command, "--root", str(root)])
        assert (result.exit_code, result.stdout, result.stderr) == (2, "", expected), command
    assert _digest(root) == before  # nothing written, nothing lost


def test_library_reads_and_moves_raise_the_size_error(tmp_path: Path) -> None:
    root, _path, rel = _grown(tmp_path)
    before = _digest(root)
    with MdCG(root) as s:
        for call in (
            lambda: s.read_text("big"),
            lambda: s.edit_text("big", lambda text: text + "more"),
            lambda: s.move("big", "contextual"),
            lambda: s.archive("big"),
        ):
            with pytest.raises(MalformedNodeFileError) as err:
                call()
            assert str(err.value) == f"{rel}: {_LIMIT}"
        assert s.read_text("small").endswith("another memory\n")
    assert _digest(root) == before
    with MdCG(root, read_only=True) as s, pytest.raises(MalformedNodeFileError):
        s.read_text("big")


def test_a_file_shrunk_back_under_the_limit_reads_again(tmp_path: Path) -> None:
    root, path, _rel = _grown(tmp_path)
    text = path.read_text(encoding="utf-8")
    path.write_text(text[: text.index("hand-written line")], encoding="utf-8")
    result = CliRunner(env={"MDCG_ROOT": None}).invoke(app, ["show", "big", "--json", "--root", str(root)])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["text"].endswith("a memory\n")
