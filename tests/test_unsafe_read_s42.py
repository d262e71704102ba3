"""A memory's file replaced by hand by a symlink, a folder or a FIFO is named when read
(session 42, attack atk11 F10).

``get`` of such a memory (and `mdcg today` passing over such a pick) said only "no node
with id 'p3' in this store", as if the memory were gone, while health listed the path as
``unsafe_path`` and the index still held the id. Now the read raises the lost-file error
a broken file gets: the file named, why it is unusable, and the fix."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from test_today_broken_s41 import _first_pick, _store, _today

from md_cg import MdCG, NodeNotFoundError

SYMLINK = "it is a symlink (md-cg never follows symlinks below the store root)"
ODD = "it is not a regular file"


def _symlink(path: Path) -> None:
    good = path.parents[3] / "elsewhere.md"
    shutil.copy(path, good)
    path.unlink()
    path.symlink_to(good)


def _folder(path: Path) -> None:
    path.unlink()
    path.mkdir()
    (path / "x.md").write_text("hi", encoding="utf-8")


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


CASES = [(_symlink, SYMLINK), (_folder, ODD), (_fifo, ODD)]


def _told(node_id: str, rel: str, why: str) -> str:
    return (
        f"no node with id {node_id!r} in this store (its file {rel} was changed outside md-cg and is "
        f"unusable: {why}; fix it, then run `mdcg sync` (MdCG.sync()))"
    )


@pytest.mark.parametrize(("replace", "why"), CASES)
def test_get_names_the_file_and_why(tmp_path: Path, replace: Callable[[Path], None], why: str) -> None:
    root = tmp_path / "s" / "m"
    with MdCG(root) as s:
        s.add(id="x", body="a note")
        rel = s.entry("x").path
    replace(root / rel)
    with MdCG(root) as s:
        with pytest.raises(NodeNotFoundError) as caught:
            s.get("x")
        assert str(caught.value) == _told("x", rel, why)
        assert caught.value.hidden == "lost"


@pytest.mark.parametrize(("replace", "why"), CASES)
def test_today_passes_over_the_pick_naming_the_file(
    tmp_path: Path, replace: Callable[[Path], None], why: str
) -> None:
    root = tmp_path / "s" / "m"
    _store(root)
    first = _first_pick(root)
    with MdCG(root, read_only=True) as s:
        rel = s.entry(first).path
    replace(root / rel)
    run = _today(root)
    assert run.returncode == 0
    told = _told(first, rel, why)
    assert run.stderr == f"warning: passed over {first!r}, whose file cannot be read: {told}\n"
