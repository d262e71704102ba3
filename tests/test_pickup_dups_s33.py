"""Session 33: a long-lived handle's pick-up sees and tells a duplicated id as a sync does.

``sync_if_changed`` (the MCP server runs it before every tool call) reads only the files
its watch names. Review r4: with a memory's file copied by hand into another folder (a
restore from git or a backup) and picked up, removing the copy the index pointed at made
the pick-up report ``deleted ('n1',)`` though the other copy was on disk; the sync line it
logged made a fresh open find no such node, and the MCP server's ``remember`` wrote a
second file beside the survivor. A ``sync()`` told it ``moved``. The pick-up also dropped
``duplicates`` and ``malformed`` from its report. Now the two reach the same view and the
same report: every scenario below is applied to two copies of a store, one handle
watching (``sync_if_changed``), one calling ``sync()``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

import md_cg
from md_cg import MdCG, Node
from md_cg.reports import Moved, SyncReport

RESTORED = "knowledge/restored/pref.md"
BROKEN = (
    "the YAML frontmatter does not parse: did not find expected ',' or ']' (column 1), "
    "while parsing a flow sequence from line 2, column 5"
)


def _env() -> dict[str, str]:
    """A child process's environment: it imports the md_cg this test imported."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(md_cg.__file__).parents[1]), *sys.path])}


def _build(root: Path) -> str:
    """Six memories in one bucket folder; returns the folder (relative to ``root``)."""
    shutil.rmtree(root, ignore_errors=True)
    with MdCG(root) as s:
        for i in range(6):
            s.add(Node(id=f"n{i}", layer="knowledge", tags=["domain:x"], body=f"body {i} word{i}\n"))
        return os.path.dirname(_rel(s, "n0"))


def _rel(h: MdCG, node_id: str) -> str:
    """The store-relative path of ``node_id``'s file (archived ones too)."""
    return h.path_of(node_id, include_archived=True).relative_to(h.root).as_posix()


def _p(root: Path, b: str, i: int) -> Path:
    return root / b / f"n{i}.md"


def _edit(path: Path, old: str, new: str) -> None:
    path.write_text(re.sub(old, new, path.read_text(encoding="utf-8"), count=1, flags=re.M), encoding="utf-8")


def _cp(root: Path, b: str) -> None:  # a second copy of n0, in another folder
    (root / "knowledge/other").mkdir(parents=True, exist_ok=True)
    shutil.copy(_p(root, b, 0), root / "knowledge/other/n0.md")


def _swap(root: Path, b: str) -> None:
    a, c = _p(root, b, 1), _p(root, b, 2)
    ta, tc = a.read_text(), c.read_text()
    a.write_text(tc)
    c.write_text(ta)


def _to_archive(root: Path, b: str) -> None:
    (root / "archive/knowledge/x").mkdir(parents=True)
    _p(root, b, 5).rename(root / "archive/knowledge/x/n5.md")


def _to_rejected(root: Path, b: str) -> None:
    (root / "rejected").mkdir(exist_ok=True)
    _p(root, b, 5).rename(root / "rejected/n5.md")


def _cp_then_rm(root: Path, b: str) -> None:
    _cp(root, b)
    time.sleep(0.05)
    _p(root, b, 0).unlink()


Step = Callable[[Path, str], None]
#: bucket folder -> (added, changed, deleted, moved, malformed, duplicates)
Want = Callable[[str], tuple[Any, ...]]
NONE: tuple[Any, ...] = ((), (), (), (), (), ())

#: name -> the hand changes, each followed by a pick-up (or a sync), and what each is told
SCENARIOS: dict[str, list[tuple[Step, Want]]] = {
    "cp": [(_cp, lambda b: ((), (), (), (), (), (("n0", "knowledge/other/n0.md"),)))],
    "swap": [
        (
            _swap,
            lambda b: (
                (),
                (),
                (),
                (Moved("n1", f"{b}/n1.md", f"{b}/n2.md"), Moved("n2", f"{b}/n2.md", f"{b}/n1.md")),
                (),
                (),
            ),
        )
    ],
    "id_new": [
        (
            lambda r, b: _edit(_p(r, b, 3), '^id: "n3"', 'id: "n3new"'),
            lambda b: (("n3new",), (), ("n3",), (), (), ()),
        )
    ],
    # n4's own file still holds it: the edited file takes nothing over (and the first look
    # of either kind does not name it a duplicate yet -- the next sync does: see the report)
    "id_existing": [
        (lambda r, b: _edit(_p(r, b, 3), '^id: "n3"', 'id: "n4"'), lambda b: ((), (), ("n3",), (), (), ()))
    ],
    "rename": [
        (
            lambda r, b: _p(r, b, 1).rename(r / b / "zz.md"),
            lambda b: ((), (), (), (Moved("n1", f"{b}/n1.md", f"{b}/zz.md"),), (), ()),
        )
    ],
    "broken": [
        (
            lambda r, b: _edit(_p(r, b, 2), "^id:", "id: ["),
            # still there, unreadable: malformed, not deleted (syncreport-s33, review r2)
            lambda b: ((), (), (), (), ((f"{b}/n2.md", BROKEN),), ()),
        )
    ],
    "dir_mv": [
        (
            lambda r, b: (r / b).rename(r / "knowledge/renamed_bucket"),
            lambda b: (
                (),
                (),
                (),
                tuple(Moved(f"n{i}", f"{b}/n{i}.md", f"knowledge/renamed_bucket/n{i}.md") for i in range(6)),
                (),
                (),
            ),
        )
    ],
    "dir_rm": [
        (lambda r, b: shutil.rmtree(r / b), lambda b: ((), (), tuple(f"n{i}" for i in range(6)), (), (), ()))
    ],
    "to_archive": [
        (
            _to_archive,
            lambda b: ((), (), (), (Moved("n5", f"{b}/n5.md", "archive/knowledge/x/n5.md"),), (), ()),
        )
    ],
    "to_rejected": [
        (_to_rejected, lambda b: ((), (), (), (Moved("n5", f"{b}/n5.md", "rejected/n5.md"),), (), ()))
    ],
    "cp_then_rm": [
        (_cp_then_rm, lambda b: ((), (), (), (Moved("n0", f"{b}/n0.md", "knowledge/other/n0.md"),), (), ()))
    ],
    # review r4's finding: the copy picked up first, then the file the index points at removed
    "cp_picked_then_rm": [
        (_cp, lambda b: ((), (), (), (), (), (("n0", "knowledge/other/n0.md"),))),
        (
            lambda r, b: _p(r, b, 0).unlink(),
            lambda b: ((), (), (), (Moved("n0", f"{b}/n0.md", "knowledge/other/n0.md"),), (), ()),
        ),
    ],
    # ... or the other copy removed: the record of it goes, nothing is told
    "cp_picked_then_rm_copy": [
        (_cp, lambda b: ((), (), (), (), (), (("n0", "knowledge/other/n0.md"),))),
        (lambda r, b: (r / "knowledge/other/n0.md").unlink(), lambda b: NONE),
    ],
}


def _told(report: SyncReport | None) -> tuple[Any, ...]:
    if report is None:
        return NONE
    return (report.added, report.changed, report.deleted, report.moved, report.malformed, report.duplicates)


def _view(h: MdCG) -> dict[str, tuple[str, str]]:
    return {
        i: (_rel(h, i), h.get(i, include_archived=True).body) for i in sorted(h.ids(include_archived=True))
    }


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_pickup_tells_and_sees_what_a_sync_does(tmp_path: Path, name: str) -> None:
    told: dict[str, list[tuple[Any, ...]]] = {}
    views: dict[str, dict[str, tuple[str, str]]] = {}
    for mode in ("watch", "sync"):
        root = tmp_path / mode
        b = _build(root)
        h = MdCG(root)
        try:
            assert h.sync_if_changed() is None
            told[mode] = []
            for step, _want in SCENARIOS[name]:
                step(root, b)
                told[mode].append(_told(h.sync_if_changed() if mode == "watch" else h.sync()))
            views[mode] = _view(h)
        finally:
            h.close()
        with MdCG(root) as again:  # what the pick-up logged is what a sync finds
            assert _view(again) == views[mode]
    assert told["watch"] == [want(b) for _step, want in SCENARIOS[name]] == told["sync"]
    assert views["watch"] == views["sync"]


_READER = """
import json, sys
from md_cg import MdCG
with MdCG(sys.argv[1], read_only=True) as s:
    hits = s.search("hello one", record=False)[0]
    rel = s.path_of("n1").relative_to(s.root).as_posix()
    print(json.dumps([sorted(s.ids()), rel, s.get("n1").body, [r.id for r in hits]]))
"""


def test_the_surviving_copy_is_what_other_processes_see(tmp_path: Path) -> None:
    """f1/f1b: the pick-up logs a move, so a fresh process (no sync of its own) holds n1."""
    root = tmp_path / "s"
    with MdCG(root) as s:
        s.add(Node(id="n1", layer="knowledge", body="hello one\n"))
        s.add(Node(id="n2", layer="knowledge", body="hello two\n"))
    with MdCG(root) as h:
        assert h.sync_if_changed() is None
        first = _rel(h, "n1")
        (root / "knowledge/moved").mkdir()
        shutil.copy2(root / first, root / "knowledge/moved/n1.md")
        os.utime(root / "knowledge/moved/n1.md")  # the newer copy: the index keeps the first
        assert _told(h.sync_if_changed()) == ((), (), (), (), (), (("n1", "knowledge/moved/n1.md"),))
        (root / first).unlink()
        assert _told(h.sync_if_changed()) == (
            (),
            (),
            (),
            (Moved("n1", first, "knowledge/moved/n1.md"),),
            (),
            (),
        )
        assert (sorted(h.ids()), h.get("n1").body) == (["n1", "n2"], "hello one\n")
    out = subprocess.run(
        [sys.executable, "-c", _READER, str(root)], env=_env(), capture_output=True, text=True, check=True
    ).stdout
    # n1 first in the hits: it matches both words
    assert json.loads(out) == [["n1", "n2"], "knowledge/moved/n1.md", "hello one\n", ["n1", "n2"]]
    with MdCG(root) as f:
        assert f.sync().clean and f.health().ok


_COMPACTOR = """
import sys
from md_cg import MdCG, Node
with MdCG(sys.argv[1]) as s:
    for i in range(2):  # two snapshots: a handle that followed neither reloads the index
        s.add(Node(id=f"x{i}", layer="knowledge", body=f"other {i}\\n"))
        s.compact_index()
"""


def test_a_copy_the_record_lacks_is_found(tmp_path: Path) -> None:
    """The handle's index reloaded from another process's snapshot (which never saw the
    copy): its record of duplicates is gone, and the pick-up looks for the copy on disk."""
    root = tmp_path / "s"
    with MdCG(root) as s:
        s.add(Node(id="n1", layer="knowledge", body="hello one\n"))
    with MdCG(root) as h:
        assert h.sync_if_changed() is None
        first = _rel(h, "n1")
        (root / "knowledge/moved").mkdir()
        shutil.copy(root / first, root / "knowledge/moved/n1.md")
        assert _told(h.sync_if_changed()) == ((), (), (), (), (), (("n1", "knowledge/moved/n1.md"),))
        state = h._engine.state
        subprocess.run([sys.executable, "-c", _COMPACTOR, str(root)], env=_env(), check=True)
        (root / first).unlink()
        report = h.sync_if_changed()
        assert h._engine.state is not state  # reloaded: the record of the copy was not carried over
        assert _told(report) == ((), (), (), (Moved("n1", first, "knowledge/moved/n1.md"),), (), ())
        assert (sorted(h.ids()), h.get("n1").body) == (["n1", "x0", "x1"], "hello one\n")


def test_the_mcp_server_keeps_the_surviving_copy(tmp_path: Path) -> None:
    """f1d through a real ``mdcg mcp`` process: a memory's file copied by hand, a tool call
    (the pick-up), the file the index used removed. ``get`` serves the copy, and a
    ``remember`` of the id is refused instead of writing a second file beside it."""
    root = tmp_path / "s"
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "md_cg.cli", "mcp", "--root", str(root)], env=_env()
    )

    async def call(s: ClientSession, name: str, args: dict[str, Any]) -> tuple[bool, str]:
        r = await s.call_tool(name, args)
        return bool(r.is_error), r.content[0].text  # type: ignore[union-attr]

    async def run() -> None:
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            err, text = await call(s, "remember", {"id": "pref", "body": "The user prefers metric units."})
            first = Path(json.loads(text)["path"])
            assert not err and first == root / "knowledge/orphan/pref.md"
            (root / "knowledge/restored").mkdir()
            shutil.copy(first, root / "knowledge/restored/pref.md")
            err, text = await call(s, "search", {"query": "metric units"})
            assert [h["id"] for h in json.loads(text)["results"]] == ["pref"]
            first.unlink()
            err, text = await call(s, "get", {"id": "pref"})
            assert not err, text  # it was: "no node with id 'pref' in this store"
            got = json.loads(text)
            assert (got["path"], got["body"]) == (
                str(root / "knowledge/restored/pref.md"),
                "The user prefers metric units.",
            )
            err, text = await call(s, "remember", {"id": "pref", "body": "The user prefers imperial units."})
            assert (err, text) == (
                True,
                "Error executing tool remember: a memory with id 'pref' already exists "
                "(knowledge/restored/pref.md); change it with the `update` tool, or call `remember` "
                "with overwrite=true to replace it",
            )
            err, text = await call(s, "sync", {})
            synced = json.loads(text)
            assert (synced["moved"], synced["deleted"], synced["duplicates"]) == (
                [{"node_id": "pref", "old_path": "knowledge/orphan/pref.md", "new_path": RESTORED}],
                [],
                [],
            )

    async def bounded() -> None:
        with anyio.fail_after(90):
            await run()

    anyio.run(bounded)
    holding = sorted(
        p.relative_to(root).as_posix() for p in root.rglob("*.md") if 'id: "pref"' in p.read_text()
    )
    assert holding == ["knowledge/restored/pref.md"]
    assert (root / "knowledge/restored/pref.md").read_text().endswith("The user prefers metric units.\n")


def test_a_copy_is_told_once_not_at_every_scan(tmp_path: Path) -> None:
    """A stat scan (the first pick-up, one after the watch lost events, every call without
    inotify) settles every file no entry holds again: the copy already recorded is not
    told again while nothing changed (a sync lists it at every call)."""
    root = tmp_path / "s"
    with MdCG(root) as s:
        s.add(Node(id="n1", layer="knowledge", body="hello one\n"))
    with MdCG(root) as h:
        assert h.sync_if_changed() is None
        (root / "knowledge/moved").mkdir()
        shutil.copy(h.path_of("n1"), root / "knowledge/moved/n1.md")
        assert _told(h.sync_if_changed()) == ((), (), (), (), (), (("n1", "knowledge/moved/n1.md"),))
        for _ in range(2):
            h._hand_edits.close()  # as after a lost event: the next call scans every file
            assert h.sync_if_changed(0) is None
        assert h.sync().duplicates == (("n1", "knowledge/moved/n1.md"),)
