"""Session 31: a scoped handle is told of the memories of its scope deleted by hand.

A scoped handle's ``sync()`` and ``sync_if_changed()`` filtered their reports by what
the scope sees after the sync -- and a node deleted by hand is held by nothing then, so
no deletion was ever told to a scope, not even of an unscoped shared memory. The MCP
server always runs with a scope (``mdcg mcp`` passes ``Scope()`` when no ``--agent`` is
given), so its ``sync`` tool, after a hand ``rm`` of x and an edit of y, said
``changed ['y'], deleted []``. Now a deletion (a hand rename of the id too) is told when
the scope admitted the node as the index held it before the sync removed it; another
scope's memory deleted by hand is still never named. The memories are written, and the
files removed, edited and renamed, by processes of their own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import md_cg
from md_cg import MdCG, Scope
from md_cg.reports import Moved

_ENV = {**os.environ, "PYTHONPATH": str(Path(md_cg.__file__).resolve().parent.parent)}
_ENV.pop("MDCG_ROOT", None)

#: id -> the scope fields of the memory written under it
MEMORIES: dict[str, dict[str, str]] = {
    "x": {},  # shared, deleted by hand: told
    "y": {},  # shared, edited by hand: told
    "k": {},  # shared, left alone
    "r": {},  # shared, its id renamed by hand (r -> r2): r told deleted, r2 added
    "mv": {},  # shared, moved by hand (same scope): told as moved
    "gone_b": {"agent_scope": "b"},  # deleted by hand: another agent's, never named
    "out": {},  # shared, moved by hand and given to agent b: not named
    "sec": {"sensitivity": "secret"},  # deleted by hand: above the scope's sensitivity
    "ws": {"workspace_scope": "w"},  # deleted by hand: another workspace's
    "brk": {},  # shared, its file broken by hand: counted (withheld), not named
}
NEVER = ("gone_b", "out", "sec", "ws", "brk")


def _write(root: Path, memories: dict[str, dict[str, str]]) -> None:
    """Write ``memories`` through md-cg in a process of its own."""
    code = (
        "import json, sys\n"
        "from md_cg import MdCG\n"
        "with MdCG(sys.argv[1]) as s:\n"
        "    for i, kw in json.loads(sys.argv[2]).items():\n"
        "        s.add(id=i, layer='contextual', body=f'memory {i} about okapis', **kw)\n"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(root), json.dumps(memories)],
        env=_ENV,
        check=True,
        capture_output=True,
    )


def _by_hand(root: Path, *, rm: tuple[str, ...] = (), edit: tuple[str, ...] = (), extra: str = "") -> None:
    """What a person does to the files, in a process of its own: ``rm`` files, append a
    line to others, and ``extra`` (Python run with ``c`` the contextual folder)."""
    code = (
        "import sys, pathlib\n"
        "c = pathlib.Path(sys.argv[1]) / 'contextual'\n"
        "for i in sys.argv[2].split(','):\n"
        "    if i: (c / f'{i}.md').unlink()\n"
        "for i in sys.argv[3].split(','):\n"
        "    if i: (c / f'{i}.md').write_text((c / f'{i}.md').read_text() + '\\nedited by hand\\n')\n"
        f"{extra}\n"
    )
    args = [sys.executable, "-c", code, str(root), ",".join(rm), ",".join(edit)]
    subprocess.run(args, env=_ENV, check=True, capture_output=True)


#: r renamed to r2 (its id too), mv moved to mv_moved.md, out moved and given to agent b
RENAMES = (
    "t = (c / 'r.md').read_text()\n"
    "(c / 'r2.md').write_text(t.replace('id: r\\n', 'id: r2\\n').replace('id: \"r\"', 'id: \"r2\"'))\n"
    "(c / 'r.md').unlink()\n"
    "(c / 'mv.md').rename(c / 'mv_moved.md')\n"
    "t = (c / 'out.md').read_text()\n"
    "(c / 'out_b.md').write_text(t.replace('\\nlayer:', '\\nagent_scope: \"b\"\\nlayer:', 1))\n"
    "(c / 'out.md').unlink()\n"
    "(c / 'brk.md').write_text((c / 'brk.md').read_text().replace('---\\n', '---\\ntags: [oops\\n', 1))\n"
)


def _hand_all(root: Path) -> None:
    _by_hand(root, rm=("x", "gone_b", "sec", "ws"), edit=("y",), extra=RENAMES)


def _check_out(root: Path) -> None:
    """The hand edits did what they mean to: r2 holds the renamed id, out is agent b's."""
    with MdCG(root) as full:
        full.sync()
        assert full.entry("r2").path == "contextual/r2.md"
        assert full.entry("out").agent_scope == "b"
        assert full.entry("mv").path == "contextual/mv_moved.md"
        assert [p for p, _ in full.unreadable_files()] == ["contextual/brk.md"]


EXPECTED = (
    ("r2",),
    ("y",),
    ("r", "x"),
    (Moved("mv", "contextual/mv.md", "contextual/mv_moved.md"),),
)


def _lists(report: Any) -> tuple[Any, ...]:
    return (report.added, report.changed, report.deleted, report.moved)


def _named(report: Any) -> set[str]:
    text = json.dumps(report.to_dict())
    return {i for i in NEVER if f'"{i}"' in text or f"/{i}." in text or f"/{i}_" in text}


def test_a_scoped_sync_names_the_deletions_of_its_scope_alone(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _write(root, MEMORIES)
    with MdCG(root, scope=Scope()) as scoped:
        assert scoped.sync().clean
        _hand_all(root)
        report = scoped.sync()
    assert _lists(report) == EXPECTED
    assert _named(report) == set()
    assert (report.withheld, report.malformed) == (1, ())
    _check_out(root)


def test_a_scoped_pick_up_names_the_deletions_of_its_scope_alone(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _write(root, MEMORIES)
    with MdCG(root, scope=Scope()) as scoped:
        assert scoped.sync_if_changed(min_interval=0) is None  # the first look: nothing changed
        _hand_all(root)
        report = scoped.sync_if_changed(min_interval=0)
        assert report is not None
        assert _lists(report) == EXPECTED
        assert _named(report) == set()
        _by_hand(root, rm=("k",))
        assert _lists(scoped.sync_if_changed(min_interval=0)) == ((), (), ("k",), ())
    _check_out(root)


def test_another_scopes_deletion_alone_is_no_pick_up(tmp_path: Path) -> None:
    """Only other scopes' memories deleted: nothing to tell, as for their edits."""
    root = tmp_path / "m"
    _write(root, MEMORIES)
    with MdCG(root, scope=Scope()) as scoped:
        assert scoped.sync_if_changed(min_interval=0) is None
        _by_hand(root, rm=("gone_b", "sec", "ws"))
        assert scoped.sync_if_changed(min_interval=0) is None
        assert _lists(scoped.sync()) == ((), (), (), ())


def test_an_agent_is_told_of_its_own_and_shared_deletions_not_anothers(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _write(root, {"mine": {"agent_scope": "a"}, "shared": {}, "theirs": {"agent_scope": "b"}, "k": {}})
    with MdCG(root, scope=Scope(agent="a")) as a:
        assert a.sync().clean
        _by_hand(root, rm=("mine", "shared", "theirs"))
        told = a.sync()
    assert _lists(told) == ((), (), ("mine", "shared"), ())
    assert "theirs" not in json.dumps(told.to_dict())


def test_the_mcp_sync_tool_lists_the_deletions_of_its_scope(tmp_path: Path) -> None:
    """r: with a hand ``rm`` of x and an edit of y, the server said changed ['y'],
    deleted []. Through the pick-up before a call and through the sync tool's own sync."""
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client

    from md_cg.mcp_server import create_server

    root = tmp_path / "m"
    _write(root, MEMORIES | {"w": {}, "w_b": {"agent_scope": "b"}})
    server = create_server(root, scope=Scope())  # what `mdcg mcp` serves without --agent

    async def run() -> dict[str, Any]:
        async with Client(server) as client:
            await client.call_tool("list", {})  # the first pick-up: nothing changed
            _hand_all(root)
            await client.call_tool("list", {})  # the pick-up takes the hand edits in
            result = await client.call_tool("sync", {})
            assert not result.is_error, result.content[0].text
            return json.loads(result.content[0].text)

    synced = anyio.run(run)
    assert (synced["added"], synced["changed"], synced["deleted"]) == (["r2"], ["y"], ["r", "x"])
    assert synced["moved"] == [
        {"node_id": "mv", "old_path": "contextual/mv.md", "new_path": "contextual/mv_moved.md"}
    ]
    assert all(f'"{i}"' not in json.dumps(synced) for i in NEVER)
    _by_hand(root, rm=("w", "w_b"))
    direct = server.tools["sync"]()  # no pick-up before it: the tool's sync takes them in
    assert (direct["added"], direct["changed"], direct["deleted"], direct["moved"]) == ([], [], ["w"], [])
    assert "w_b" not in json.dumps(direct)
    server.store.close()
    _check_out(root)
