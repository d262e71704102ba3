"""Session 31: a scoped handle is told of a memory of its scope deleted by hand after
another process wrote it through md-cg.

Following that process's commit line drops the entry (the file is gone), and the note
the follow leaves for the next sync (``Engine.hand_after``) kept only ``("gone",
path)``: the scope the memory was in was lost, so a scoped ``sync()`` /
``sync_if_changed()`` (and the MCP ``sync`` tool) left the deletion out -- of a shared
memory too -- while a later unscoped sync said ``deleted ('s',)``. The note now keeps
the entry the index held before the follow dropped it, and the scoped report applies
the same rule as for any hand deletion (``Scope.admits`` on that entry): another scope's
memory is still never named. The writer and the person are processes of their own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_scoped_deletions_s31 import _write as _write_memories  # one writer process

import md_cg
from md_cg import MdCG, Scope
from md_cg.errors import NodeNotFoundError

_ENV = {**os.environ, "PYTHONPATH": str(Path(md_cg.__file__).resolve().parent.parent)}
_ENV.pop("MDCG_ROOT", None)

#: id -> the scope fields of the memory written under it
MEMORIES: dict[str, dict[str, str]] = {
    "s": {},  # shared
    "ma": {"agent_scope": "a"},  # agent a's
    "mb": {"agent_scope": "b"},  # agent b's
    "k": {},  # shared, left alone
}
GONE = ("ma", "mb", "s")
#: the scope -> what its sync is told of the three deletions
TOLD = {"shared": ("s",), "a": ("ma", "s")}
#: the scope -> what an unscoped sync after its sync is told: the deletions no sync told
#: yet (session 40: the scoped sync logs those it tells, as it logs those its look finds;
#: before, an unscoped sync told them all again, and after a compaction every fresh
#: process of the scope did -- attack atk8 of session 39, finding 1)
LEFT = {"shared": ("ma", "mb"), "a": ("mb",)}
SCOPES = {"shared": Scope(), "a": Scope(agent="a")}


def _run(code: str, *args: str) -> None:
    subprocess.run([sys.executable, "-c", code, *args], env=_ENV, check=True, capture_output=True)


def _write(root: Path) -> None:
    """Write :data:`MEMORIES` through md-cg in a process of its own."""
    _write_memories(root, MEMORIES)


def _update(root: Path, ids: tuple[str, ...]) -> None:
    """Another process (unscoped) updates ``ids`` through md-cg."""
    code = (
        "import sys\n"
        "from md_cg import MdCG\n"
        "with MdCG(sys.argv[1], auto_compact=None) as s:\n"
        "    for i in sys.argv[2].split(','):\n"
        "        s.update(i, body=f'memory {i} about okapis, updated')\n"
    )
    _run(code, str(root), ",".join(ids))


def _rm(root: Path, ids: tuple[str, ...]) -> None:
    """A person removes the files of ``ids``."""
    code = (
        "import sys, pathlib\n"
        "c = pathlib.Path(sys.argv[1]) / 'contextual'\n"
        "for i in sys.argv[2].split(','):\n"
        "    (c / f'{i}.md').unlink()\n"
    )
    _run(code, str(root), ",".join(ids))


def _lists(report: Any) -> tuple[Any, ...]:
    return (report.added, report.changed, report.deleted, report.moved)


def _unscoped_sync(root: Path) -> tuple[Any, ...]:
    """What a later unscoped sync (a handle of its own) is told: every deletion, as
    before -- a scoped sync logs no line, so it does not take the deletions from it."""
    with MdCG(root) as full:
        return _lists(full.sync())


@pytest.mark.parametrize("who", sorted(SCOPES))
def test_a_scoped_sync_tells_its_deletion_after_anothers_write(tmp_path: Path, who: str) -> None:
    root = tmp_path / "m"
    _write(root)
    with MdCG(root, scope=SCOPES[who]) as scoped:
        assert scoped.sync().clean
        _update(root, GONE)
        _rm(root, GONE)
        report = scoped.sync()
        assert _lists(report) == ((), (), TOLD[who], ())
        assert _lists(scoped.sync()) == ((), (), (), ())  # told once
    assert '"mb"' not in json.dumps(report.to_dict())
    assert _unscoped_sync(root) == ((), (), LEFT[who], ())


@pytest.mark.parametrize("who", sorted(SCOPES))
def test_a_scoped_pick_up_tells_its_deletion_after_anothers_write(tmp_path: Path, who: str) -> None:
    root = tmp_path / "m"
    _write(root)
    with MdCG(root, scope=SCOPES[who]) as scoped:
        assert scoped.sync_if_changed(min_interval=0) is None  # the first look: nothing changed
        _update(root, GONE)
        _rm(root, GONE)
        report = scoped.sync_if_changed(min_interval=0)
        assert report is not None
        assert _lists(report) == ((), (), TOLD[who], ())
        assert '"mb"' not in json.dumps(report.to_dict())
        assert scoped.sync_if_changed(min_interval=0) is None  # told once
    assert _unscoped_sync(root) == ((), (), LEFT[who], ())


@pytest.mark.parametrize("who", sorted(SCOPES))
def test_a_read_that_follows_the_write_keeps_the_scope_for_the_sync(tmp_path: Path, who: str) -> None:
    """The follow is a read's refresh here (``list``), not the sync's: the note it leaves
    keeps the scope until the sync tells it."""
    root = tmp_path / "m"
    _write(root)
    with MdCG(root, scope=SCOPES[who], refresh_interval=0) as scoped:
        assert scoped.sync().clean
        _update(root, GONE)
        _rm(root, GONE)
        assert scoped.ids() == ["k"]  # follows the log: the three entries dropped
        with pytest.raises(NodeNotFoundError):
            scoped.get("s")
        assert _lists(scoped.sync()) == ((), (), TOLD[who], ())
    assert _unscoped_sync(root) == ((), (), LEFT[who], ())


def test_another_agents_memory_alone_is_never_told(tmp_path: Path) -> None:
    """Only agent b's memory written and deleted: nothing to tell agent a, nor Scope()."""
    root = tmp_path / "m"
    _write(root)
    with MdCG(root, scope=Scope(agent="a")) as a, MdCG(root, scope=Scope()) as shared:
        assert a.sync_if_changed(min_interval=0) is None
        assert shared.sync().clean
        _update(root, ("mb",))
        _rm(root, ("mb",))
        assert a.sync_if_changed(min_interval=0) is None
        assert _lists(a.sync()) == ((), (), (), ())
        assert _lists(shared.sync()) == ((), (), (), ())
    assert _unscoped_sync(root) == ((), (), ("mb",), ())


def test_the_mcp_sync_tool_lists_a_shared_deletion_after_another_processs_write(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from md_cg.mcp_server import create_server

    root = tmp_path / "m"
    _write(root)
    server = create_server(root, scope=Scope())  # what `mdcg mcp` serves without --agent
    try:
        server.tools["sync"]()
        _update(root, GONE)
        _rm(root, GONE)
        told = server.tools["sync"]()
        assert (told["added"], told["changed"], told["deleted"], told["moved"]) == ([], [], ["s"], [])
        assert '"mb"' not in json.dumps(told) and '"ma"' not in json.dumps(told)
    finally:
        server.store.close()
